"""What one attached handle leaves behind and what it waits for: ``replay()`` right after
``attach(kafka=)``, and the session's progress listener after ``detach()``.

One small stateful query (a count per player over JSON files, Spark's memory sink) serves
both tests; a file added makes it run a batch. No other handle of this module outlives its
test, so when the last one detaches, nothing of statekit's needs the session's listener.
"""

from __future__ import annotations

import itertools
import json
import time

import pytest
from pyspark.sql.streaming import StreamingQueryListener

import statekit as sk
from statekit.spark import progress_listener
from statekit.spark.progress_listener import _SessionListener
from statekit.spark_state.changes import same_rows

pytestmark = pytest.mark.timeout(600)

EVENTS = "event_id STRING, player STRING, score INT, ts TIMESTAMP"
WAIT = 180.0


@pytest.fixture(scope="module")
def counting(spark, tmp_path_factory):
    """The running query, drained, and a function that adds one file to its input."""
    base = tmp_path_factory.mktemp("handles")
    source = base / "in"
    source.mkdir()
    numbers = itertools.count()

    def add() -> None:
        i = next(numbers)
        rows = [{"event_id": f"e{i}-{k}", "player": f"p{k % 3}", "score": k,
                 "ts": "2026-01-01T12:00:00"} for k in range(4)]
        tmp = source / f".f{i}.tmp"
        tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
        tmp.rename(source / f"f{i:03d}.json")

    add()
    query = (spark.readStream.schema(EVENTS).json(str(source)).groupBy("player").count()
             .writeStream.format("memory").queryName("own_handles").outputMode("update")
             .option("checkpointLocation", str(base / "ck"))
             .trigger(processingTime="200 milliseconds").start())
    query.processAllAvailable()
    yield query, add, base
    query.stop()


def test_replay_right_after_attaching_with_kafka_waits_for_the_first_shipped_batch(
        counting, broker):
    """It returned an empty frame with only a ``partition`` column."""
    query, _, base = counting
    live = sk.attach(query, kafka=broker, ledger_dir=base / "ledgers")
    try:
        replayed = live.replay("0/default")
        snapshot = live.snapshot("0/default")
        assert len(replayed) == 3 and same_rows(snapshot, replayed)
        assert set(snapshot.columns) <= set(replayed.columns)
    finally:
        live.close()


class _Probe(StreamingQueryListener):
    """A listener of the test's own: the batches Spark reported to listeners."""

    def __init__(self):
        self.batches: list[int] = []

    def onQueryStarted(self, event) -> None:
        pass

    def onQueryProgress(self, event) -> None:
        self.batches.append(int(event.progress.batchId))

    def onQueryIdle(self, event) -> None:
        pass

    def onQueryTerminated(self, event) -> None:
        pass


def _next_batch_reported(query, add, probe: _Probe) -> None:
    """Add a file and wait until Spark reported its batch to ``probe``. Spark calls a
    session's listeners one after another, in the order they were added, so every listener
    added before ``probe`` has been called for that batch too."""
    after = query.lastProgress["batchId"] if query.lastProgress else -1
    add()
    deadline = time.monotonic() + WAIT
    while not any(b > after for b in probe.batches):
        assert time.monotonic() < deadline, f"no batch after {after} reported in {WAIT} s"
        time.sleep(0.1)


def test_detach_removes_the_progress_listener_once_the_last_handle_goes(
        counting, spark, monkeypatch):
    """statekit's listener stayed on the session after ``detach()``, called at every batch
    of every query for nobody."""
    query, add, _ = counting
    calls: list[str] = []
    heard = _SessionListener.onQueryProgress

    def counted(self, event):
        calls.append(str(event.progress.id))
        heard(self, event)

    first, second = sk.attach(query), sk.attach(query)
    monkeypatch.setattr(_SessionListener, "onQueryProgress", counted)
    probe = _Probe()
    spark.streams.addListener(probe)
    try:
        first.close()
        _next_batch_reported(query, add, probe)
        assert str(query.id) in calls  # still there for the other handle
        assert second.progress()["batch"].max() >= probe.batches[-1]
        second.close()
        spark.streams.removeListener(probe)  # added again after: the last to be called
        probe = _Probe()
        spark.streams.addListener(probe)
        calls.clear()
        _next_batch_reported(query, add, probe)
        # statekit's one listener stays only while a query of statekit's own still runs
        # (none in this module): it heard nothing, or at least not this query, for nobody
        assert str(query.id) not in calls
        followed = progress_listener.followed(spark)
        assert progress_listener.listening(spark) == bool(followed)
        if not followed:
            assert calls == [], "statekit's listener still hears the session's queries"
    finally:
        spark.streams.removeListener(probe)
        first.close()
        second.close()
