"""The same windowed aggregates computed by plain pandas: a reference to check state against.

Example:
    >>> import pandas as pd
    >>> from statekit.model.query_spec import QuerySpec, tumbling
    >>> events = pd.DataFrame({"player": ["a", "a", "b"], "score": [1, 2, 5],
    ...     "ts": pd.to_datetime(["2026-01-05 10:01", "2026-01-05 10:04", "2026-01-05 10:12"])})
    >>> spec = QuerySpec(keys=["player"], window=tumbling("10 minutes"),
    ...                  aggregates=["count", "sum(score)"])
    >>> windowed_reference(events, spec)[["player", "count", "sum_score"]]
      player  count  sum_score
    0      a      2          3
    1      b      1          5
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from statekit.durations import to_millis
from statekit.errors import BadArgument
from statekit.model.query_spec import QuerySpec


def window_assignments(times: pd.Series, spec: QuerySpec) -> pd.DataFrame:
    """For each event (by index), every (window_start, window_end) it falls in.

    Works in the times' own unit: ``datetime64[us]`` times beyond 2262 (which statekit's
    readers give, see ``statekit.spark_state.times``) get their windows too."""
    if spec.kind in ("session", "running"):
        raise BadArgument("window kind for the pandas reference", spec.kind,
                          ["tumbling", "hopping"])
    unit = np.datetime_data(times.dtype)[0]
    size = pd.Timedelta(milliseconds=spec.window.size_ms).as_unit(unit)
    slide = (pd.Timedelta(milliseconds=to_millis(spec.window.slide)).as_unit(unit)
             if spec.window.slide else size)
    ticks = times.to_numpy().astype("int64")  # since the epoch, in ``unit``
    step = slide // pd.Timedelta(1, unit=unit)
    last_start = pd.Series((ticks - ticks % step).astype(f"datetime64[{unit}]"),
                           index=times.index)
    parts = []
    for k in range(math.ceil(size / slide)):
        start = last_start - k * slide
        inside = (start <= times) & (times < start + size)
        parts.append(pd.DataFrame({"window_start": start[inside],
                                   "window_end": start[inside] + size}))
    return pd.concat(parts)


def too_far_ahead(event_times: pd.Series, record_times: pd.Series,
                  spec: QuerySpec) -> pd.Series:
    """True for events the query keeps aside because their time lies more than
    ``spec.max_event_time_ahead`` after their Kafka record's timestamp (all False when the
    spec has no bound): ``parse_events``' rule, in pandas. Both naive UTC.

    Example:
        >>> from statekit.model.query_spec import tumbling
        >>> spec = QuerySpec(keys=["k"], window=tumbling("1 minute"))
        >>> too_far_ahead(pd.Series(pd.to_datetime(["2026-01-06 10:00", "2026-01-06 10:01"])),
        ...               pd.Series(pd.to_datetime(["2026-01-05 10:00"] * 2)), spec).tolist()
        [False, True]
    """
    if spec.max_event_time_ahead_ms is None:
        return pd.Series(False, index=event_times.index)
    bound = pd.Timedelta(milliseconds=spec.max_event_time_ahead_ms).as_unit("us")
    ahead = event_times.astype("datetime64[us]") - record_times.astype("datetime64[us]")
    return (ahead > bound).fillna(False)


def windowed_reference(
    events: pd.DataFrame, spec: QuerySpec, watermark: pd.Timestamp | None = None
) -> pd.DataFrame:
    """Aggregates of ``spec`` per window and key over ``events`` (naive UTC times).

    Nulls as in SQL: ``count`` counts rows, ``count(col)`` non-null values,
    ``sum/min/max/avg(col)`` skip nulls and give null (NaN) when all are null.
    With ``watermark``, only windows ending after it are kept: what a state store
    holds once the watermark has evicted older windows.
    """
    if spec.kind == "running":  # one row per key over everything (a TTL forgets idle keys)
        rows, by = events, list(spec.keys)
    else:
        times = pd.to_datetime(events[spec.event_time])
        if times.dt.tz is not None:
            times = times.dt.tz_convert("UTC").dt.tz_localize(None)
        windows = window_assignments(times, spec)
        rows = events.drop(columns=[spec.event_time]).join(windows, how="inner")
        by = ["window_start", "window_end", *spec.keys]
    group = rows.groupby(by, sort=True)
    out = pd.DataFrame(index=group.size().index)
    for agg in spec.aggregates:
        if agg.function == "count":
            out[agg.name] = group.size() if agg.column is None else group[agg.column].count()
        elif agg.function == "sum":  # SQL: the sum of nothing but nulls is null, not 0
            out[agg.name] = group[agg.column].sum(min_count=1)
        else:
            out[agg.name] = getattr(group[agg.column], "mean" if agg.function == "avg"
                                    else agg.function)()
    out = out.reset_index()
    if watermark is not None and spec.kind != "running":
        out = out[out["window_end"] > pd.Timestamp(watermark)]
    return out.sort_values(spec.key_columns, kind="stable").reset_index(drop=True)


def rows_differing(store: pd.DataFrame, expected: pd.DataFrame,
                   key_columns: list[str] | tuple[str, ...]) -> pd.DataFrame:
    """The rows where ``store`` and ``expected`` disagree, by key: one row per key that is in
    only one of them (``where``: ``"store only"`` / ``"expected only"``) or whose values
    differ (``"values differ"``); empty when both hold the same rows. Values are compared on
    ``expected``'s columns, numbers with a relative tolerance of 1e-9, nulls equal.

    Example:
        >>> want = pd.DataFrame({"k": ["a", "b"], "n": [1.0, 2.0]})
        >>> rows_differing(want.iloc[::-1], want, ["k"]).empty
        True
        >>> rows_differing(want.assign(n=[1.0, 3.0]), want, ["k"])[["k", "where"]]
           k          where
        0  b  values differ
    """
    import numpy as np

    keys = list(key_columns)
    values = [c for c in expected.columns if c not in keys]
    both = expected[[*keys, *values]].merge(store[[*keys, *values]], on=keys, how="outer",
                                            suffixes=("", "_store"), indicator=True)
    differ = np.zeros(len(both), dtype=bool)
    for column in values:
        a, b = both[column], both[f"{column}_store"]
        try:
            same = np.isclose(a.astype(float), b.astype(float), rtol=1e-9, equal_nan=True)
        except (TypeError, ValueError):
            same = (a.astype(object) == b.astype(object)).to_numpy() | (a.isna() & b.isna())
        differ |= ~np.asarray(same, dtype=bool)
    where = np.where(both["_merge"] == "left_only", "expected only",
                     np.where(both["_merge"] == "right_only", "store only", "values differ"))
    out = both.assign(where=where)[(both["_merge"] != "both") | differ]
    return out.drop(columns="_merge").reset_index(drop=True)
