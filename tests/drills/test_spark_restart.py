"""Spark's own restore after kill -9: the snapshot interval decides what a restart replays."""

from __future__ import annotations

import pytest

import statekit as sk
from statekit.datasets import GAME_EVENT_SCHEMA, GAME_SPEC
from statekit.drills import spark_restart_drill

GAMES = {"spec": GAME_SPEC, "event_schema": GAME_EVENT_SCHEMA}


@pytest.mark.slow   # Spark restart drill: a query in a worker process, kill -9, restart
@pytest.mark.parametrize("min_deltas", [2, 50])
def test_a_killed_query_restores_from_its_newest_snapshot_and_later_deltas(
        spark, broker, games, tmp_path, min_deltas):
    drill = spark_restart_drill(games, broker, tmp_path / "ck", spark=spark, **GAMES,
                                name=f"restarted-{min_deltas}", batches=6,
                                min_deltas_for_snapshot=min_deltas)
    drill.query.close()
    summary = drill.summary
    version = summary["version"]  # the version of the first batch run after the restart
    assert len(summary) == 3 and (version >= drill.killed_after_batch + 1).all()
    assert summary["matches_plan"].all()
    if min_deltas == 2:  # snapshots every 2 versions: load one, replay at most 2 deltas
        assert summary["snapshot_version"].notna().all()
        assert (summary["delta_files"] <= 2).all()
        assert (summary["delta_files"] == version - summary["snapshot_version"]).all()
    else:  # no snapshot yet: start empty and replay every delta file
        assert summary["snapshot_version"].isna().all()
        assert (summary["delta_files"] == version).all() and (version >= 6).all()
    timeline = drill.timeline
    assert {"load snapshot", "first batch"} <= set(timeline["phase"])
    # a partition shows a replay phase exactly when it had delta files to replay (with a
    # snapshot every 2 versions, maintenance may have uploaded one at the very last version)
    replayed = set(timeline.loc[timeline["phase"] == "replay deltas", "partition"])
    assert replayed == set(summary.loc[summary["delta_files"] > 0, "partition"])
    assert (timeline["seconds"].dropna() >= 0).all()
    chart = sk.charts.restore_gantt_chart(timeline).to_dict()
    assert chart["$schema"].startswith("https://vega.github.io/schema/vega-lite")


def test_bad_drill_settings_are_named(spark, broker, games, tmp_path):
    with pytest.raises(sk.BadArgument, match="min_deltas_for_snapshot: 0"):
        spark_restart_drill(games, broker, tmp_path, spark=spark, **GAMES,
                            min_deltas_for_snapshot=0)
    with pytest.raises(sk.BadArgument, match="batches: -1"):
        spark_restart_drill(games, broker, tmp_path, spark=spark, **GAMES, batches=-1)
    # 5,000 events in 20 batches of 250 would leave the restarted query nothing to run
    with pytest.raises(sk.BadArgument, match=r"max_offsets_per_trigger: 5000; accepted: fewer "
                                             r"than the 5,000 records of topic"):
        spark_restart_drill(games, broker, tmp_path, spark=spark, **GAMES, batches=20)
