"""Streaming progress (Spark's per-batch JSON) as a pandas DataFrame, one row per batch.

Example:
    >>> frame = progress_frame([{"batchId": 0, "numInputRows": 10, "timestamp":
    ...     "2026-01-01T00:00:00.000Z", "durationMs": {"triggerExecution": 120},
    ...     "stateOperators": [{"numRowsTotal": 4, "numRowsUpdated": 4}]}])
    >>> int(frame.loc[0, "state_rows_total"])
    4
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from statekit.state.times import iso_times

COLUMNS = [
    "batch", "timestamp", "input_rows", "input_rows_per_second", "processed_rows_per_second",
    "duration_ms", "state_rows_total", "state_rows_updated", "state_rows_removed",
    "dropped_by_watermark", "state_memory_bytes", "state_commit_ms", "watermark",
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
