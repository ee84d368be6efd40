"""How each engine restores the same leaderboard (issue 42 item 3): Kafka Streams' restore
consumer reads its own changelog into a fresh instance, Spark loads its snapshot and delta
files, statekit rebuilds rocksdict stores from the changelog it shipped; each holds what it held
before, and the records and files each read are counted."""

from __future__ import annotations

import copy

import pandas as pd
import pytest

import statekit as sk
from statekit.datasets import GAME_SPEC, game_events
from statekit.errors import BadArgument
from statekit.kafka.dataset_replay import replay
from statekit.kafka_streams.restores import KAFKA_STREAMS, SPARK, STATEKIT
from statekit.model.query_spec import QuerySpec

compare_restores = sk.kafka_streams.compare_restores

TOPIC = "ks-restore-side-by-side"
#: the game events happened in January 2026: keep the Kafka Streams changelog's records
KEEP = {"windowstore.changelog.additional.retention.ms": 100 * 365 * 86_400_000}


@pytest.fixture(scope="module")
def restored(spark, broker, tmp_path_factory):
    work = tmp_path_factory.mktemp("restores")
    replay(game_events(), broker.bootstrap_servers, TOPIC, partitions=2, progress=False)
    query = sk.start_query(TOPIC, GAME_SPEC, kafka=broker, spark=spark, name="restore-sbs",
                           checkpoint=str(work / "ck"), max_offsets_per_trigger=1000,
                           trigger="100 milliseconds")
    app = sk.kafka_streams.start(TOPIC, GAME_SPEC, kafka=broker, instances=2, standbys=1,
                                 cache_max_bytes=0,
                                 options=sk.kafka_streams.AppOptions(streams_config=KEEP))
    try:
        query.wait_until_drained(timeout=300)
        query.changelog.wait_shipped(query.last_batch, timeout=120)
        app.wait_until_consumed(timeout=180)
        held = {"kafka_streams": app.snapshot(sort=True), "spark": query.snapshot()}
        compared = compare_restores(query, app, workdir=work / "restored")
        yield compared, query, app, held
    finally:
        app.close()
        query.close()


def test_each_engine_restores_what_it_held(restored):
    compared, _, _, held = restored
    table = compared.table.set_index("engine")
    assert compared.agrees
    assert table.loc[KAFKA_STREAMS, "rows"] == len(held["kafka_streams"]) > 50
    assert table.loc[SPARK, "rows"] == table.loc[STATEKIT, "rows"] == len(held["spark"]) > 50
    assert table.loc[KAFKA_STREAMS, "equal"] and table.loc[STATEKIT, "equal"]
    assert pd.isna(table.loc[SPARK, "equal"])
    assert (table["seconds"] > 0).all()


def test_the_records_and_files_read_are_each_engine_s_own(restored):
    compared, query, app, _ = restored
    table = compared.table.set_index("engine")
    # with the cache off, Kafka Streams' changelog holds one record per accepted event
    assert table.loc[KAFKA_STREAMS, "records"] == len(app.read_changelog())
    assert table.loc[STATEKIT, "records"] == len(query.read_changelog())
    assert compared.kafka_streams["records"].sum() == table.loc[KAFKA_STREAMS, "records"]
    assert sorted(compared.kafka_streams["partition"]) == [0, 1]
    plan = compared.spark_plan
    assert table.loc[SPARK, "files"] == plan["snapshot_version"].notna().sum() + \
        plan["delta_files"].sum()
    assert (plan["target_version"] == query.last_batch + 1).all()
    assert pd.isna(table.loc[SPARK, "records"]) and pd.isna(table.loc[KAFKA_STREAMS, "files"])


def test_what_is_not_a_running_app_or_a_shipping_query_is_refused(restored, tmp_path):
    _, query, app, _ = restored
    with pytest.raises(BadArgument, match="a running app"):
        compare_restores(query, app, workdir=tmp_path)   # closed by the comparison
    with pytest.raises(BadArgument, match="reference Kafka Streams application"):
        compare_restores(query, query, workdir=tmp_path)
    with pytest.raises(BadArgument, match="ships its changelog"):
        compare_restores(app, app, workdir=tmp_path)
    # the same query handle, read as computing another spec: not the app's leaderboard
    by_game = copy.copy(query)
    by_game.spec = QuerySpec.from_dict({**GAME_SPEC.to_dict(), "keys": ["game"]})
    with pytest.raises(BadArgument, match="a query of the app's spec"):
        compare_restores(by_game, app, workdir=tmp_path)
    assert not list(tmp_path.iterdir())

