"""ReportListener: each progress report once, as Spark's JSON, on a real session's query."""

from __future__ import annotations

import json
import threading
import time

import pytest
from pyspark.sql import functions as F

from statekit.spark.listener import ReportListener


class _Kept(ReportListener):
    def __init__(self):
        self.reports: dict[str, list[tuple[dict, str]]] = {}
        self.lock = threading.Lock()

    def on_report(self, report, text):
        with self.lock:
            self.reports.setdefault(report["id"], []).append((report, text))

    def of(self, query_id) -> list[tuple[dict, str]]:
        with self.lock:
            return list(self.reports.get(str(query_id), []))


def _wait(condition, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)
    return condition()


@pytest.mark.timeout(300)
def test_each_report_arrives_once_as_the_json_spark_keeps(spark, tmp_path):
    kept = _Kept()
    spark.streams.addListener(kept)
    try:
        counts = (spark.readStream.format("rate").option("rowsPerSecond", 50).load()
                  .groupBy((F.col("value") % 7).alias("key")).count())
        query = (counts.writeStream.format("memory").queryName("listened")
                 .outputMode("update").trigger(processingTime="200 milliseconds")
                 .option("checkpointLocation", str(tmp_path / "ck")).start())
        try:
            assert _wait(lambda: len(kept.of(query.id)) >= 3), "no three reports in 60 s"
        finally:
            query.stop()
        got = kept.of(query.id)
        batches = [report["batchId"] for report, _ in got]
        assert batches == sorted(set(batches)), "a report twice, or out of order"
        recent = {r["batchId"]: r for r in
                  (json.loads(p.json) for p in query.recentProgress)}
        for report, text in got:
            assert json.loads(text) == report                  # the text is the report
            assert report["id"] == str(query.id) and report["name"] == "listened"
            assert report["stateOperators"][0]["numRowsTotal"] <= 7
            if report["batchId"] in recent:                    # what recentProgress says
                assert report == recent[report["batchId"]]
        assert set(recent) & set(batches), "recentProgress and the listener share no batch"
    finally:
        spark.streams.removeListener(kept)
    # removed: a later query's reports no longer reach it
    again = (spark.readStream.format("rate").load().writeStream.format("noop")
             .trigger(processingTime="100 milliseconds").start())
    try:
        assert _wait(lambda: again.lastProgress is not None and again.lastProgress["batchId"] >= 2)
    finally:
        again.stop()
    assert kept.of(again.id) == []


def test_the_python_event_path_gives_the_same_report():
    """Where PySpark hands a parsed event (Spark Connect), on_report gets the same pair."""
    from pyspark.sql.streaming.listener import QueryProgressEvent

    report = {"id": "6d3a9c1e-0000-4000-8000-000000000001",
              "runId": "6d3a9c1e-0000-4000-8000-000000000002", "name": "q",
              "timestamp": "2026-12-02T10:00:00.000Z", "batchId": 4, "batchDuration": 12,
              "numInputRows": 5, "inputRowsPerSecond": 1.5, "processedRowsPerSecond": 2.5,
              "durationMs": {"triggerExecution": 12}, "eventTime": {}, "stateOperators": [],
              "sources": [], "sink": {"description": "noop", "numOutputRows": -1},
              "observedMetrics": {}}
    kept = _Kept()
    kept.onQueryProgress(QueryProgressEvent.fromJson({"progress": report}))
    [(got, text)] = kept.of(report["id"])
    assert got["batchId"] == 4 and got["numInputRows"] == 5 and json.loads(text) == got


def test_a_listener_without_on_report_says_what_it_lacks():
    class Bare(ReportListener):
        pass

    with pytest.raises(NotImplementedError, match="Bare must define on_report"):
        Bare().on_report({}, "{}")
