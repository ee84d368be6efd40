"""Charts of interactive queries on small hand-made frames, and the live leaderboard on a real
serving cluster (2 instances, the ``logged`` query's changelog) driven headless."""

from __future__ import annotations

import threading
import time

import numpy as np
import pandas as pd
import pytest
from helpers.chartspec import marks, rows

from statekit.charts.failover import failover_timeline_chart
from statekit.charts.serving import (
    duration_text,
    latency_chart,
    leaderboard_chart,
    placement_chart,
)
from statekit.errors import BadArgument
from statekit.serve.routing.assignment import assign

T0 = pd.Timestamp("2026-11-22 09:00:00")


def ms(n: float) -> pd.Timedelta:
    return pd.Timedelta(milliseconds=n)


def tooltip_fields(layer: dict) -> set[str]:
    return {t["field"] for t in layer["encoding"]["tooltip"]}


def data_of(spec: dict, layer: int) -> pd.DataFrame:
    """The rows of one layer of a layered spec (each layer carries its own data)."""
    return pd.DataFrame(spec["datasets"][spec["layer"][layer]["data"]["name"]])


# --- placement ------------------------------------------------------------------------------
def test_placement_is_a_partition_by_instance_grid_with_roles_coloured():
    plan = assign(4, ["i0", "i1", "i2"], standbys=1)
    spec = placement_chart(plan.to_frame()).to_dict()
    assert marks(spec) == ["rect", "text"]
    cells, labels = spec["layer"]
    enc = cells["encoding"]
    assert (enc["x"]["field"], enc["y"]["field"], enc["color"]["field"]) == (
        "instance", "partition", "role")
    assert enc["x"]["scale"]["domain"] == ["i0", "i1", "i2"]
    assert enc["y"]["sort"] == [0, 1, 2, 3]
    assert enc["color"]["scale"]["domain"] == ["active", "standby"]
    assert enc["color"]["scale"]["range"][0] != enc["color"]["scale"]["range"][1]
    assert labels["encoding"]["text"]["field"] == "role"
    data = pd.DataFrame(rows(spec))
    assert len(data) == 8
    actives = data[data["role"] == "active"].set_index("partition")["instance"].to_dict()
    assert actives == {0: "i0", 1: "i1", 2: "i2", 3: "i0"}
    assert data.loc[data["instance"] == "i0", "holds"].iloc[0] == "2 active, 1 standby"
    assert {"partition", "instance", "role", "holds"} <= tooltip_fields(cells)
    assert "4 partitions on 3 instances, up to 1 standby each." in spec["title"]["subtitle"][0]


def test_placement_after_a_death_keeps_the_dead_instance_as_an_empty_column():
    plan = assign(3, ["i0", "i1", "i2"], standbys=1)
    after = plan.without("i1").to_frame()
    after["url"] = after["instance"].map({"i0": "http://127.0.0.1:1", "i2": "http://127.0.0.1:2"})
    spec = placement_chart(after, instances=plan.instances).to_dict()
    assert spec["layer"][0]["encoding"]["x"]["scale"]["domain"] == ["i0", "i1", "i2"]
    data = pd.DataFrame(rows(spec))
    assert "i1" not in set(data["instance"])
    assert "url" in tooltip_fields(spec["layer"][0])
    assert data[data["role"] == "active"].set_index("partition")["instance"].to_dict() == \
        {0: "i0", 1: "i2", 2: "i2"}


def test_placement_bad_input_is_named():
    with pytest.raises(BadArgument, match="missing column 'role'") as err:
        placement_chart(pd.DataFrame({"partition": [0], "instance": ["i0"]}))
    assert "partition, instance, role" in str(err.value)
    with pytest.raises(BadArgument, match="bad role: 'leader'; accepted: active, standby"):
        placement_chart(pd.DataFrame({"partition": [0], "instance": ["i0"],
                                      "role": ["leader"]}))
    with pytest.raises(BadArgument, match="bad partition: -1"):
        placement_chart(pd.DataFrame({"partition": [-1], "instance": ["i0"],
                                      "role": ["active"]}))


