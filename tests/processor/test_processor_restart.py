"""A changed processor on its old checkpoint (issue 41 item 1): ``statekit.check_restart``
rehearses it and says what Spark will do, and ``start_processor`` refuses, before it starts, a
restart Spark would fail. Every verdict is checked against Spark itself: the changed processor
restarted for real (plain writeStream, statekit's check left out) on a copy of the checkpoint,
with new events to read. Input: the game events on a real Kafka topic."""

from __future__ import annotations

import shutil
import time

import pytest
from helpers.tree import tree_digest

import statekit as sk
from statekit.datasets import GAME_EVENT_SCHEMA, game_events, parse_game_events
from statekit.errors import BadArgument, IncompatibleRestart
from statekit.processor import Processor, key_value_store, processor_frame, start_processor
from statekit.processor.examples import Deduplicate, SessionTracker
from statekit.query.restart_check import REFUSED


class DeduplicateAndCount(Deduplicate):
    """Deduplicate with a second store: how many events each game brought (a state variable
    added)."""

    def stores(self):
        return [*super().stores(), key_value_store("per_game", key="game string",
                                                   value="events bigint")]

    def init(self, stores):
        super().init(stores)
        self.per_game = stores["per_game"]


PROCESSORS = {  # name: (the changed processor, whether Spark starts it on Deduplicate's)
    "the same processor": (Deduplicate(), True),
    "a longer TTL": (Deduplicate(ttl="2 hours"), True),
    "the store's key changed": (Deduplicate(id="game string"), False),
    "a store added": (DeduplicateAndCount(), False),
    "another processor (a session store instead)": (SessionTracker(), False),
}


TOPIC = "processor-restart"


def _arguments(spark, broker, processor: Processor) -> dict:
    arguments = dict(keys="player", event_schema=GAME_EVENT_SCHEMA, spark=spark, kafka=broker)
    if processor.time == "event":
        arguments.update(event_time="ts", watermark="50 minutes")
    return arguments


@pytest.fixture(scope="module")
def first_run(spark, broker, tmp_path_factory):
    """Deduplicate over 2,000 game events, then 1,000 more for every restart to read."""
    from statekit.kafka.dataset_replay import replay

    checkpoint = tmp_path_factory.mktemp("processor-restart") / "ck"
    records = game_events().records
    replay(records.iloc[:2000], broker, TOPIC, partitions=2, progress=False)
    query = start_processor(TOPIC, Deduplicate(), checkpoint=str(checkpoint),
                            name="dedup-restart", trigger="100 milliseconds",
                            max_offsets_per_trigger=800,
                            **_arguments(spark, broker, Deduplicate()))
    try:
        query.wait_until_drained(timeout=180)
    finally:
        query.close()
    replay(records.iloc[2000:3000], broker, TOPIC, progress=False)
    return broker, checkpoint


def _spark_restart(spark, broker, processor, checkpoint) -> bool:
    """Whether Spark itself runs ``processor`` restarted on ``checkpoint``."""
    frame = processor_frame(TOPIC, processor, **_arguments(spark, broker, processor))
    query = None
    try:   # a TTL'd processor runs batches on every trigger: wait for the first one
        query = (frame.frame.writeStream.format("noop").outputMode(frame.run.output_mode)
                 .option("checkpointLocation", str(checkpoint))
                 .trigger(processingTime="200 milliseconds").start())
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            if query.exception() is not None or not query.isActive:
                return False
            if query.recentProgress:
                return True
            time.sleep(0.2)
        raise AssertionError("the restarted processor ran no batch in 240 s")
    except Exception as exc:  # noqa: BLE001 - a failure to start is Spark refusing it
        if isinstance(exc, AssertionError):
            raise
        return False
    finally:
        if query is not None:
            query.stop()


@pytest.mark.parametrize("change", list(PROCESSORS))
def test_the_rehearsal_says_what_spark_does_with_a_changed_processor(spark, first_run,
                                                                      tmp_path, change):
    processor, starts = PROCESSORS[change]
    broker, checkpoint = first_run
    before = tree_digest(checkpoint)
    check = sk.check_restart(processor, checkpoint, source=TOPIC,
                             **_arguments(spark, broker, processor))
    assert tree_digest(checkpoint) == before
    copy = tmp_path / "ck"
    shutil.copytree(checkpoint, copy)
    assert _spark_restart(spark, broker, processor, copy) is starts
    assert check.compatible is starts, str(check)
    if not starts:
        assert (check.refused["verdict"] == REFUSED).all()


def test_start_processor_refuses_a_restart_spark_would_fail_before_it_starts(spark, first_run,
                                                                          tmp_path):
    broker, checkpoint = first_run
    copy = tmp_path / "ck"
    shutil.copytree(checkpoint, copy)
    before = tree_digest(copy)
    changed = Deduplicate(id="game string")
    with pytest.raises(IncompatibleRestart, match="cannot restart on the checkpoint") as refused:
        start_processor(TOPIC, changed, checkpoint=str(copy),
                        name="dedup-changed", **_arguments(spark, broker, changed))
    assert "the state's key" in str(refused.value)
    assert "dedup-changed" not in [q.name for q in spark.streams.active]
    assert tree_digest(copy) == before


def test_start_processor_restarts_a_compatible_change(spark, first_run, tmp_path):
    broker, checkpoint = first_run
    copy = tmp_path / "ck"
    shutil.copytree(checkpoint, copy)
    longer = Deduplicate(ttl="2 hours")
    query = start_processor(TOPIC, longer, checkpoint=str(copy),
                            name="dedup-longer", trigger="200 milliseconds",
                            **_arguments(spark, broker, longer))
    try:
        query.wait_until_drained(timeout=300)
        seen = query.snapshot("seen")
    finally:
        query.close()
    events, _ = parse_game_events(game_events().records["value"].iloc[:3000].tolist())
    assert len(seen) == len(events.drop_duplicates(["player", "game", "event_time"]))


def test_bad_arguments_to_a_processor_check_are_named(spark, first_run):
    broker, checkpoint = first_run
    with pytest.raises(BadArgument, match="bad source: None"):
        sk.check_restart(Deduplicate(), checkpoint, keys="player")
    with pytest.raises(BadArgument, match="start_processor's arguments only with a Processor"):
        sk.check_restart(sk.QuerySpec(keys=["player"], window=None), checkpoint,
                         keys="player")
    with pytest.raises(BadArgument, match="bad keys"):
        sk.check_restart(Deduplicate(), checkpoint, source=TOPIC, keys=[],
                         event_schema=GAME_EVENT_SCHEMA, kafka=broker)
