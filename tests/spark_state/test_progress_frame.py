"""Spark's progress reports as a frame (``statekit.spark_state.progress``). Pure logic."""

from __future__ import annotations

import pandas as pd

from statekit.spark_state.progress import COLUMNS, progress_frame

T = pd.Timestamp


def progress(batch: int, rows: int, ops=(), watermark="2026-01-01T00:00:00.000Z") -> dict:
    return {"batchId": batch, "numInputRows": rows, "timestamp": f"2026-01-01T10:00:0{batch}.000Z",
            "inputRowsPerSecond": 1.0, "processedRowsPerSecond": 2.0,
            "durationMs": {"triggerExecution": 100 + batch},
            "eventTime": {"watermark": watermark}, "stateOperators": list(ops)}


def test_progress_frame_sums_operators_and_custom_metrics():
    ops = [{"numRowsTotal": 4, "numRowsUpdated": 3, "numRowsRemoved": 1,
            "numRowsDroppedByWatermark": 2, "memoryUsedBytes": 100, "commitTimeMs": 5,
            "customMetrics": {"rocksdbBytesCopied": 10, "rocksdbCommitFlushLatency": 1}},
           {"numRowsTotal": 6, "numRowsUpdated": 1, "memoryUsedBytes": 50,
            "customMetrics": {"rocksdbBytesCopied": 5}}]
    frame = progress_frame([progress(0, 10, ops)])
    row = frame.iloc[0]
    assert row["state_rows_total"] == 10 and row["state_rows_updated"] == 4
    assert row["state_rows_removed"] == 1 and row["dropped_by_watermark"] == 2
    assert row["state_memory_bytes"] == 150 and row["state_commit_ms"] == 5
    assert row["rocksdbBytesCopied"] == 15 and row["rocksdbCommitFlushLatency"] == 1
    assert row["duration_ms"] == 100 and row["input_rows"] == 10
    assert set(COLUMNS) <= set(frame.columns)


def test_progress_frame_keeps_the_last_report_per_batch_sorted_by_batch():
    frame = progress_frame([progress(1, 7), progress(0, 3), progress(1, 9)])
    assert frame["batch"].tolist() == [0, 1]
    assert frame["input_rows"].tolist() == [3, 9]
    assert frame.index.tolist() == [0, 1]


def test_progress_frame_times_are_naive_utc():
    frame = progress_frame([progress(2, 1, watermark="2026-01-01T09:50:00.000Z")])
    assert frame.loc[0, "timestamp"] == T("2026-01-01 10:00:02")
    assert frame.loc[0, "watermark"] == T("2026-01-01 09:50:00")
    assert frame["timestamp"].dt.tz is None


def test_progress_frame_without_state_operators_has_zeros():
    frame = progress_frame([{"batchId": 0, "timestamp": "2026-01-01T00:00:00.000Z"}])
    assert frame.loc[0, "input_rows"] == 0 and frame.loc[0, "state_rows_total"] == 0
    assert pd.isna(frame.loc[0, "watermark"])


def test_progress_frame_of_nothing_has_the_documented_columns():
    frame = progress_frame([])
    assert list(frame.columns) == COLUMNS
    assert len(frame) == 0