# --- latency --------------------------------------------------------------------------------
def latencies() -> pd.DataFrame:
    rng = np.random.default_rng(7)
    parts = [("REST", 9e-4, 400), ("in-process", 12e-6, 3000), ("snapshot()", 0.4, 12),
             ("scatter-gather", 3e-3, 60), ("my kind", 5e-5, 30)]
    return pd.concat([pd.DataFrame({"kind": kind, "seconds": rng.lognormal(np.log(m), 0.3, n)})
                      for kind, m, n in parts], ignore_index=True)


def test_latency_chart_has_a_log_axis_from_microseconds_to_seconds_and_marks_p50_p99():
    frame = latencies()
    spec = latency_chart(frame, max_points=500).to_dict()
    assert marks(spec) == ["tick", "tick"]
    samples_layer, marker_layer = spec["layer"]
    x = samples_layer["encoding"]["x"]
    assert x["field"] == "seconds" and x["scale"]["type"] == "log"
    decades = x["axis"]["values"]
    assert decades[0] <= frame["seconds"].min() and decades[-1] >= frame["seconds"].max()
    assert decades[0] <= 1e-5 and decades[-1] >= 1                       # µs to s
    assert all(b / a == pytest.approx(10) for a, b in zip(decades, decades[1:], strict=False))
    assert "'~s'" in x["axis"]["labelExpr"] and "'s'" in x["axis"]["labelExpr"]
    order = samples_layer["encoding"]["y"]["sort"]
    assert [row.split(" · ")[0] for row in order] == [
        "in-process", "scatter-gather", "REST", "snapshot()", "my kind"]   # known kinds first
    markers = data_of(spec, 1)
    for kind, group in frame.groupby("kind"):
        got = markers[markers["kind"] == kind].set_index("marker")["seconds"]
        assert got["p50"] == pytest.approx(group["seconds"].median())
        assert got["p99"] == pytest.approx(group["seconds"].quantile(0.99))
        row = next(r for r in order if r.startswith(kind + " ·"))
        assert f"p99 {duration_text(got['p99'])}" in row
    assert marker_layer["encoding"]["color"]["scale"]["domain"] == ["p50", "p99"]
    assert {"kind", "marker", "latency", "queries", "p50", "p99"} <= tooltip_fields(marker_layer)
    samples = data_of(spec, 0)
    counts = samples.groupby("kind").size()
    assert counts["in-process"] == 500 and counts["REST"] == 400 and counts["snapshot()"] == 12
    thinned = samples.loc[samples["kind"] == "in-process", "seconds"]
    whole = frame.loc[frame["kind"] == "in-process", "seconds"]
    assert (thinned.min(), thinned.max()) == (whole.min(), whole.max())   # the same spread
    assert thinned.median() == pytest.approx(whole.median(), rel=0.01)
    assert "in-process: more than 500 queries" in spec["title"]["subtitle"][1]


def test_latency_targets_are_drawn_per_kind():
    frame = latencies()
    spec = latency_chart(frame, targets={"in-process": 20e-6, "REST": 2e-3}).to_dict()
    markers = data_of(spec, 1)
    targets = markers[markers["marker"] == "target"].set_index("kind")["seconds"].to_dict()
    assert targets == {"in-process": 20e-6, "REST": 2e-3}
    assert spec["layer"][1]["encoding"]["color"]["scale"]["domain"] == ["p50", "p99", "target"]


def test_latency_bad_input_is_named():
    good = pd.DataFrame({"kind": ["REST", "REST"], "seconds": [0.001, 0.002]})
    with pytest.raises(BadArgument, match="missing column 'seconds'"):
        latency_chart(good.rename(columns={"seconds": "ms"}))
    for bad in (0.0, -0.001, float("nan"), "fast"):
        frame = good.astype({"seconds": object})
        frame.loc[1, "seconds"] = bad
        with pytest.raises(BadArgument, match="bad latency seconds: .*accepted: numbers of "
                                              "seconds > 0"):
            latency_chart(frame)
    with pytest.raises(BadArgument, match="bad target kind: 'routed'; accepted: REST"):
        latency_chart(good, targets={"routed": 1e-3})
    with pytest.raises(BadArgument, match="bad target of 'REST': -1"):
        latency_chart(good, targets={"REST": -1})


def test_durations_read_in_their_unit():
    assert [duration_text(s) for s in (4e-9, 2e-5, 0.0015, 0.2, 12.0)] == [
        "4 ns", "20 µs", "1.5 ms", "200 ms", "12 s"]


