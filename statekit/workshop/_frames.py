"""Compare a learner's table with the expected one, row by row: what is missing, extra, different.

Example:
    >>> import pandas as pd
    >>> want = pd.DataFrame({"k": ["a", "b"], "n": [1, 2]})
    >>> [p.text for p in compare_rows(want.iloc[:1], want, ["k"], ["n"], "the store")]
    ["1 of the store's 2 rows are missing from your table, e.g. {'k': 'b'}"]
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from statekit.workshop.answers import instants
from statekit.workshop.verdict import Point


def _example(frame: pd.DataFrame, columns: Sequence[str]) -> dict:
    row = frame.iloc[0]
    return {c: (str(row[c]) if isinstance(row[c], pd.Timestamp) else row[c]) for c in columns}


def _same(a: pd.Series, b: pd.Series) -> np.ndarray:
    both_na = a.isna().to_numpy() & b.isna().to_numpy()
    try:
        close = np.isclose(a.astype(float).to_numpy(), b.astype(float).to_numpy())
    except (TypeError, ValueError):
        close = (a.astype(object).to_numpy() == b.astype(object).to_numpy())
    return both_na | close


def _times_alike(given: pd.DataFrame, expected: pd.DataFrame
                 ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Both tables with every time column of ``expected`` read alike (UTC, no zone): a
    learner's zone, epoch numbers or text become the same instants (``answers.instants``)."""
    times = [c for c in expected.columns if c in given.columns and (
        pd.api.types.is_datetime64_any_dtype(expected[c].dtype))]
    if not times:
        return given, expected
    given, expected = given.copy(), expected.copy()
    for column in times:
        expected[column] = instants(expected[column]).astype("datetime64[ns]")
        given[column] = instants(given[column]).astype("datetime64[ns]")
    return given, expected


def compare_rows(given: object, expected: pd.DataFrame, key_columns: Sequence[str],
                 value_columns: Sequence[str], what: str) -> list[Point]:
    """Points saying whether ``given`` holds exactly ``expected``'s rows (by key, values equal)."""
    if not isinstance(given, pd.DataFrame):
        return [Point(False, f"your answer is a {type(given).__name__}; a pandas DataFrame "
                             f"with the columns {[*key_columns, *value_columns]} is expected")]
    lacking = [c for c in (*key_columns, *value_columns) if c not in given.columns]
    if lacking:
        return [Point(False, f"your table lacks the column(s) {lacking}; {what} has "
                             f"{[*key_columns, *value_columns]}")]
    keys = list(key_columns)
    given, expected = _times_alike(given, expected)
    both = expected[[*keys, *value_columns]].merge(
        given[[*keys, *value_columns]], on=keys, how="outer", suffixes=("", "_given"),
        indicator=True)
    missing = both[both["_merge"] == "left_only"]
    extra = both[both["_merge"] == "right_only"]
    matched = both[both["_merge"] == "both"]
    points = []
    if len(missing):
        points.append(Point(False, f"{len(missing)} of {what}'s {len(expected)} rows are missing "
                                   f"from your table, e.g. {_example(missing, keys)}"))
    if len(extra):
        points.append(Point(False, f"{len(extra)} rows of your table are not in {what}, "
                                   f"e.g. {_example(extra, keys)}"))
    for column in value_columns:
        differ = matched[~_same(matched[column], matched[f"{column}_given"])]
        if len(differ):
            row = differ.iloc[0]
            points.append(Point(False, f"{column} differs in {len(differ)} rows, e.g. "
                                       f"{_example(differ, keys)}: {what} has {row[column]}, "
                                       f"yours {row[f'{column}_given']}"))
    if given.duplicated(keys).any():
        points.append(Point(False, f"your table has {int(given.duplicated(keys).sum())} "
                                   f"duplicate keys; a store holds one row per key {keys}"))
    if not points:
        points.append(Point(True, f"all {len(expected)} rows of {what} match, key by key"))
    return points
