"""Test helpers shared by the suites that run plain PySpark queries and compare frames.

``run_query`` runs a streaming frame into the noop sink until its input is drained (with
session settings for the run); ``assert_same_rows`` compares two frames row for row in any
order, on the columns they share, with pandas' own diff on failure.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path

import pandas as pd


@contextlib.contextmanager
def session_conf(spark, conf: dict[str, str]):
    """Set ``conf`` on the session while a query starts and runs; restore it after."""
    before = {key: spark.conf.get(key, None) for key in conf}
    for key, value in conf.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def run_query(spark, frame, checkpoint: Path, mode: str = "append",
              conf: dict[str, str] | None = None, timeout: float = 240) -> Path:
    """Run ``frame`` into the noop sink until its input is drained; the checkpoint's path."""
    with session_conf(spark, conf or {}):
        query = (frame.writeStream.outputMode(mode).format("noop")
                 .option("checkpointLocation", str(checkpoint))
                 .trigger(availableNow=True).start())
        try:
            assert query.awaitTermination(timeout), "the query did not drain its input"
        finally:
            if query.isActive:
                query.stop()
    assert query.exception() is None, query.exception()
    return checkpoint


def assert_same_rows(left: pd.DataFrame, right: pd.DataFrame, keys: Sequence[str]) -> None:
    """``left`` and ``right`` hold the same rows on the columns they share (sorted by
    ``keys``; dtypes may differ)."""
    columns = [c for c in right.columns if c in left.columns]
    pd.testing.assert_frame_equal(left[columns].sort_values(list(keys), ignore_index=True),
                                  right[columns].sort_values(list(keys), ignore_index=True),
                                  check_dtype=False)