# --- the failover timeline --------------------------------------------------------------------
def cluster_timeline() -> pd.DataFrame:
    """Like ServingCluster.timeline() around a kill of i1 (3 instances, 3 partitions)."""
    events = [
        (0, "i0", "started", [0, 2], "pid 1"), (1, "i1", "started", [0, 1], "pid 2"),
        (2, "i2", "started", [1, 2], "pid 3"),
        (20_000, "i1", "killed", [0, 1], "SIGKILL"),
        (20_150, "i1", "died", [0, 1], "exit code -9"),
        (20_151, "i2", "promoted", [1], "standby of partition 1 answers for it now"),
        (20_160, "i0", "standby assigned", [1], "restoring from the changelog"),
        (20_161, "i1", "reassigned", [0, 1], "assignment version 2"),
        (21_300, "i0", "standby ready", [1], "restored 1,234 records"),
    ]
    frame = pd.DataFrame(events, columns=["time", "instance", "event", "partitions", "detail"])
    frame["time"] = T0 + pd.to_timedelta(frame["time"], unit="ms")
    return frame


def test_failover_timeline_has_a_row_per_instance_and_a_mark_per_event():
    timeline = cluster_timeline()
    spec = failover_timeline_chart(timeline).to_dict()
    assert marks(spec) == ["rule", "rule", "point"]
    events_layer = spec["layer"][2]
    enc = events_layer["encoding"]
    assert enc["y"]["field"] == "instance" and enc["y"]["sort"] == ["i0", "i1", "i2"]
    assert enc["x"]["field"] == "from_s" and enc["x"]["title"] == "seconds since i1 was killed"
    assert enc["color"]["field"] == "event" and enc["shape"]["field"] == "event"
    assert enc["color"]["scale"]["domain"][:3] == ["started", "killed", "died"]
    assert {"time", "instance", "event", "partitions", "detail"} <= tooltip_fields(events_layer)
    events = data_of(spec, 2)
    assert len(events) == len(timeline)
    got = events.set_index("event")
    assert got.loc["killed", "from_s"] == 0
    assert got.loc["standby ready", "from_s"] == pytest.approx(1.3)
    assert got.loc["died", "partitions"] == "0, 1" and got.loc["promoted", "partitions"] == "1"
    # zoomed to the 1.3 s incident, died and reassigned of i1 (11 ms apart) share a moment and
    # take a lane each; killed, 0.15 s before them, is a tenth of the axis away (its own line)
    assert sorted(got.loc[["killed", "died", "reassigned"], "lane"]) == [-0.5, 0, 0.5]
    assert got.loc["killed", "lane"] == 0
    assert got.loc["standby ready", "lane"] == 0
    lives = data_of(spec, 0).set_index(["instance", "state"])
    assert lives.loc[("i1", "serving"), "to_s"] == pytest.approx(0.15)     # until it died
    assert lives.loc[("i1", "dead"), "to_s"] == pytest.approx(1.3)
    assert ("i0", "dead") not in lives.index
    zoom = [p for p in spec.get("params", []) if p.get("bind") == "scales"]
    assert len(zoom) == 1 and zoom[0]["select"]["encodings"] == ["x"]     # zoom in time only
    # it opens on the incident: from just before the kill to just after the standby is ready,
    # the startup 20 s earlier left of it; zoom=False draws the whole run
    assert enc["x"]["scale"]["domain"] == pytest.approx([-0.065, 1.365])
    assert all(layer["mark"]["clip"] for layer in spec["layer"])
    assert "3 earlier events are left of it" in " ".join(spec["title"]["subtitle"])
    whole = failover_timeline_chart(timeline, zoom=False).to_dict()
    assert "domain" not in whole["layer"][2]["encoding"]["x"].get("scale", {})
    # over the whole 21 s run, the three events of i1 within 0.2 s are one moment: three lanes
    at_once = data_of(whole, 2).set_index("event").loc[["killed", "died", "reassigned"], "lane"]
    assert sorted(at_once) == [-1, 0, 1]


