"""What Kafka log compaction keeps of a changelog topic, computed in pandas.

The model (per partition, all vectorised):

1. **Uncompacted head.** A record whose timestamp is newer than
   ``now - min_compaction_lag_ms``, and every record after the first such one
   (by offset), is in the head: the cleaner does not touch it.
2. **Compactable prefix.** Everything before the head. A record there is dropped
   when a later record with the same key exists *in the compactable prefix*
   (Kafka's cleaner builds its key → latest offset map over the dirty section
   up to the first uncleanable offset, so a newer record of the key sitting in
   the head does not remove older ones yet).
3. **Tombstones.** A tombstone that survives step 2 is dropped too once
   ``now - timestamp > delete_retention_ms``. Kafka counts ``delete.retention.ms``
   from when the cleaner first saw the tombstone, which is never before its
   timestamp: this model shows the earliest moment it can vanish.
4. **Time retention** (only with ``retention_ms``, i.e. ``cleanup.policy=compact,delete``
   as for windowed changelogs): the oldest records are deleted while
   ``now - timestamp > retention_ms``, from the start of the partition.

Segments are not modelled: it is as if every record sat in its own closed
segment (``segment.ms`` → 0) and the cleaner had just run over the whole log.
Compaction never renumbers: surviving records keep their offsets.

Example:
    >>> import pandas as pd
    >>> log = pd.DataFrame({"partition": [0, 0, 0, 0], "offset": [0, 1, 2, 3],
    ...     "timestamp": pd.to_datetime(["2026-01-05 10:00"] * 2 + ["2026-01-05 10:01"] * 2),
    ...     "batch": [0, 0, 1, 1], "tombstone": [False, False, False, True],
    ...     "key": ['{"k":"a"}', '{"k":"b"}', '{"k":"a"}', '{"k":"b"}']})
    >>> compact(log)["offset"].tolist()      # a's update at 2 and b's tombstone at 3
    [2, 3]
    >>> compact(log, delete_retention_ms=0, now=pd.Timestamp("2026-01-05 10:02"))["offset"].tolist()
    [2]
    >>> compaction_stats(log, compact(log))["ratio"].tolist()
    [0.5]
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import numpy as np
import pandas as pd

from statekit.changelog.log import Changelog, records_of, same_kind
from statekit.validate import batch_id, non_negative_number, require_columns

#: Columns ``compact`` needs; a changelog's records have them all.
REQUIRED = ("partition", "offset", "timestamp", "key", "tombstone")
SOURCE = "as read_changelog() gives"

TimeLike = pd.Timestamp | dt.datetime | np.datetime64 | str
Log = Changelog | pd.DataFrame


def _records(changelog: Log, needed: Sequence[str], what: str = "changelog") -> pd.DataFrame:
    records = records_of(changelog, what)
    require_columns(records, needed, f"{what} records", SOURCE)
    return records


def _in_log_order(changelog: pd.DataFrame) -> pd.DataFrame:
    """The frame sorted by (partition, offset), without copying when it already is."""
    part = changelog["partition"].to_numpy()
    off = changelog["offset"].to_numpy()
    dp, do = np.diff(part), np.diff(off)
    if ((dp > 0) | ((dp == 0) & (do > 0))).all():
        return changelog
    return changelog.sort_values(["partition", "offset"], kind="stable")


def _now(now: TimeLike | None, stamps: pd.Series) -> pd.Timestamp:
    """``now`` as a Timestamp comparable with ``stamps`` (default: their latest)."""
    if now is None:
        return stamps.max()
    stamp = pd.Timestamp(now)
    tz = getattr(stamps.dtype, "tz", None)
    if tz is None and stamp.tzinfo is not None:
        stamp = stamp.tz_convert("UTC").tz_localize(None)
    elif tz is not None and stamp.tzinfo is None:
        stamp = stamp.tz_localize("UTC")
    return stamp


def _per_partition_running(flags: np.ndarray, part: np.ndarray, how: str) -> np.ndarray:
    """Running any (``how="any"``) or all (``"all"``) of ``flags`` within each partition run."""
    values = flags if how == "any" else ~flags
    counts = np.cumsum(values, dtype=np.int64)
    starts = np.r_[0, np.flatnonzero(part[1:] != part[:-1]) + 1]
    before = np.where(starts > 0, counts[starts - 1], 0)
    lengths = np.diff(np.r_[starts, len(part)])
    seen = counts - np.repeat(before, lengths) > 0
    return seen if how == "any" else ~seen


def compact(
    changelog: Log,
    now: TimeLike | None = None,
    delete_retention_ms: float = 86_400_000,
    min_compaction_lag_ms: float = 0,
    retention_ms: float | None = None,
) -> pd.DataFrame:
    """The records Kafka log compaction keeps (model in the module docstring).

    Args:
        changelog: a ``Changelog`` (from ``read_changelog``) or its records frame
            (``partition``, ``offset``, ``timestamp``, ``key``, ``tombstone``, ...).
        now: the wall-clock time of the cleaning; default: the latest record timestamp
            in ``changelog`` (so "just after the last batch").
        delete_retention_ms: ``delete.retention.ms``: how long a surviving tombstone stays.
        min_compaction_lag_ms: ``min.compaction.lag.ms``: records younger than this stay
            uncompacted, with everything after them.
        retention_ms: ``retention.ms`` of a ``compact,delete`` topic; None for ``compact``.

    Returns:
        The surviving records in log order, offsets unchanged, index renumbered from 0:
        a ``Changelog`` (same topic and columns) when given one, else a frame.

    Example:
        >>> log = pd.DataFrame({"partition": [0, 0], "offset": [0, 1], "key": ["a", "a"],
        ...     "timestamp": pd.to_datetime(["2026-01-05 10:00", "2026-01-05 10:05"]),
        ...     "tombstone": [False, False]})
        >>> compact(log)["offset"].tolist()         # the newer record of 'a' wins
        [1]
        >>> compact(log, min_compaction_lag_ms=600_000)["offset"].tolist()   # both too young
        [0, 1]
    """
    records = _records(changelog, REQUIRED)
    ms = "milliseconds"
    non_negative_number(delete_retention_ms, "delete_retention_ms", unit=ms)
    non_negative_number(min_compaction_lag_ms, "min_compaction_lag_ms", unit=ms)
    non_negative_number(retention_ms, "retention_ms", unit=ms, allow_none=True)
    frame = _in_log_order(records)
    if frame.empty:
        return same_kind(changelog, frame.copy())
    stamps = frame["timestamp"]
    if getattr(stamps.dtype, "tz", None) is not None:  # compared as UTC datetime64 below
        stamps = stamps.dt.tz_convert("UTC").dt.tz_localize(None)
    at = _now(now, stamps)
    ts = stamps.to_numpy()
    part = frame["partition"].to_numpy()
    tomb = frame["tombstone"].to_numpy(dtype=bool)

    head = _per_partition_running(
        ts > (at - pd.Timedelta(milliseconds=min_compaction_lag_ms)).to_datetime64(), part, "any")
    cleanable = np.flatnonzero(~head)
    keep = np.ones(len(frame), dtype=bool)
    if len(cleanable):
        older = frame[["partition", "key"]].iloc[cleanable].duplicated(keep="last").to_numpy()
        keep[cleanable[older]] = False
    expired = (at - pd.Timedelta(milliseconds=delete_retention_ms)).to_datetime64()
    keep &= ~(tomb & ~head & (ts < expired))
    if retention_ms is not None:
        breached = ts < (at - pd.Timedelta(milliseconds=retention_ms)).to_datetime64()
        keep &= ~_per_partition_running(breached, part, "all")
    return same_kind(changelog, frame[keep])


def upto_batch(changelog: Log, batch: int) -> Log:
    """The records of batches ``<= batch``: the topic as it was right after that batch.

    Example:
        >>> log = pd.DataFrame({"batch": [0, 0, 1], "offset": [0, 1, 2]})
        >>> upto_batch(log, 0)["offset"].tolist()
        [0, 1]
    """
    records = _records(changelog, ("batch",))
    batch = batch_id(batch)
    return same_kind(changelog, records[records["batch"].to_numpy() <= batch])


def compaction_stats(raw: Log, compacted: Log) -> pd.DataFrame:
    """One row per partition: records and tombstones before and after compaction.

    Columns: ``partition``, ``records_before``, ``records_after``, ``keys`` (distinct
    keys in ``raw``), ``tombstones_before``, ``tombstones_after`` and ``ratio`` =
    ``records_after / records_before``, the fraction of records kept (1.0 = nothing
    removed, 0.1 = compaction kept one record in ten). Sizes in bytes are not known
    from a decoded frame and not reported.

    Example:
        >>> log = pd.DataFrame({"partition": [0, 0, 0], "key": ["a", "b", "a"],
        ...                     "tombstone": [False, False, True]})
        >>> compaction_stats(log, log.iloc[1:])[["records_before", "records_after", "ratio"]]
           records_before  records_after     ratio
        0               3              2  0.666667
    """
    raw = _records(raw, ("partition", "key", "tombstone"), "raw changelog")
    compacted = _records(compacted, ("partition", "key", "tombstone"), "compacted changelog")

    def counts(frame: pd.DataFrame) -> pd.DataFrame:
        grouped = frame["tombstone"].astype(bool).groupby(frame["partition"].to_numpy())
        return pd.DataFrame({"records": grouped.size(), "tombstones": grouped.sum()})

    before, after = counts(raw), counts(compacted)
    keys = raw[["partition", "key"]].drop_duplicates().groupby("partition").size()
    parts = before.index.union(after.index)
    stats = pd.DataFrame({
        "partition": parts.astype("int64"),
        "records_before": before["records"].reindex(parts, fill_value=0).to_numpy(),
        "records_after": after["records"].reindex(parts, fill_value=0).to_numpy(),
        "keys": keys.reindex(parts, fill_value=0).to_numpy(),
        "tombstones_before": before["tombstones"].reindex(parts, fill_value=0).to_numpy(),
        "tombstones_after": after["tombstones"].reindex(parts, fill_value=0).to_numpy(),
    })
    for column in stats.columns[1:]:
        stats[column] = stats[column].astype("int64")
    with np.errstate(divide="ignore", invalid="ignore"):
        stats["ratio"] = stats["records_after"] / stats["records_before"].where(
            stats["records_before"] > 0)
    return stats
