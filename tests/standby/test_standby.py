"""Standby replicas tailing a live changelog, and the failover drill (real processes killed)."""

from __future__ import annotations

import time

import pandas as pd
import pytest

import statekit as sk
from statekit.datasets import GAME_EVENT_SCHEMA, GAME_SPEC
from statekit.drills.failover import failover_drill
from statekit.kafka.clients import plain_consumer
from statekit.kafka.offsets import end_offsets
from statekit.standby.replica import StandbyReplica


def test_a_standby_tails_a_running_query_and_ends_equal_to_its_store(spark, broker, games,
                                                                    tmp_path):
    query = sk.start_query(games, GAME_SPEC, spark=spark, kafka=broker,
                           event_schema=GAME_EVENT_SCHEMA, checkpoint=str(tmp_path / "ck"),
                           name="tailed",
                           max_offsets_per_trigger=500, trigger="100 milliseconds")
    try:
        query.changelog.wait_shipped(0)
        with StandbyReplica(broker, query.changelog_topic, query.spec,
                            tmp_path / "standby", sample_every=0.05) as standby:
            query.wait_until_drained()
            consumer = plain_consumer(broker.bootstrap_servers)
            ends = {p: hi for p, (_, hi) in
                    end_offsets(consumer, query.changelog_topic, [0, 1, 2]).items()}
            consumer.close()
            deadline = time.monotonic() + 30
            while standby.positions != ends and time.monotonic() < deadline:
                time.sleep(0.05)
            assert standby.positions == ends
            now = standby.sample()   # one sample now: the topic's true end, the replica there
            assert dict(zip(now["partition"], now["end_offset"], strict=True)) == ends
            assert (now["lag"] == 0).all()
            time.sleep(0.2)
            table = pd.concat([s.to_pandas().assign(partition=p)
                               for p, s in standby.stores.items()], ignore_index=True)
            lag = standby.lag()
    finally:
        query.close()
    snapshot = query.snapshot()
    keys = ["window_start", "window_end", "player"]
    pd.testing.assert_frame_equal(
        table[snapshot.columns].sort_values(keys, ignore_index=True),
        snapshot.sort_values(keys, ignore_index=True), check_dtype=False)
    assert len(lag) > 0 and set(lag["partition"]) == {0, 1, 2}
    assert (lag.groupby("partition")["lag"].last() == 0).all()
    # Sampled on a timer, apart from the reads: some samples caught the replica behind a batch
    # the writer had just shipped (a sample taken right after each read never does).
    assert lag["lag"].max() > 0, lag.groupby("partition")["lag"].describe()
    assert (lag["lag"] >= 0).all() and set(lag["replica"]) == {"standby"}


@pytest.mark.slow   # failover drill: store owners in worker processes, killed
def test_failover_with_and_without_a_standby(logged, broker, tmp_path):
    query, log = logged
    report = failover_drill(broker.bootstrap_servers, query.changelog_topic, query.spec,
                            tmp_path).set_index("scenario")
    assert list(report.index) == ["no standby", "standby", "stale standby"]
    assert report["correct"].all()
    assert report.loc["no standby", "records_replayed"] == len(log)
    assert report.loc["standby", "records_replayed"] == 0
    # Restoring is part of serving again, and partitions restore at once: on the clock, never
    # longer than the time to serve (a sum over partitions was, in notebook 05's chart).
    assert (report["restore_seconds"] <= report["seconds_to_serve"]).all(), report
    half = log.last_batch // 2
    assert report.loc["stale standby", "records_replayed"] == (log.records["batch"] > half).sum()
    assert (report["seconds_to_serve"] > 0).all()


def test_an_unknown_scenario_is_named(logged, broker, tmp_path):
    query, _ = logged
    with pytest.raises(sk.BadArgument, match="failover scenario: 'hot spare'; accepted: no "
                                             "standby, standby, stale standby"):
        failover_drill(broker.bootstrap_servers, query.changelog_topic, query.spec, tmp_path,
                       scenarios=["hot spare"])


@pytest.mark.slow   # failover drill: a store owner in a worker process, killed
def test_the_drill_panel_runs_a_drill_and_shows_it(logged, broker, tmp_path):
    from statekit.widgets import DrillPanel

    query, _ = logged
    panel = DrillPanel(broker, query.changelog_topic, query.spec, tmp_path)
    panel.choices["no standby"].value = False
    panel.choices["stale standby"].value = False
    report = panel.run()
    assert report["scenario"].tolist() == ["standby"] and report["correct"].all()
    assert "all correct: True" in panel.status.value
    assert "standby" in panel.table.value
    spec = panel.chart.chart.to_dict()
    assert sum(len(v) for v in spec["datasets"].values()) >= 1
