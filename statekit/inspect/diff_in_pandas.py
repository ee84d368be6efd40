"""``statekit.diff`` of two pandas frames (what ``snapshot()`` returned, or your own): merged
by key (a missing key meets a missing key), compared value by value where two missing
values are equal; a key with several rows (a join side's or list state's snapshot) compared
by the whole list of its rows.

Example:
    >>> old = pd.DataFrame({"k": ["a", "a", "b"], "v": [1.0, 2.0, float("nan")]})
    >>> new = pd.DataFrame({"k": ["a", "a", "b"], "v": [1.0, 3.0, float("nan")]})
    >>> pandas_diff(old, new, ["k"]).counts.to_dict()
    {'added': 0, 'removed': 0, 'changed': 1, 'unchanged': 1}
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from statekit.errors import BadArgument
from statekit.inspect.diff_result import (
    CHANGE,
    KINDS,
    NEW,
    NOT_VALUES,
    OLD,
    StateDiff,
    ordered,
    shape_text,
)
from statekit.inspect.lists import ROWS


def _frame_keys(frame: pd.DataFrame, keys: Sequence[str] | None, which: str) -> list[str]:
    if keys is not None:
        chosen = [keys] if isinstance(keys, str) else list(keys)
    elif "key_columns" in frame.attrs:
        chosen = list(frame.attrs["key_columns"])
    else:
        raise BadArgument("keys", None, f"the key columns of the {which} frame (its attrs do "
                                        f"not name them: it did not come from snapshot()); "
                                        f"its columns: {list(frame.columns)}")
    missing = [k for k in chosen if k not in frame.columns]
    if missing or not chosen:
        raise BadArgument("keys", keys if keys is not None else chosen,
                          f"columns of the {which} frame: {list(frame.columns)}")
    return chosen


def _label(frame: pd.DataFrame, which: str) -> str:
    attrs = frame.attrs
    if "checkpoint" in attrs:
        name = f" {attrs['name']!r}" if "name" in attrs else ""
        batch = f" batch {attrs['batch']}" if "batch" in attrs else ""
        return f"{which} frame: {attrs['checkpoint']!r}{name}{batch}"
    return f"{which} frame ({len(frame):,} rows)"


def pandas_diff(old: pd.DataFrame, new: pd.DataFrame,
                 keys: Sequence[str] | None) -> StateDiff:
    key_old, key_new = _frame_keys(old, keys, "old"), _frame_keys(new, keys, "new")
    values_old = [c for c in old.columns if c not in key_old and c not in NOT_VALUES]
    values_new = [c for c in new.columns if c not in key_new and c not in NOT_VALUES]
    if key_old != key_new or values_old != values_new:
        def shape(frame: pd.DataFrame, k: list[str], v: list[str]) -> str:
            return shape_text(k, v, {c: str(frame[c].dtype) for c in (*k, *v)})

        raise BadArgument("new", _label(new, "new"),
                          f"a snapshot of the same shape as old: old has "
                          f"{shape(old, key_old, values_old)}; new has "
                          f"{shape(new, key_new, values_new)}")
    keys_, values = key_old, values_old
    if old.duplicated(keys_).any() or new.duplicated(keys_).any():  # keys holding lists
        a, b, values = _lists(old, keys_, values), _lists(new, keys_, values), [ROWS]
    else:
        a, b = old[[*keys_, *values]], new[[*keys_, *values]]
    merged = a.merge(b, on=keys_, how="outer", suffixes=(OLD, NEW), indicator=True)
    same = np.ones(len(merged), dtype=bool)
    for v in values:
        same &= _equal(merged[v + OLD], merged[v + NEW])
    kind = np.select([merged["_merge"] == "right_only", merged["_merge"] == "left_only", ~same],
                     ["added", "removed", "changed"], "unchanged")
    merged.insert(0, CHANGE, kind)
    counts = pd.Series({k: int((kind == k).sum()) for k in KINDS}, dtype="int64")
    frame = merged[merged[CHANGE] != "unchanged"]
    frame = frame[[CHANGE, *keys_, *[v + s for v in values for s in (OLD, NEW)]]].copy()
    for v in values:  # an outer merge turns integers with a missing side into floats
        if v in old and v in new and all(pd.api.types.is_integer_dtype(f[v]) for f in (old, new)):
            for suffix in (OLD, NEW):
                frame[v + suffix] = frame[v + suffix].astype("Int64")
    return StateDiff(ordered(frame, keys_), counts, keys_, values, _label(old, "old"),
                     _label(new, "new"), "pandas frames",
                     (old.attrs.get("batch"), new.attrs.get("batch")))


def _lists(frame: pd.DataFrame, keys: list[str], values: list[str]) -> pd.DataFrame:
    """One row per key of ``frame``: the key columns and ``rows``, the list of the key's
    values (dicts), in the frame's order (a join side's or list state's snapshot)."""
    grouped = frame[[*keys, *values]].groupby(keys, dropna=False, sort=False)[values]
    return grouped.apply(lambda g: g.to_dict("records")).rename(ROWS).reset_index()


def _equal(a: pd.Series, b: pd.Series) -> np.ndarray:
    """Element-wise equality where two missing values are equal too."""
    missing_a, missing_b = _missing(a), _missing(b)
    if a.dtype != object and b.dtype != object:
        try:
            equal = (a == b).fillna(False).to_numpy(dtype=bool)
            return equal | (missing_a & missing_b)
        except TypeError:
            pass
    return np.array([(ma and mb) or (not ma and not mb and _same(x, y))
                     for x, y, ma, mb in zip(a, b, missing_a, missing_b, strict=True)],
                    dtype=bool)


def _missing(series: pd.Series) -> np.ndarray:
    if series.dtype != object:
        return series.isna().to_numpy(dtype=bool)
    return np.array([v is None or v is pd.NA or v is pd.NaT
                     or (isinstance(v, float) and np.isnan(v)) for v in series], dtype=bool)


def _same(x: object, y: object) -> bool:
    """Deep equality where missing values (None, NaN, NA, NaT) equal each other."""
    try:
        return bool(_normal(x) == _normal(y))
    except (TypeError, ValueError):
        return repr(x) == repr(y)


def _normal(value: object) -> object:
    if isinstance(value, dict):
        return {k: _normal(v) for k, v in value.items()}
    if isinstance(value, list | tuple | np.ndarray):
        return [_normal(v) for v in value]
    if value is None or value is pd.NA or value is pd.NaT or (
            isinstance(value, float) and np.isnan(value)):
        return None
    return value