def test_failover_timeline_origin_and_text_partitions():
    timeline = cluster_timeline()
    timeline["partitions"] = timeline["partitions"].map(lambda p: ",".join(map(str, p)))
    spec = failover_timeline_chart(timeline.iloc[:3], origin="first").to_dict()
    assert spec["layer"][2]["encoding"]["x"]["title"] == "seconds since the first event"
    assert "domain" not in spec["layer"][2]["encoding"]["x"].get("scale", {})  # no incident
    events = data_of(spec, 2)
    assert events["from_s"].tolist() == [0, 0.001, 0.002]
    assert events["partitions"].tolist() == ["0,2", "0,1", "1,2"]


def test_failover_timeline_bad_input_is_named():
    with pytest.raises(BadArgument, match="missing column 'partitions'"):
        failover_timeline_chart(cluster_timeline().drop(columns="partitions"))
    with pytest.raises(BadArgument, match="bad origin: 'kill'; accepted: auto, first"):
        failover_timeline_chart(cluster_timeline(), origin="kill")
    with pytest.raises(BadArgument, match="no events"):
        failover_timeline_chart(cluster_timeline().iloc[:0])


# --- leaderboard ------------------------------------------------------------------------------
def board_rows(n=4) -> list[dict]:
    return [{"player": f"p{i:02d}", "window_start": "2026-01-05T10:50:00.000Z",
             "window_end": "2026-01-05T11:00:00.000Z", "count": 10 - i,
             "sum_score": 100.0 - 7.5 * i} for i in range(n)]


def test_leaderboard_draws_the_rows_in_rank_order():
    given = board_rows()
    spec = leaderboard_chart(given, "sum_score").to_dict()
    assert marks(spec) == ["bar", "text"]
    bars, text = spec["layer"]
    assert bars["encoding"]["x"]["field"] == "sum_score"
    assert bars["encoding"]["y"]["sort"] == ["1. p00", "2. p01", "3. p02", "4. p03"]
    assert text["encoding"]["text"]["field"] == "sum_score"
    data = rows(spec)
    assert [{k: r[k] for k in given[0]} for r in data] == given
    assert [r["rank"] for r in data] == [1, 2, 3, 4]
    assert {"rank", "player", "sum_score", "count", "window_start"} <= tooltip_fields(bars)
    assert spec["title"]["text"] == "Top 4 by sum_score"
    assert spec["title"]["subtitle"] == ["window from 2026-01-05 10:50:00 to 11:00:00"]


def test_leaderboard_takes_a_frame_keys_and_extra_subtitle_lines():
    frame = pd.DataFrame(board_rows(3))
    frame["window_start"] = pd.to_datetime(frame["window_start"]).dt.tz_localize(None)
    frame["game"] = "g1"
    spec = leaderboard_chart(frame, "count", keys=["game", "player"],
                             subtitle="as of batch 9").to_dict()
    assert spec["layer"][0]["encoding"]["y"]["sort"][0] == "1. g1 · p00"
    assert spec["title"]["subtitle"][1] == "as of batch 9"
    assert rows(spec)[0]["window_start"].startswith("2026-01-05T10:50:00")


def test_rows_of_several_windows_say_which_window_each_is():
    """A store's top rows over all its windows: the same player may rank twice."""
    later = [{**r, "window_start": "2026-01-05T11:00:00.000Z",
              "window_end": "2026-01-05T11:10:00.000Z"} for r in board_rows(2)]
    spec = leaderboard_chart([later[0], board_rows(1)[0], later[1]], "sum_score").to_dict()
    labels = spec["layer"][0]["encoding"]["y"]["sort"]
    assert labels == ["1. p00 · 11:00", "2. p00 · 10:50", "3. p01 · 11:00"]
    assert len(set(labels)) == 3 and spec["title"]["subtitle"] == ["2 windows"]


def test_an_empty_leaderboard_and_bad_input():
    spec = leaderboard_chart([], "sum_score").to_dict()
    assert rows(spec) == [] and spec["title"]["subtitle"] == ["no rows yet"]
    with pytest.raises(BadArgument, match="bad leaderboard by: 'player'; accepted: count, "
                                          "sum_score"):
        leaderboard_chart(board_rows(), "player")
    with pytest.raises(BadArgument, match="bad leaderboard by: 'score'"):
        leaderboard_chart(board_rows(), "score")
    with pytest.raises(BadArgument, match="bad leaderboard rows: 'str'"):
        leaderboard_chart("p01", "count")
    with pytest.raises(BadArgument, match="bad leaderboard key column: 'team'"):
        leaderboard_chart(board_rows(), "count", keys=["team"])


