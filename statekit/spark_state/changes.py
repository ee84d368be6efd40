"""Apply a change feed (puts and deletes) to a table: the store as a materialized view.

Example:
    >>> import pandas as pd
    >>> feed = pd.DataFrame({"batch": [1, 1, 2], "change": ["put", "put", "delete"],
    ...                      "k": ["a", "b", "a"], "v": [1, 2, None]})
    >>> apply_changes(feed, key_columns=["k"], value_columns=["v"])
       k    v
    0  b  2.0
"""

from __future__ import annotations

from collections.abc import Sequence

from statekit._lazy import pd

CHANGE_TYPES = ("put", "delete")


def apply_changes(
    changes: pd.DataFrame,
    key_columns: Sequence[str],
    value_columns: Sequence[str],
    start: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """The table left after applying ``changes`` in order to ``start`` (empty by default).

    ``changes`` has a ``change`` column (put/delete) and is applied in row order
    (sort it by batch first); the last change per key wins and a delete removes it.
    Nullable integer value columns (deletes carry no value) come back as int64.
    """
    keys, values = list(key_columns), list(value_columns)
    bad = set(changes["change"].unique()) - set(CHANGE_TYPES) if len(changes) else set()
    if bad:
        raise ValueError(f"unknown change types {sorted(bad)}; accepted: {', '.join(CHANGE_TYPES)}")
    frames = [changes[keys + values + ["change"]]]
    if start is not None:
        frames.insert(0, start[keys + values].assign(change="put"))
    log = pd.concat(frames, ignore_index=True)
    last = log.drop_duplicates(subset=keys, keep="last")
    table = last[last["change"] == "put"].drop(columns="change")
    for column in values:  # deletes made integer columns nullable; a table has no holes
        if isinstance(table[column].dtype, pd.Int64Dtype) and not table[column].isna().any():
            table[column] = table[column].astype("int64")
    return table.sort_values(keys, kind="stable").reset_index(drop=True)


def same_rows(table: pd.DataFrame, expected: pd.DataFrame) -> bool:
    """True when ``table`` holds exactly ``expected``'s rows (any order; dtypes may differ).

    Only ``expected``'s columns are compared, so a table with extra columns (say a
    ``partition``) can be checked against a narrower one.

    Example:
        >>> same_rows(pd.DataFrame({"k": ["b", "a"], "v": [2, 1]}),
        ...           pd.DataFrame({"k": ["a", "b"], "v": [1.0, 2.0]}))
        True
    """
    columns = list(expected.columns)
    if len(table) != len(expected) or not set(columns) <= set(table.columns):
        return False
    left = table[columns].sort_values(columns, ignore_index=True)
    right = expected.sort_values(columns, ignore_index=True)
    try:
        pd.testing.assert_frame_equal(left, right, check_dtype=False)
    except AssertionError:
        return False
    return True
