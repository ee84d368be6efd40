"""restore_preflight: before a restore, will it succeed, from where, how long; and will the
query's restart lose input (issue 41 item 3). On the real embedded Apache Kafka: changelogs
written straight to the broker, a needed range deleted (DeleteRecords), an empty partition, a
topic the broker's log cleaner compacted, a transaction left open. Every prediction is checked
against what ``restore_stores`` then does."""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from helpers.shipping import wait_for
from helpers.written_changelogs import store_values, write_changelog

import statekit as sk
from statekit.changelog import naming
from statekit.datasets import GAME_EVENT_SCHEMA, GAME_SPEC, game_events
from statekit.kafka.topics import alter_topic_config, create_topic
from statekit.kafka.transactions import transactional_producer
from statekit.model import changelog_record as codec
from statekit.restore import restore_stores
from statekit.restore.preflight import FAILS, INCOMPLETE, INPUT_LOST, NOTE, WAITS

SPEC = sk.QuerySpec(keys=["player"], window=sk.tumbling("1 hour"),
                    aggregates=["count", "sum(score)"])


def delete_records(bootstrap: str, topic: str, partition: int, before: int) -> None:
    """Kafka's DeleteRecords: the partition's log start moves to ``before``."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.delete_records([TopicPartition(topic, partition, before)])
    for future in futures.values():
        future.result(30)


WINDOW = {"window_start": "2026-01-05T10:00:00.000Z", "window_end": "2026-01-05T11:00:00.000Z"}


def produce(bootstrap: str, topic: str, records: list[tuple[int, dict, dict]],
            batch: int = 0) -> None:
    """Write ``records`` (partition, key, value) as changelog records of ``batch``; the
    producer is gone when this returns (none left to retry a stopped broker)."""
    producer = Producer({"bootstrap.servers": bootstrap})
    for seq, (partition, key, value) in enumerate(records):
        producer.produce(topic, key=json.dumps(key).encode(), value=json.dumps(value).encode(),
                         partition=partition, headers=codec.RecordHeaders(
                             batch, seq, len(records), batch - 1).encode())
    assert producer.flush(30) == 0


@pytest.fixture()
def changelog(broker, topic_name):
    topic = f"{topic_name}-changelog"
    return topic, write_changelog(broker.bootstrap_servers, topic, per_batch=300)


def test_a_healthy_restore_is_ok_with_its_offsets_and_an_estimate_then_runs_as_planned(
        changelog, broker, tmp_path):
    topic, expected = changelog
    check = sk.restore_preflight(broker, topic, SPEC, tmp_path)
    assert check.ok and check.of(FAILS).empty and check.of(INCOMPLETE).empty
    parts = check.partitions.set_index("partition")
    assert parts["store_offset"].isna().all()  # no store yet: from the log start
    assert (parts["start"] == parts["log_start"]).all()
    assert (parts["to_read"] == parts["stable_end"] - parts["log_start"]).all()
    assert (parts["stable_end"] == parts["log_end"]).all()  # no transaction open
    assert check.sampled > 0 and check.offsets_per_s > 0 and check.records_per_s > 0
    assert check.estimated_seconds == pytest.approx(parts["estimated_seconds"].sum())
    assert "ok" in repr(check)
    with restore_stores(broker, topic, SPEC, tmp_path) as restored:
        report = restored.report.set_index("partition")
        assert (report["start_offset"] == parts["start"]).all()
        assert (report["end_offset"] == parts["stable_end"]).all()
        assert store_values(restored.table()) == expected
        progress = restored.progress.set_index("partition")
        assert progress["done"].all() and (progress["eta_s"] == 0).all()
        assert (progress["records"] == report["records"]).all()
    again = sk.restore_preflight(broker, topic, SPEC, tmp_path)  # the stores are current now
    assert (again.partitions["store_offset"] == again.partitions["log_end"]).all()
    assert again.partitions["to_read"].sum() == 0 and again.estimated_seconds == 0
    assert again.sampled == 0


def test_a_range_deleted_before_the_store_read_it_fails_as_the_restore_then_does(
        changelog, broker, tmp_path):
    topic, _ = changelog
    with restore_stores(broker, topic, SPEC, tmp_path, to_batch=0) as first:
        read_to = int(first.report.set_index("partition").loc[0, "end_offset"])
    delete_records(broker.bootstrap_servers, topic, 0, read_to + 100)
    check = sk.restore_preflight(broker, topic, SPEC, tmp_path)
    assert not check.ok
    failed = check.of(FAILS)
    assert failed["partition"].tolist() == [0]
    assert f"{read_to}..{read_to + 99}" in failed["what"][0] and "delete" in failed["remedy"][0]
    assert check.partitions.set_index("partition")["start"].isna().tolist() == [True, False,
                                                                                 False]
    with pytest.raises(sk.ChangelogError, match=f"now starts at offset {read_to + 100}"):
        restore_stores(broker, topic, SPEC, tmp_path)


def test_a_store_restored_from_scratch_after_deletions_is_named_incomplete(
        broker, topic_name, tmp_path):
    """A key-value changelog (compact alone) whose first records were deleted: the restore
    runs, and the store it builds misses keys, as predicted."""
    topic = f"{topic_name}-changelog"
    spec = sk.QuerySpec(keys=["player"], window=None, aggregates=["count"])
    # a changelog kept by time, not compacted (a mistake Quix and Faust users meet): DeleteRecords
    # stands for retention deleting its oldest segment (Kafka refuses it on a compacted topic)
    create_topic(broker.bootstrap_servers, topic, 1, {"cleanup.policy": "delete",
                                                      "retention.ms": "-1"})

    produce(broker.bootstrap_servers, topic,
            [(0, {"player": f"p{i}"}, {"count": i + 1}) for i in range(10)])
    delete_records(broker.bootstrap_servers, topic, 0, 4)
    check = sk.restore_preflight(broker, topic, spec, tmp_path)
    incomplete = check.of(INCOMPLETE)
    assert not check.ok and incomplete["partition"].tolist() == [0]
    assert "0..3 are gone" in incomplete["what"][0]
    assert check.of(FAILS).empty  # it runs
    assert check.of(NOTE)["what"].str.contains("not compacted").any()
    with restore_stores(broker, topic, spec, tmp_path) as restored:
        assert sorted(restored.table()["player"]) == [f"p{i}" for i in range(4, 10)]


def test_an_empty_partition_is_noted_and_restores_an_empty_store(broker, topic_name, tmp_path):
    topic = f"{topic_name}-changelog"
    create_topic(broker.bootstrap_servers, topic, 2, naming.topic_config(True, 86_400_000))
    produce(broker.bootstrap_servers, topic,
            [(0, {"player": "p1", **WINDOW}, {"count": 2, "sum_score": 9})])
    check = sk.restore_preflight(broker, topic, SPEC, tmp_path)
    assert check.ok
    notes = check.of(NOTE)
    assert notes["partition"].tolist() == [1] and "is empty" in notes["what"][0]
    with restore_stores(broker, topic, SPEC, tmp_path) as restored:
        assert restored.report.set_index("partition")["records"].to_dict() == {0: 1, 1: 0}


def test_a_compacted_topic_estimates_by_offsets_not_records(changelog, broker):
    """The broker's log cleaner removed superseded records: offsets have holes, so a restore
    reads fewer records than its offset span, and the estimate goes by offsets."""
    topic, expected = changelog
    # the tests hold the cleaner back (conftest: changelogs_read_whole); let it go here
    alter_topic_config(broker.bootstrap_servers, topic, {"min.compaction.lag.ms": "0"})
    time.sleep(1.2)  # past segment.ms: the next record rolls each partition's segment
    produce(broker.bootstrap_servers, topic,
            [(p, {"player": f"roll{p}", **WINDOW}, {"count": 1, "sum_score": p})
             for p in range(3)], batch=4)
    expected.update({(f"roll{p}", WINDOW["window_start"]): (1, p) for p in range(3)})
    wait_for(lambda: len(broker.cleaned_offsets(topic)) == 3, 90, "a cleaning pass")
    check = sk.restore_preflight(broker, topic, SPEC)
    assert check.ok and check.of(INCOMPLETE).empty
    assert check.offsets_per_s > check.records_per_s  # holes: offsets pass faster
    with restore_stores(broker, topic, SPEC) as restored:
        assert restored.report["records"].sum() < check.partitions["to_read"].sum()
        assert store_values(restored.table()) == expected


def test_an_open_transaction_is_named_and_a_restore_stops_before_it(changelog, broker,
                                                                    topic_name, tmp_path):
    topic, expected = changelog
    producer = transactional_producer(broker, f"{topic_name}-writer")
    producer.begin_transaction()
    producer.produce(topic, key=json.dumps({"player": "late", **WINDOW}).encode(),
                     value=json.dumps({"count": 1, "sum_score": 1}).encode(), partition=1,
                     headers=codec.RecordHeaders(9, 0, 1, 3).encode())
    producer.flush(30)
    try:
        check = sk.restore_preflight(broker, topic, SPEC, tmp_path)
        waits = check.of(WAITS)
        assert waits["partition"].tolist() == [1] and "transaction" in waits["what"][0]
        assert check.ok  # it runs; it cannot read the open transaction yet
        parts = check.partitions.set_index("partition")
        assert parts.loc[1, "stable_end"] < parts.loc[1, "log_end"]
        with restore_stores(broker, topic, SPEC, tmp_path) as restored:
            assert store_values(restored.table()) == expected  # without the open record
            assert restored.report.set_index("partition").loc[1, "end_offset"] == \
                parts.loc[1, "stable_end"]
    finally:
        producer.abort_transaction(30)
        del producer


def test_a_restart_that_would_lose_input_and_the_ledger_are_checked(spark, broker, topic_name,
                                                                    tmp_path):
    """A query stopped; more input arrives and retention deletes it before the query runs
    again: the restart would start at offsets the source no longer holds."""
    from statekit.kafka.dataset_replay import replay

    source = f"{topic_name}-games"
    events = game_events().records.head(400)
    replay(events.iloc[:200], broker.bootstrap_servers, source, partitions=1, progress=False)
    query = sk.start_query(source, GAME_SPEC, spark=spark, kafka=broker,
                           event_schema=GAME_EVENT_SCHEMA, checkpoint=str(tmp_path / "ck"),
                           name=f"{topic_name}-q", trigger="available-now")
    query.wait_until_drained(timeout=300)
    query.close()
    check = sk.restore_preflight(broker, query.changelog_topic, query.spec,
                                 checkpoint=query.checkpoint)
    assert check.ok and check.of(INPUT_LOST).empty
    assert not check.findings["what"].str.contains("ledger").any()
    replay(events.iloc[200:], broker.bootstrap_servers, source, create=False, progress=False)
    delete_records(broker.bootstrap_servers, source, 0, 300)
    check = sk.restore_preflight(broker, query.changelog_topic, query.spec,
                                 checkpoint=query.checkpoint)
    lost = check.of(INPUT_LOST)
    assert lost["partition"].tolist() == [0]
    assert "from offset 200" in lost["what"][0] and "200..299" in lost["what"][0]
    restarted = sk.start_query(source, GAME_SPEC, spark=spark, kafka=broker,
                               event_schema=GAME_EVENT_SCHEMA, checkpoint=str(tmp_path / "ck"),
                               name=f"{topic_name}-q", trigger="available-now")
    try:
        # as predicted: the restart refuses to skip the deleted input
        with pytest.raises(sk.StatekitError, match=r"offsets 200\.\.299 .* no longer on the"):
            restarted.wait_until_drained(timeout=300)
    finally:
        restarted.close()


def test_bad_arguments_are_named(changelog, broker):
    topic, _ = changelog
    with pytest.raises(sk.BadArgument, match="partition: 7"):
        sk.restore_preflight(broker, topic, SPEC, partitions=[7])
    with pytest.raises(sk.BadArgument, match="sample: -1"):
        sk.restore_preflight(broker, topic, SPEC, sample=-1)
    with pytest.raises(sk.TopicNotFound):
        sk.restore_preflight(broker, f"{topic}-nope", SPEC)
    check = sk.restore_preflight(broker, topic, SPEC, sample=0)
    assert check.estimated_seconds is None and check.sampled == 0
    with pytest.raises(sk.BadArgument, match="verdict"):
        check.of("maybe")
