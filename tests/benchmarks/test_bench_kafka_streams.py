"""bench.kafka_streams at a tiny size: both engines end with the same state, each restores its
changelog, every key query is answered alike by both, and a killed instance's key is answered
again; the figures are built (values and shape, never time)."""

from __future__ import annotations

import pytest

from bench import kafka_streams

RECORDS = 3000


@pytest.fixture(scope="module")
def result(spark):
    # two rounds: the engines' order alternates; the suite's session (a session of the
    # bench's own, started first, would lack what later tests need: the S3A jars)
    return kafka_streams.run(RECORDS, batch=1000, lookups_n=50, repeats=2, write=False,
                             spark=spark)


def test_both_engines_end_with_the_same_state_in_every_round(result):
    assert len(result["equal"]) == 2
    for same in result["equal"]:
        assert same["differing_rows"] == 0
        assert same["spark_rows"] == same["kafka_streams_rows"] == kafka_streams.PLAYERS
        assert same["spark_count_sum"] == same["kafka_streams_count_sum"] == RECORDS
    for one in result["throughput"]["rounds"]:
        assert one["statekit"]["input_rows"] == RECORDS
        assert one["kafka_streams"]["process_total"] > 0
        assert one["kafka_streams"]["cpu_s"] > 0


def test_each_engine_restores_its_changelog(result):
    ks, sk = result["restore"]["kafka_streams"], result["restore"]["statekit"]
    assert sk["records"] >= kafka_streams.PLAYERS
    assert len(result["restore"]["rounds"]) == 2
    assert sum(p["records"] for p in ks["partitions"]) == sum(
        p["end_offset"] - p["start_offset"] for p in ks["partitions"])
    assert {p["partition"] for p in ks["partitions"]} == {0, 1, 2, 3}


def test_every_key_query_is_answered_alike(result):
    lookups = result["lookups"]
    assert lookups["same_answers"] == lookups["lookups"] == 50
    assert lookups["kafka_streams"]["n"] == lookups["statekit"]["n"] == 50


def test_a_killed_instances_key_is_answered_again(result):
    ks, sk = result["failover"]["kafka_streams"], result["failover"]["statekit"]
    assert ks["rows"] and sk["rows"]
    assert ks["first_role"] in ("stale", "active")
    assert ks["active_again_s"] >= ks["answered_s"] > 0


def test_the_figures_name_their_baselines(result):
    figures = kafka_streams.figures_of(result)
    names = {f.name for f in figures}
    assert all(f.baseline in names for f in figures if f.baseline)
    assert {f.target for f in figures if f.target} == {"ratio >= 1.0"}
    assert [f.name for f in figures if f.target] == [
        "statekit restore_stores, records/s", "statekit restore_stores, seconds",
        "statekit REST get p99"]
    assert len(figures) == 16
