"""Streaming progress (Spark's per-batch JSON) as a pandas DataFrame, one row per batch.

A batch whose report was lost (the process was killed between Spark's commit and the report
being kept, or the disk was full) is **recovered** from what the checkpoint keeps
(``recovered_progress``): the trigger time and watermark of its offset log entry, and its
input rows from the Kafka offsets it read (the previous entry's offsets to its own). What
only the report had (durations, memory, RocksDB metrics, the observed malformed count) stays
NA, and the column ``recovered`` says which rows these are.

Example:
    >>> frame = progress_frame([{"batchId": 0, "numInputRows": 10, "timestamp":
    ...     "2026-01-01T00:00:00.000Z", "durationMs": {"triggerExecution": 120},
    ...     "stateOperators": [{"numRowsTotal": 4, "numRowsUpdated": 4}]}])
    >>> int(frame.loc[0, "state_rows_total"])
    4
"""

from __future__ import annotations

import json
from collections.abc import Iterable

import pandas as pd

from statekit.errors import CheckpointError
from statekit.spark_state.checkpoint import Checkpoint
from statekit.spark_state.times import epoch_ms_times, iso_times

COLUMNS = [
    "batch", "timestamp", "input_rows", "input_rows_per_second", "processed_rows_per_second",
    "duration_ms", "state_rows_total", "state_rows_updated", "state_rows_removed",
    "dropped_by_watermark", "state_memory_bytes", "state_commit_ms", "watermark", "recovered",
]


def progress_row(progress: dict) -> dict:
    """Flatten one progress dict: totals over stateful operators plus their custom metrics."""
    ops = progress.get("stateOperators") or []
    row = {
        "batch": progress.get("batchId"),
        "timestamp": progress.get("timestamp"),
        # Spark Connect's reports leave the totals out: the sources' rows add up to them
        "input_rows": progress.get("numInputRows",
                                   sum(s.get("numInputRows") or 0
                                       for s in progress.get("sources") or [])),
        "input_rows_per_second": progress.get("inputRowsPerSecond"),
        "processed_rows_per_second": progress.get("processedRowsPerSecond"),
        "duration_ms": (progress.get("durationMs") or {}).get("triggerExecution"),
        "state_rows_total": sum(op.get("numRowsTotal", 0) for op in ops),
        "state_rows_updated": sum(op.get("numRowsUpdated", 0) for op in ops),
        "state_rows_removed": sum(op.get("numRowsRemoved", 0) for op in ops),
        "dropped_by_watermark": sum(op.get("numRowsDroppedByWatermark", 0) for op in ops),
        "state_memory_bytes": sum(op.get("memoryUsedBytes", 0) for op in ops),
        "state_commit_ms": sum(op.get("commitTimeMs", 0) for op in ops),
        "watermark": (progress.get("eventTime") or {}).get("watermark"),
        "recovered": False,
    }
    observed = (progress.get("observedMetrics") or {}).get("statekit_input")
    if observed is not None:
        row["malformed_rows"] = observed.get("malformed") or 0
    for op in ops:
        for name, value in (op.get("customMetrics") or {}).items():
            row[name] = row.get(name, 0) + value
    return row


def progress_frame(progresses: Iterable[dict]) -> pd.DataFrame:
    """One row per batch (the last report wins), sorted by batch id."""
    rows = [progress_row(p) for p in progresses]
    frame = pd.DataFrame(rows) if rows else pd.DataFrame(columns=COLUMNS)
    if rows:
        frame = frame.drop_duplicates("batch", keep="last").sort_values("batch")
        frame["timestamp"] = iso_times(frame["timestamp"])
        frame["watermark"] = iso_times(frame["watermark"])  # far beyond 2262: datetime64[us]
    return frame.reset_index(drop=True)


def kafka_offsets(text: str | None) -> dict[tuple[str, int], int] | None:
    """A Kafka source's offsets as the offset log keeps them (``{"topic": {"0": 42}}``), by
    (topic, partition); None for another kind of source.

    Example:
        >>> kafka_offsets('{"games": {"0": 42, "1": 7}}')
        {('games', 0): 42, ('games', 1): 7}
        >>> kafka_offsets('{"logOffset": 3}') is None
        True
    """
    try:
        parsed = json.loads(text) if text else None
        return {(str(topic), int(p)): int(o) for topic, parts in parsed.items()
                for p, o in parts.items()}
    except (ValueError, TypeError, AttributeError):
        return None


def input_ranges(checkpoint: str | Checkpoint, batch: int
                 ) -> dict[tuple[str, int], tuple[int, int]] | None:
    """The Kafka records ``batch`` read, (topic, partition) → [start, end): its offset log
    entry against the previous batch's. None when either entry is gone (the previous one is
    never there for batch 0, whose start Spark does not log) or a source is not Kafka."""
    ck = Checkpoint(checkpoint)
    try:
        _, _, ends = ck.offset_log(batch)
        _, _, starts = ck.offset_log(batch - 1) if batch > 0 else (0, {}, None)
    except CheckpointError:
        return None
    if starts is None or len(starts) != len(ends):
        return None
    ranges = {}
    for start_text, end_text in zip(starts, ends, strict=True):
        start, end = kafka_offsets(start_text), kafka_offsets(end_text)
        if start is None or end is None:
            return None
        for part, stop in end.items():
            ranges[part] = (start.get(part, stop), stop)
    return ranges


def late_watermark_ms(checkpoint: str | Checkpoint, batch: int) -> int | None:
    """The watermark Spark drops late events of ``batch`` against: the previous batch's
    (``batchWatermarkMs`` of its offset log entry; Spark 4 judges late events by the last
    batch's watermark and evicts state by the current one), 0 for batch 0; None when that
    entry is gone."""
    if batch == 0:
        return 0
    try:
        return int(Checkpoint(checkpoint).offset_metadata(batch - 1).get("batchWatermarkMs", 0))
    except (CheckpointError, TypeError, ValueError):
        return None


def recovered_progress(checkpoint: str | Checkpoint, batches: Iterable[int]) -> pd.DataFrame:
    """Rows of ``progress_frame``'s shape for ``batches`` whose reports were lost, rebuilt from
    the offset log: ``timestamp`` (``batchTimestampMs``), ``watermark``
    (``batchWatermarkMs``), ``input_rows`` (``input_ranges``, NA when unknown);
    ``recovered`` is True and every other column NA (the state columns can be filled from
    Spark's state, see ``StateReader.batch_counts``)."""
    ck = Checkpoint(checkpoint)
    rows = []
    for batch in batches:
        row: dict = {c: None for c in COLUMNS}
        row.update(batch=batch, recovered=True)
        try:
            meta = ck.offset_metadata(batch)
            row["timestamp"] = meta.get("batchTimestampMs")
            row["watermark"] = meta.get("batchWatermarkMs")
        except CheckpointError:
            pass
        ranges = input_ranges(ck, batch)
        if ranges is not None:
            row["input_rows"] = sum(end - start for start, end in ranges.values())
        rows.append(row)
    frame = pd.DataFrame(rows, columns=COLUMNS)
    for column in ("timestamp", "watermark"):
        known = frame[column].notna()
        times = pd.Series(pd.NaT, index=frame.index, dtype="datetime64[ns]")
        if known.any():
            times = times.astype(epoch_ms_times([0]).dtype)
            times[known] = epoch_ms_times(frame.loc[known, column].astype("int64")).to_numpy()
        frame[column] = times
    return frame.astype({"batch": "int64", "input_rows": "Int64", "recovered": bool})