# --- the live leaderboard on a real serving cluster -----------------------------------------
@pytest.fixture(scope="module")
def serving(logged, broker, tmp_path_factory):
    """Two serving instances (one standby each) of the drained query's changelog."""
    from statekit.serve import serve

    query, _ = logged
    with serve(broker, query.changelog_topic, instances=2, standbys=1,
               workdir=tmp_path_factory.mktemp("leaderboard")) as running:
        running.wait_ready(timeout=180)
        client = running.client()
        yield query, running, client
        client.close()


def board_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "statekit-leaderboard"]


def test_live_leaderboard_shows_the_top_k_of_the_latest_window(serving):
    from statekit.widgets import LiveLeaderboard

    query, running, client = serving
    snapshot = query.snapshot()
    latest = snapshot["window_start"].max()
    board = LiveLeaderboard(client, k=5, by="sum_score", query=query)
    assert "not refreshed yet" in board.status.value and rows(board.chart.spec) == []
    result = board.refresh()
    expected = client.top_k(latest, 5, "sum_score")
    shown = rows(board.chart.spec)
    assert [{k: r[k] for k in expected.rows[0]} for r in shown] == expected.rows
    assert result.rows == expected.rows and len(expected.rows) == min(
        5, (snapshot["window_start"] == latest).sum())
    assert pd.Timestamp(board.window_start).tz_localize(None) == latest
    last = query.last_batch
    assert result.batch == last
    status = board.status.value
    assert f"as of batch {last}" in status and f"Spark at batch {last}" in status
    for partition, owner in running.assignment.active.items():
        assert f"p{partition} {owner} (active, batch {last})" in status
    assert f"as of batch {last}" in board.chart.spec["title"]["subtitle"][-1]
    again = board.refresh()          # from the latest window seen on: the same board
    assert again.rows == expected.rows and board.error is None
    board.status.value = "pressed?"
    board.button.click()             # the Refresh button does what refresh() does
    assert board.status.value.count(f"as of batch {last}") == 1 and board.result.rows == \
        expected.rows
    # a given window, asked with top_k
    first = snapshot["window_start"].min()
    fixed = LiveLeaderboard(client, window=first, k=3, by="count")
    assert fixed.refresh().rows == client.top_k(first, 3, "count").rows
    assert [r["player"] for r in rows(fixed.chart.spec)] == [
        r["player"] for r in client.top_k(first, 3, "count").rows]
    # the real frames of the cluster go through the pure charts
    placement = placement_chart(client.all_metadata(), instances=running.names).to_dict()
    assert len(rows(placement)) == 2 * len(running.assignment.active)
    timeline = failover_timeline_chart(running.timeline()).to_dict()
    assert set(data_of(timeline, 2)["event"]) == {"started"}
    for widget in (board, fixed):
        widget.close()


def test_live_leaderboard_bad_arguments(serving):
    from statekit.widgets import LiveLeaderboard

    _, _, client = serving
    with pytest.raises(BadArgument, match="bad leaderboard by: 'score'; accepted: count, "
                                          "sum_score, max_score"):
        LiveLeaderboard(client, by="score")
    with pytest.raises(BadArgument, match="bad k: 0"):
        LiveLeaderboard(client, k=0)
    with pytest.raises(BadArgument, match="bad every: 0"):
        LiveLeaderboard(client, every=0)
    with pytest.raises(BadArgument, match="bad window: 'soon'"):
        LiveLeaderboard(client, window="soon")
    with pytest.raises(BadArgument, match="bad client: 'dict'"):
        LiveLeaderboard({}, k=3)


def test_live_leaderboard_thread_starts_and_stops_leaving_no_thread(serving):
    from statekit.widgets import LiveLeaderboard

    query, _, client = serving
    board = LiveLeaderboard(client, k=3, by="count", every=0.05)
    assert board.start() is board and board.running
    assert board.start() is board and len(board_threads()) == 1     # a second start: no-op
    deadline = time.monotonic() + 60
    while board.result is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert board.result is not None, board.status.value
    assert board.result.batch == query.last_batch
    board.stop()
    assert not board.running and board_threads() == []
    board.start()                     # again, then close() ends it too
    assert board.running
    board.close()
    assert not board.running and board_threads() == []
