"""The same leaderboard on both engines (issue 42 item 3): statekit on Spark and the reference
Kafka Streams application read one topic of game events with one spec. Every (player, window)
both hold has equal values, equal to pandas too; the windows only Kafka Streams holds are the
closed ones Spark evicted at its watermark; the changelog each wrote is counted."""

from __future__ import annotations

import pandas as pd
import pytest

import statekit as sk
from statekit.datasets import GAME_SPEC, game_events
from statekit.datasets.game_parsing import parse_game_events
from statekit.errors import BadArgument
from statekit.kafka.dataset_replay import replay
from statekit.kafka_streams.comparison import KAFKA_STREAMS_ONLY, SPARK_ONLY
from statekit.reference.aggregates import rows_differing, windowed_reference

TOPIC = "ks-side-by-side"
#: the game events happened in January 2026: keep the Kafka Streams changelog's records
KEEP_THE_CHANGELOG = sk.kafka_streams.AppOptions(streams_config={
    "windowstore.changelog.additional.retention.ms": 100 * 365 * 86_400_000})


@pytest.fixture(scope="module")
def both(spark, broker, tmp_path_factory):
    replay(game_events(), broker.bootstrap_servers, TOPIC, partitions=2, progress=False)
    query = sk.start_query(TOPIC, GAME_SPEC, kafka=broker, spark=spark, name="side-by-side",
                           checkpoint=str(tmp_path_factory.mktemp("side") / "ck"),
                           max_offsets_per_trigger=1000, trigger="100 milliseconds")
    try:
        with sk.kafka_streams.start(TOPIC, GAME_SPEC, kafka=broker, instances=1, standbys=0,
                                    options=KEEP_THE_CHANGELOG) as app:
            query.wait_until_drained(timeout=300)
            app.wait_until_consumed(timeout=180)
            compared = sk.kafka_streams.side_by_side(query, app)
        yield compared, query
    finally:
        query.close()


def test_every_window_both_hold_has_equal_values_and_equals_pandas(both):
    compared, _ = both
    assert compared.agrees, compared.summary()
    assert compared.counts[SPARK_ONLY] == 0 and compared.counts["both"] > 0
    good, _ = parse_game_events(game_events().records["value"])
    expected = windowed_reference(
        good.assign(ts=good["event_time"].dt.tz_localize(None)).drop(columns="event_time"),
        GAME_SPEC)
    keys = list(GAME_SPEC.key_columns)
    held = compared.spark.merge(compared.kafka_streams[keys], on=keys)
    assert rows_differing(held, expected.merge(held[keys], on=keys), keys).empty


def test_kafka_streams_keeps_the_windows_spark_evicted_at_its_watermark(both):
    compared, query = both
    only = compared.differences[compared.differences["where"] == KAFKA_STREAMS_ONLY]
    assert len(only) == compared.counts[KAFKA_STREAMS_ONLY] > 0
    watermark = pd.Timestamp(query.progress()["watermark"].dropna().iloc[-1]).tz_localize(None)
    assert (only["window_end"] <= watermark).all()   # each closed: Spark evicted it
    assert len(compared.kafka_streams) == len(compared.spark) + len(only)


def test_each_engine_s_changelog_is_counted(both):
    compared, _ = both
    records = compared.changelog_records
    assert set(records) == {"Spark (statekit)", "Kafka Streams"}
    # each engine writes at least one record per (key, window) it ever held
    assert records["Kafka Streams"] >= len(compared.kafka_streams)
    assert records["Spark (statekit)"] >= len(compared.spark)
    assert "only in Kafka Streams" in compared.summary()


def test_a_key_s_windows_spread_on_spark_and_stay_together_on_kafka_streams(both):
    """Spark hashes the window with the key (murmur3), Kafka Streams the key alone
    (murmur2 of its bytes): one instance answers for all of a player's windows."""
    compared, _ = both
    placement = compared.placement()
    assert (placement["kafka_streams_partitions"] == 1).all()
    assert (placement["spark_partitions"] > 1).any()
    assert placement["windows"].sum() == compared.counts["both"]


def test_something_that_is_not_the_app_is_refused(both):
    compared, query = both
    with pytest.raises(BadArgument, match="bad app"):
        sk.kafka_streams.side_by_side(query, "not an app")


def test_held_lists_each_window_once_with_each_engine_s_partition(both):
    compared, _ = both
    held = compared.held()
    assert held["where"].value_counts().to_dict() == {
        where: n for where, n in compared.counts.items() if n and where != "values differ"}
    only = held[held["where"] == KAFKA_STREAMS_ONLY]
    assert only["partition_spark"].isna().all() and only["partition_kafka_streams"].notna().all()
    assert not held.duplicated(list(GAME_SPEC.key_columns)).any()
