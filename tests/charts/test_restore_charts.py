"""Charts of restores on synthetic frames: Gantt of phases, restore speed, standby lag, failover."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from helpers.chartspec import marks, rows

from statekit.charts.restore import (
    failover_chart,
    restore_gantt_chart,
    restore_rate_chart,
    standby_lag_chart,
)
from statekit.errors import BadArgument

T0 = pd.Timestamp("2026-11-22 08:50:25")


def encoding(spec: dict) -> dict:
    """The encoding of a single or faceted chart."""
    return (spec.get("spec") or spec)["encoding"]


def seconds(s: float) -> pd.Timedelta:
    return pd.Timedelta(seconds=s)


def spark_timeline() -> pd.DataFrame:
    """Like restart_timeline(): a first batch and two phases for each of 3 partitions."""
    rows_ = [(-1, "first batch", 0.0, 1.934, "batch 9")]
    for p, (load, replay) in enumerate([(0.365, 0.006), (0.387, 0.006), (0.074, 0.001)]):
        begin = 1.2 + 0.5 * (p == 2)
        rows_ += [(p, "load snapshot", begin, begin + load, f"snapshot 8 (8.zip), p{p}"),
                  (p, "replay deltas", begin + load, begin + load + replay, "delta 9")]
    frame = pd.DataFrame(rows_, columns=["partition", "phase", "from", "to", "detail"])
    frame["start"] = T0 + pd.to_timedelta(frame.pop("from"), unit="s")
    frame["end"] = T0 + pd.to_timedelta(frame.pop("to"), unit="s")
    frame["seconds"] = (frame["end"] - frame["start"]).dt.total_seconds()
    frame["snapshot_version"] = pd.array([None] + [8] * 6, dtype="Int64")
    return frame


def listener_events(partitions=3, batches=4, source: str | None = None) -> pd.DataFrame:
    """Like RecordingListener.frame(): start, batches of 500 records 0.5 s apart, end."""
    out = []
    for p in range(partitions):
        t, total = T0 + seconds(0.1 * p), 0
        out.append((t, p, "start", 0, 0, 0))
        for b in range(batches):
            t, total = t + seconds(0.5 + 0.25 * (b % 2)), total + 500
            out.append((t, p, "batch", total - 1, 500, total))
        out.append((t, p, "end", total, 0, total))
    frame = pd.DataFrame(out, columns=["time", "partition", "event", "offset", "records",
                                       "total"])
    if source is not None:
        frame["source"] = source
    return frame


# --- Gantt ----------------------------------------------------------------------------------
def test_gantt_of_a_spark_restart_has_a_bar_per_phase():
    timeline = spark_timeline()
    spec = restore_gantt_chart(timeline).to_dict()
    assert marks(spec) == ["bar"]
    enc = encoding(spec)
    assert enc["x"]["field"] == "from_s" and enc["x2"]["field"] == "to_s"
    assert enc["y"]["field"] == "row" and enc["color"]["field"] == "phase"
    assert enc["y"]["sort"] == ["whole query", "partition 0", "partition 1", "partition 2"]
    assert enc["color"]["scale"]["domain"] == ["load snapshot", "replay deltas",
                                               "first batch"]
    tips = {t["field"] for t in enc["tooltip"]}
    assert {"seconds", "detail", "phase", "snapshot_version"} <= tips
    data = pd.DataFrame(rows(spec))
    assert len(data) == len(timeline)
    assert data["from_s"].min() == 0
    assert data["to_s"].max() == pytest.approx(1.934)
    first = data[data["phase"] == "first batch"].iloc[0]
    assert first["row"] == "whole query"
    assert (data["to_s"] >= data["from_s"]).all()
    assert "facet" not in spec
    assert "snapshot" in " ".join(spec["title"]["subtitle"])


def test_gantt_of_a_changelog_restore_and_facets_per_scenario():
    restore = pd.DataFrame({
        "partition": [0, 1, 0, 1], "phase": "consume + write",
        "start": [T0, T0, T0, T0 + seconds(0.1)],
        "end": [T0 + seconds(4), T0 + seconds(3), T0 + seconds(1), T0 + seconds(0.9)],
        "scenario": ["raw log", "raw log", "compacted", "compacted"],
        "records": [5000, 4000, 900, 800]})
    spec = restore_gantt_chart(restore, title="Restore from the changelog").to_dict()
    assert spec["facet"]["row"]["field"] == "scenario"
    assert spec["facet"]["row"]["sort"] == ["raw log", "compacted"]
    assert spec["title"]["text"] == "Restore from the changelog"
    assert marks(spec) == ["bar"]
    data = pd.DataFrame(rows(spec))
    assert len(data) == 4
    assert "seconds" in data.columns and "records" in data.columns  # computed / kept
    # each panel starts at its own zero
    assert data.groupby("scenario")["from_s"].min().tolist() == [0, 0]
    assert encoding(spec)["color"]["scale"]["range"][0] == "#54a24b"
    assert len(encoding(spec)["y"]["sort"]) == 2


def test_gantt_of_a_restore_report_from_the_changelog():
    report = pd.DataFrame({"partition": [0, 1], "start_offset": [0, 0],
                           "end_offset": [1200, 900], "records": [1200, 900],
                           "seconds": [0.8, 0.6], "records_per_s": [1500.0, 1500.0],
                           "started": [T0, T0 + seconds(0.8)],
                           "finished": [T0 + seconds(0.8), T0 + seconds(1.4)]})
    spec = restore_gantt_chart(report).to_dict()
    data = pd.DataFrame(rows(spec))
    assert data["phase"].unique().tolist() == ["consume + write"]
    assert data["to_s"].tolist() == pytest.approx([0.8, 1.4])
    assert "records" in {t["field"] for t in encoding(spec)["tooltip"]}


def test_gantt_facets_by_run_and_by_a_named_column():
    both = pd.concat([spark_timeline().assign(run="snapshot every 2"),
                      spark_timeline().assign(run="snapshot every 10")], ignore_index=True)
    spec = restore_gantt_chart(both).to_dict()
    assert spec["facet"]["row"]["field"] == "run"
    assert len(rows(spec)) == 14
    spec = restore_gantt_chart(both.rename(columns={"run": "interval"}),
                               facet="interval").to_dict()
    assert spec["facet"]["row"]["field"] == "interval"
    with pytest.raises(BadArgument, match="facet column"):
        restore_gantt_chart(both, facet="nope")


def test_gantt_leaves_out_phases_that_did_not_end():
    timeline = spark_timeline()
    timeline.loc[2, "end"] = pd.NaT
    spec = restore_gantt_chart(timeline).to_dict()
    assert len(rows(spec)) == len(timeline) - 1
    assert "1 unfinished" in spec["title"]["subtitle"][-1]


def test_gantt_bad_input_names_the_missing_column():
    with pytest.raises(BadArgument) as err:
        restore_gantt_chart(spark_timeline().drop(columns="end"))
    message = str(err.value)
    assert "missing column 'end'" in message
    assert "partition, phase, start, end" in message
    with pytest.raises(BadArgument, match="DataFrame"):
        restore_gantt_chart([1, 2])


# --- restore speed --------------------------------------------------------------------------
def test_rate_is_records_over_the_time_since_the_previous_event():
    events = listener_events()
    spec = restore_rate_chart(events).to_dict()
    assert marks(spec) == ["line"]
    enc = encoding(spec)
    assert enc["y"]["field"] == "records_per_s" and enc["color"]["field"] == "partition"
    assert enc["x"]["field"] == "since_s"
    data = pd.DataFrame(rows(spec))
    assert len(data) == (events["event"] == "batch").sum()
    assert sorted(set(data["records_per_s"].round(6))) == pytest.approx([500 / 0.75, 1000])
    assert data.groupby("partition")["since_s"].min().tolist() == pytest.approx([0.5, 0.6, 0.7])
    assert "facet" not in spec


def test_total_shows_cumulative_records_from_zero():
    events = listener_events(partitions=2)
    spec = restore_rate_chart(events, y="total").to_dict()
    data = pd.DataFrame(rows(spec))
    assert len(data) == len(events)
    assert encoding(spec)["y"]["field"] == "total"
    assert data.groupby("partition")["total"].agg(["min", "max"]).values.tolist() == \
        [[0, 2000], [0, 2000]]
    assert spec["title"]["text"] == "Records restored per partition"


def test_rate_chart_facets_by_source():
    raw = listener_events(source="raw log")
    compacted = listener_events(batches=2, source="compacted")
    compacted["time"] += seconds(60)          # a later restore: its own zero
    spec = restore_rate_chart(pd.concat([raw, compacted], ignore_index=True)).to_dict()
    assert spec["facet"]["row"]["field"] == "source"
    assert spec["facet"]["row"]["sort"] == ["raw log", "compacted"]
    data = pd.DataFrame(rows(spec))
    assert data.groupby("source").size().to_dict() == {"compacted": 6, "raw log": 12}
    assert data.groupby("source")["since_s"].max().max() < 5


def test_batches_at_the_same_instant_have_no_rate():
    events = listener_events(partitions=1, batches=2)
    events.loc[2, "time"] = events.loc[1, "time"]
    data = pd.DataFrame(rows(restore_rate_chart(events).to_dict()))
    assert len(data) == 1


def test_rate_chart_bad_input():
    with pytest.raises(BadArgument, match="missing column 'total'") as err:
        restore_rate_chart(listener_events().drop(columns="total"))
    assert "time, partition, event, records, total" in str(err.value)
    with pytest.raises(BadArgument, match="bad y"):
        restore_rate_chart(listener_events(), y="speed")


# --- standby lag ----------------------------------------------------------------------------
def lag_frame(replicas=("replica 1",)) -> pd.DataFrame:
    out = []
    for replica in replicas:
        for p in range(2):
            for i in range(10):
                end = 1000 + 100 * i
                lag = int(max(0, 300 * np.sin(i / 3 + p)))
                out.append((T0 + seconds(i), p, replica, lag, end - lag, end))
    return pd.DataFrame(out, columns=["time", "partition", "replica", "lag", "position",
                                      "end_offset"])


def test_standby_lag_is_a_line_per_partition_and_replica():
    lag = lag_frame(replicas=("replica 1", "replica 2"))
    spec = standby_lag_chart(lag).to_dict()
    assert marks(spec) == ["line"]
    enc = spec["encoding"]
    assert enc["x"]["field"] == "time" and enc["x"]["type"] == "temporal"
    assert enc["y"]["field"] == "lag" and enc["color"]["field"] == "partition"
    assert enc["strokeDash"]["field"] == "replica"
    assert {t["field"] for t in enc["tooltip"]} >= {"position", "end_offset", "replica"}
    assert len(rows(spec)) == len(lag)


def test_standby_lag_without_optional_columns():
    lag = lag_frame()[["time", "partition", "lag"]]
    spec = standby_lag_chart(lag).to_dict()
    assert "strokeDash" not in spec["encoding"]
    assert set(rows(spec)[0]) == {"time", "partition", "lag"}
    with pytest.raises(BadArgument, match="missing column 'lag'"):
        standby_lag_chart(lag.drop(columns="lag"))


# --- failover -------------------------------------------------------------------------------
def test_failover_bars_per_scenario_with_records_replayed():
    report = pd.DataFrame({"scenario": ["standby", "no standby", "stale standby"],
                           "records_replayed": [0, 5000, 1200],
                           "seconds_to_serve": [0.3, 4.2, 1.5]})
    spec = failover_chart(report).to_dict()
    assert marks(spec) == ["bar", "text"]
    bars, text = spec["layer"]
    assert bars["encoding"]["x"]["field"] == "seconds_to_serve"
    assert bars["encoding"]["y"]["sort"] == ["no standby", "stale standby", "standby"]
    assert text["encoding"]["text"]["field"] == "label"
    data = pd.DataFrame(rows(spec)).set_index("scenario")
    assert data.loc["no standby", "label"] == "5,000 records replayed"
    assert data.loc["standby", "label"] == "0 records replayed"
    assert len(data) == 3


def test_failover_restore_seconds_and_several_rows_per_scenario():
    report = pd.DataFrame({"scenario": ["no standby", "no standby", "standby", "drill"],
                           "records_replayed": [3000, 2000, 1, 10],
                           "seconds_to_serve": [4.2, 3.0, 0.3, 0.5],
                           "restore_seconds": [3.9, 2.5, 0.01, 0.2]})
    spec = failover_chart(report).to_dict()
    assert marks(spec) == ["bar", "bar", "text"]
    assert spec["layer"][1]["encoding"]["x"]["field"] == "restore_seconds"
    data = pd.DataFrame(rows(spec)).set_index("scenario")
    assert len(data) == 3
    assert data.loc["no standby", "records_replayed"] == 5000
    assert data.loc["no standby", "seconds_to_serve"] == 4.2
    assert data.loc["standby", "label"] == "1 record replayed"
    assert spec["layer"][0]["encoding"]["color"]["scale"]["domain"][-1] == "drill"


def test_failover_report_of_a_drill_shows_wrong_contents():
    report = pd.DataFrame({"scenario": ["no standby", "standby", "stale standby"],
                           "records_replayed": [1168, 0, 300],
                           "restore_seconds": [0.041, 0.001, 0.01],
                           "seconds_to_serve": [0.046, 0.004, 0.02],
                           "correct": [True, True, False],
                           "standby_lag_at_kill": [None, 0, 300]})
    spec = failover_chart(report).to_dict()
    data = pd.DataFrame(rows(spec)).set_index("scenario")
    assert data.loc["stale standby", "label"] == "300 records replayed (wrong contents!)"
    assert data.loc["standby", "label"] == "0 records replayed"
    tips = {t["field"] for t in spec["layer"][0]["encoding"]["tooltip"]}
    assert {"correct", "standby_lag_at_kill", "restore_seconds"} <= tips


def test_failover_bad_input():
    with pytest.raises(BadArgument, match="missing column 'seconds_to_serve'") as err:
        failover_chart(pd.DataFrame({"scenario": ["standby"], "records_replayed": [0]}))
    assert "scenario, records_replayed, seconds_to_serve" in str(err.value)
