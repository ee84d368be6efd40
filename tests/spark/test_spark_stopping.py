"""Stopping a query between two micro-batches: no batch is planned and left uncommitted."""

from __future__ import annotations

import pytest

from statekit.spark.stopping import stop_between_batches
from statekit.spark_state.checkpoint import Checkpoint


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_query_stopped_between_batches_committed_every_batch_it_planned(spark, tmp_path):
    from statekit.model.query_spec import tumbling
    from statekit.monitor.presets import rate_events
    from statekit.query.start import start_query

    query = start_query(rate_events(spark, 200, 50), spark=spark, keys=["player"],
                        window=tumbling("1 hour"), aggregates=["count"], watermark="1 day",
                        name="stopping", checkpoint=str(tmp_path / "ck"),
                        trigger="2 seconds")  # batches of 200 rows take less: room to stop
    query.wait_for_batches(3, timeout=240)
    assert stop_between_batches(query.query, timeout=60), query.query.status
    assert not query.query.isActive and query.query.exception() is None
    checkpoint = Checkpoint(tmp_path / "ck")
    # Stopped mid-batch, the offset log would hold a batch the commit log does not.
    assert checkpoint.offset_batches() == checkpoint.committed_batches(), query.progress()[
        ["batch", "duration_ms"]].to_dict("records")
    assert len(checkpoint.committed_batches()) >= 3
    query.close()  # already stopped: nothing to do, no error


def test_a_stopped_query_is_left_alone():
    class Stopped:
        isActive = False

        def stop(self):  # pragma: no cover - must not be called
            raise AssertionError("stopped twice")

    assert stop_between_batches(Stopped())


def test_a_query_that_never_rests_is_stopped_after_the_timeout():
    class Busy:
        isActive, stopped = True, 0
        status = {"isTriggerActive": True, "message": "Processing new data"}

        def stop(self):
            self.stopped += 1
            self.isActive = False

    busy = Busy()
    assert stop_between_batches(busy, timeout=0.05) is False and busy.stopped == 1


class Scripted:
    """A query whose status follows a script, one entry per look."""

    def __init__(self, script):
        self.script, self.looks, self.stopped_at = list(script), 0, None
        self.isActive = True

    @property
    def status(self):
        active, message = self.script[min(self.looks, len(self.script) - 1)]
        self.looks += 1
        return {"isTriggerActive": active, "message": message}

    def stop(self):
        self.stopped_at, self.isActive = self.looks, False


def test_it_stops_just_after_a_batch_ends_not_in_a_short_gap_it_cannot_place():
    # idle (between triggers, but when?), then a batch, then idle: stopped after that batch
    query = Scripted([(False, "Waiting for next trigger"), (True, "Processing new data"),
                      (True, "Processing new data"), (False, "Waiting for next trigger")])
    assert stop_between_batches(query, timeout=5) and query.stopped_at == 4


def test_a_query_waiting_for_data_is_stopped_at_once():
    query = Scripted([(False, "Waiting for data to arrive")])
    assert stop_between_batches(query, timeout=5) and query.stopped_at == 1


class BackToBack(Scripted):
    """A query whose batches run back to back: always active, its last batch moving on."""

    @property
    def lastProgress(self):
        return {"batchId": 3 + self.looks // 15}


def test_a_query_with_batches_back_to_back_is_stopped_after_the_batch_running_ends():
    query = BackToBack([(True, "Processing new data")])
    assert stop_between_batches(query, timeout=30) is False  # not between: the next had begun
    assert 15 <= query.stopped_at <= 30  # once batch 3's successor was seen, not at the timeout
