"""Global stores: all partitions of a topic in every instance, restored from the topic itself."""

from __future__ import annotations

import json
import time

import numpy as np
import pandas as pd
import pytest
from confluent_kafka import Producer

import statekit as sk
from statekit.datasets import player_profiles
from statekit.kafka.dataset_replay import replay
from statekit.model.changelog_record import changelog_key_columns
from statekit.options.serve import GlobalTable
from statekit.serve.global_store import GlobalStore
from statekit.serve.instance import ServingInstance

KEYS = ["window_start", "window_end", "player"]


@pytest.fixture(scope="module")
def profiles_topic(broker):
    replay(player_profiles(), broker, "player-profiles", partitions=2, progress=False,
           topic_config={"cleanup.policy": "compact"})
    return "player-profiles"


def produce(broker, topic: str, key: bytes, value: bytes | None) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers,
                         "partitioner": "murmur2_random"})
    producer.produce(topic, key=key, value=value)
    producer.flush(10)


def wait_for(condition, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def test_a_global_store_holds_every_partition_and_follows_the_topic(broker, profiles_topic,
                                                                    tmp_path):
    with GlobalStore(broker, profiles_topic, tmp_path, key_columns=["player"],
                     plain_keys=True) as store:
        store.wait_running()
        assert store.get("p07") == {"player": "p07", "name": "Grace", "team": "gold"}
        assert store.get({"player": "p13"})["team"] == "blue"
        assert store.get("nobody") is None
        frame = store.to_pandas()
        assert len(frame) == 40 and set(frame["team"]) == {"red", "blue", "green", "gold"}
        produce(broker, profiles_topic, b"p07", json.dumps(
            {"player": "p07", "name": "Grace", "team": "red"}).encode())
        wait_for(lambda: store.get("p07")["team"] == "red")
        produce(broker, profiles_topic, b"p39", None)  # a tombstone deletes
        wait_for(lambda: store.get("p39") is None)
        restored = store.restored
    # a restart restores only what came since its checkpoint
    again = GlobalStore(broker, profiles_topic, tmp_path, key_columns=["player"],
                        plain_keys=True)
    try:
        assert again.to_restore == 0 and again.state == "running"
        assert again.get("p07")["team"] == "red" and again.get("p39") is None
        assert restored >= 42
    finally:
        again.close()


def test_a_global_store_of_the_changelog_is_the_whole_aggregate(logged, broker):
    query, _ = logged
    with GlobalStore(broker, query.changelog_topic, None,
                     key_columns=changelog_key_columns(query.spec.key_columns)) as whole:
        whole.wait_running()
        snapshot = query.snapshot()
        table = whole.to_pandas()
        pd.testing.assert_frame_equal(
            table[snapshot.columns[:-1]].sort_values(KEYS, ignore_index=True),
            snapshot.drop(columns="partition").sort_values(KEYS, ignore_index=True),
            check_dtype=False)


def test_top_k_is_enriched_from_a_global_store(logged, broker, profiles_topic, tmp_path):
    query, _ = logged
    table = GlobalTable("players", profiles_topic, ("player",), plain_keys=True)
    with ServingInstance("i0", broker, query.changelog_topic, tmp_path,
                         global_tables=[table]) as instance:
        instance.wait_ready()
        start = query.snapshot()["window_start"].max()
        rows = instance.top_k(start, 5, "sum_score", partitions=[0, 1, 2],
                              enrich="players").rows
        plain = instance.top_k(start, 5, "sum_score", partitions=[0, 1, 2]).rows
        assert [r["player"] for r in rows] == [r["player"] for r in plain]
        profiles = player_profiles().records.set_index("key")["value"].map(json.loads)
        for row in rows:
            assert row["team"] == profiles[row["player"]]["team"] and row["name"]
        answer = instance.global_get("players", "p02")
        assert answer.value["name"] == "Barbara" and answer.partitions[0].role == "global"
        with pytest.raises(sk.BadArgument, match="global store: 'teams'; accepted: players"):
            instance.global_get("teams", "x")


def test_bad_global_store_arguments_are_named(broker, profiles_topic):
    with pytest.raises(sk.BadArgument, match="key_columns of plain keys"):
        GlobalStore(broker, profiles_topic, key_columns=["a", "b"], plain_keys=True)
    with pytest.raises(sk.TopicNotFound, match="no-such-reference"):
        GlobalStore(broker, "no-such-reference", key_columns=["k"])


def test_a_global_key_with_times_and_numpy_values_is_sent_as_the_changelog_writes_it():
    from statekit.serve.client import _jsonable_global

    key = {"player": "p1", "window_start": pd.Timestamp("2026-01-01 10:00", tz="UTC"),
           "n": np.int64(3)}
    assert _jsonable_global(key) == {"player": "p1", "window_start": "2026-01-01T10:00:00.000Z",
                                     "n": 3}
