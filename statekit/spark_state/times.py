"""Timestamps out of Spark into pandas, for every value Spark accepts: one rule, one owner.

Spark keeps a timestamp as microseconds since the epoch (about ±290,000 years), while
pandas' usual ``datetime64[ns]`` holds only 1677-09-21 .. 2262-04-11. An event time Spark
accepted — ``9999-12-31``, or an epoch number in milliseconds that Spark reads as seconds
(``1767607200000`` is year 57983) — must not make a reader fail. The rule, used by every
statekit reader (snapshots, change feed, progress, malformed records, changelog, restored
stores): a time column is **naive UTC ``datetime64[ns]`` when every value fits**, and
otherwise the finest unit that holds them all without rounding — ``datetime64[us]``,
Spark's own resolution, for any Spark timestamp. Nothing is clipped or turned into NaT.

Example:
    >>> import pyarrow as pa
    >>> far = pa.array([0, 253_402_300_799_000_000], pa.timestamp("us", "UTC"))
    >>> pandas_times(far).dtype, pandas_times(far.slice(0, 1)).dtype
    (dtype('<M8[us]'), dtype('<M8[ns]'))
    >>> iso_times(["2026-01-05T10:00:00.000Z", "+57983-03-30T16:00:00.000Z"]).tolist()
    [Timestamp('2026-01-05 10:00:00'), Timestamp('57983-03-30 16:00:00')]
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from statekit._lazy import np, pa, pc, pd
from statekit.errors import BadArgument

#: Units pandas can hold, finest first, and their ticks per second.
UNITS = ("ns", "us", "ms", "s")
_PER_SECOND = {"ns": 10**9, "us": 10**6, "ms": 10**3, "s": 1}
_LOW, _HIGH = -(2**63) + 1, 2**63 - 1  # int64 min is NaT
_ZONE = re.compile(r"(Z|[+-]\d{2}:\d{2})$")


def pandas_unit(values: pa.Array | pa.ChunkedArray) -> str:
    """The finest unit (``ns``, then ``us`` …) that holds every value of a timestamp array
    exactly: never coarser than the array's own unit.

    Example:
        >>> pandas_unit(pa.array([1, None], pa.timestamp("ms")))
        'ns'
    """
    unit = values.type.unit
    if len(values) == values.null_count:
        return "ns"
    bounds = pc.min_max(values.cast(pa.int64()))
    low, high = bounds["min"].as_py(), bounds["max"].as_py()
    for target in UNITS:
        if target == unit:
            return unit
        scale = _PER_SECOND[target] // _PER_SECOND[unit]
        if low * scale >= _LOW and high * scale <= _HIGH:
            return target
    return unit


def naive_utc(values: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """A timestamp array as naive UTC in ``pandas_unit`` (what ``to_pandas`` then keeps)."""
    return values.cast(pa.timestamp(pandas_unit(values)))


def pandas_times(values: pa.Array | pa.ChunkedArray) -> pd.Series:
    """A timestamp array as a pandas Series of naive UTC times (the module's rule)."""
    return pd.Series(naive_utc(values).to_pandas(coerce_temporal_nanoseconds=False))


def table_for_pandas(table: pa.Table) -> pa.Table:
    """``table`` with every timestamp column as naive UTC in its ``pandas_unit``; convert it
    with ``to_pandas(coerce_temporal_nanoseconds=False)`` (pyarrow's default) to keep them."""
    for i, field in enumerate(table.schema):
        if pa.types.is_timestamp(field.type):
            table = table.set_column(i, field.name, naive_utc(table.column(i)))
    return table


def epoch_ms_times(ms: Iterable[int] | np.ndarray) -> pd.Series:
    """Epoch milliseconds (Kafka record timestamps) as naive UTC times (the module's rule).

    Example:
        >>> epoch_ms_times([1_767_607_200_000]).tolist()
        [Timestamp('2026-01-05 10:00:00')]
    """
    return pandas_times(pa.array(np.asarray(ms, dtype=np.int64), pa.timestamp("ms")))


def iso_times(texts: Iterable[str | None] | pd.Series) -> pd.Series:
    """ISO-8601 texts (``Z`` or ``±HH:MM``; none means UTC) as naive UTC times (the rule).

    Reads what Spark and statekit write, including years Java writes with a sign and
    five digits (``+57983-03-30T16:00:00.000Z``); None stays NaT. A text that is no
    timestamp raises BadArgument naming it. The index of a Series is kept.
    """
    series = texts if isinstance(texts, pd.Series) else pd.Series(list(texts), dtype=object)
    try:
        parsed = pd.to_datetime(series, utc=True, format="ISO8601")
        return parsed.dt.tz_localize(None).astype("datetime64[ns]")
    except (ValueError, OverflowError):  # beyond 1677..2262, or a year pandas cannot read
        micros = np.array([_utc_micros(t) for t in series], dtype="datetime64[us]")
    return pd.Series(pandas_times(pa.array(micros, pa.timestamp("us"))).to_numpy(),
                     index=series.index, name=series.name)


def _utc_micros(text: object) -> np.datetime64:
    if text is None or text is pd.NaT or (isinstance(text, float) and np.isnan(text)):
        return np.datetime64("NaT", "us")
    accepted = "an ISO-8601 timestamp such as '2026-01-05T10:00:00.000Z'"
    if not isinstance(text, str):
        raise BadArgument("timestamp", text, accepted)
    zone = _ZONE.search(text)
    local, offset = text, np.timedelta64(0, "m")
    if zone is not None:
        local = text[:zone.start()]
        if zone.group(1) != "Z":
            sign = -1 if zone.group(1)[0] == "-" else 1
            hours, minutes = zone.group(1)[1:].split(":")
            offset = np.timedelta64(sign * (int(hours) * 60 + int(minutes)), "m")
    try:
        return np.datetime64(local, "us") - offset
    except ValueError:
        raise BadArgument("timestamp", text, accepted) from None
