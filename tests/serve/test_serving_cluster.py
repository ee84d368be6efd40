"""Serving instances as processes: routing, scatter-gather, REST, a killed owner, reassignment.

Real broker, real Spark query (the ``logged`` fixture), real rocksdict stores in real
processes; every answer is checked against Spark's own state at the batch it reports.
"""

from __future__ import annotations

import json
import time

import httpx
import pandas as pd
import pytest

import statekit as sk
from statekit.errors import ResultTooLarge
from statekit.processes import is_alive
from statekit.serve import PartitionUnavailable, ServingClient, serve
from statekit.serve.results import TableResult

KEYS = ["window_start", "window_end", "player"]


def key_of(row) -> dict:
    return {"player": row["player"], "window_start": row["window_start"]}


@pytest.fixture(scope="module")
def cluster(logged, broker, tmp_path_factory):
    query, _ = logged
    with serve(broker, query.changelog_topic, instances=3, standbys=1,
               workdir=tmp_path_factory.mktemp("cluster")) as running:
        running.wait_ready(timeout=180)
        yield query, running


def test_the_assignment_spreads_partitions_with_a_standby_each(cluster):
    _, running = cluster
    plan = running.assignment
    assert plan.active == {0: "i0", 1: "i1", 2: "i2"}
    assert all(len(plan.standbys[p]) == 1 and plan.standbys[p][0] != plan.active[p]
               for p in range(3))
    frame = running.client().all_metadata()
    assert set(frame["role"]) == {"active", "standby"} and len(frame) == 6
    assert frame["url"].str.startswith("http://127.0.0.1:").all()
    # which process serves each instance, and since when (as its /metadata says)
    assert dict(zip(frame["instance"], frame["pid"], strict=True)) == {
        name: proc.pid for name, proc in running.procs.items()}
    started = running.timeline().query("event == 'started'")["time"].min()
    assert (frame["started"].dt.tz_localize(None) >= started.floor("s")).all()
    # each instance has a control listener of its own, which its /metadata names
    for name in running.names:
        control = running.control_urls[name]
        assert control != running.urls[name]
        meta = httpx.get(f"{running.urls[name]}/metadata").json()
        assert meta["control_url"] == control
        assert httpx.get(f"{control}/metadata").json()["held"] == meta["held"]
        assert httpx.get(f"{control}/health").json() == {"status": "ok", "instance": name}


def test_point_lookups_are_routed_to_the_partition_spark_keeps_the_row_in(cluster):
    query, running = cluster
    client = running.client()
    snapshot = query.snapshot()
    for _, row in snapshot.iterrows():
        meta = client.metadata_for_key(key_of(row))
        assert meta.partition == row["partition"]
        assert meta.active == running.assignment.active[row["partition"]]
    for _, row in snapshot.iterrows():  # every key, through the router, at the same batch
        answer = client.get(key_of(row))
        assert answer.partitions[0].instance == running.assignment.active[row["partition"]]
        assert answer.batch == query.last_batch
        assert (answer.value["count"], answer.value["sum_score"]) == (row["count"],
                                                                      row["sum_score"])


def test_scatter_gather_equals_the_snapshot_and_pandas(cluster):
    query, running = cluster
    client = running.client()
    snapshot = query.snapshot()
    answer = client.all()
    report = answer.report()
    assert sorted(report["partition"]) == [0, 1, 2] and (report["batch"] == query.last_batch).all()
    got = answer.to_pandas()[snapshot.columns[:-1]].sort_values(KEYS, ignore_index=True)
    pd.testing.assert_frame_equal(
        got, snapshot.drop(columns="partition").sort_values(KEYS, ignore_index=True),
        check_dtype=False)
    start = snapshot["window_start"].max()
    window = snapshot[snapshot["window_start"] == start]
    expected = window.sort_values(["sum_score", "player"], ascending=[False, True]).head(5)
    top = client.top_k(start, 5, "sum_score")
    assert [r["player"] for r in top.rows] == expected["player"].tolist()
    assert [r["sum_score"] for r in top.rows] == window["sum_score"].nlargest(5).tolist()


def test_the_whole_state_comes_columnar_and_a_scan_is_never_cut_silently(cluster):
    query, running = cluster
    client = running.client()
    snapshot = query.snapshot()
    table = client.table()  # Arrow IPC from each owner, in parallel
    assert sorted(table.report()["partition"]) == [0, 1, 2]
    got = table.to_pandas()[snapshot.columns].sort_values(KEYS, ignore_index=True)
    pd.testing.assert_frame_equal(got, snapshot.sort_values(KEYS, ignore_index=True),
                                  check_dtype=False)
    # any instance answers the whole table (routing), as Arrow
    response = httpx.get(f"{running.urls['i1']}/stores/{client.store}/table")
    assert response.headers["content-type"] == "application/vnd.apache.arrow.stream"
    assert TableResult.from_ipc(response.content).table.num_rows == len(snapshot)
    # a row-shaped scan longer than its limit is refused, not cut
    with pytest.raises(ResultTooLarge, match="the answer to all has more than 2 rows"):
        client.all(limit=2)
    assert len(client.all(limit=len(snapshot)).rows) == len(snapshot)
    with pytest.raises(sk.BadArgument, match="limit"):
        client.all(limit=0)


def test_rest_answers_any_key_from_any_instance_like_the_python_api(cluster):
    query, running = cluster
    client = running.client()
    row = query.snapshot().iloc[0]
    owner = running.assignment.active[row["partition"]]
    other = next(n for n in running.names if n != owner)
    key = {"player": row["player"],
           "window_start": row["window_start"].strftime("%Y-%m-%dT%H:%M:%SZ")}
    store = client.store
    body = httpx.get(f"{running.urls[other]}/stores/{store}/get",
                     params={"key": json.dumps(key)}).json()
    assert body["rows"] == client.get(key).rows
    assert body["partitions"][0]["instance"] == owner  # forwarded to the owner
    top = httpx.get(f"{running.urls[other]}/stores/{store}/top_k",
                    params={"window_start": key["window_start"], "k": 3,
                            "by": "sum_score"}).json()
    assert top["rows"] == client.top_k(key["window_start"], 3, "sum_score").rows
    schema = httpx.get(f"{running.urls[other]}/openapi.json").json()
    assert "/stores/{name}/get" in schema["paths"]


def test_rest_names_bad_input(cluster):
    query, running = cluster
    url, store = running.urls["i0"], running.client().store
    row = query.snapshot().iloc[0]
    key = json.dumps({"player": row["player"], "window_start": int(
        row["window_start"].value // 1_000_000)})
    cases = [
        ("/stores/nope/get", {"key": key}, 404, "no store 'nope' here"),
        (f"/stores/{store}/get", {"key": "{not json"}, 400, "bad key: '{not json'"),
        (f"/stores/{store}/get", {"key": '{"window_start": 0}'}, 400, "missing ['player']"),
        (f"/stores/{store}/fetch", {"key": '{"player": "p01"}', "time_from": "soon",
                                    "time_to": "0"}, 400, "bad time_from: 'soon'"),
        (f"/stores/{store}/top_k", {"window_start": "0", "k": 3, "by": "score"}, 400,
         "bad top_k by: 'score'"),
        (f"/stores/{store}/get", {"key": key, "min_batch": query.last_batch + 100}, 409,
         f"reflects batch {query.last_batch}"),
        (f"/stores/{store}/all", {"limit": 2}, 413, "more than 2 rows"),
    ]
    for path, params, status, text in cases:
        response = httpx.get(url + path, params=params)
        assert response.status_code == status, (path, params, response.text)
        assert text in response.json()["detail"]["message"], response.text


def test_a_killed_owner_is_served_by_its_standby_then_reassigned(cluster):
    query, running = cluster
    snapshot = query.snapshot()
    stale = ServingClient({n: running.urls[n] for n in running.names})  # never told of changes
    victim = "i1"
    theirs = snapshot[snapshot["partition"].map(running.assignment.active) == victim]
    assert len(theirs) > 0
    standby = running.assignment.standbys[int(theirs["partition"].iloc[0])][0]
    running.kill(victim)
    row = theirs.iloc[0]
    answer = stale.get(key_of(row))  # the owner is gone: a standby answers, and says so
    assert answer.from_standby or answer.partitions[0].instance == standby
    assert answer.partitions[0].instance == standby
    assert answer.value["sum_score"] == row["sum_score"]
    assert answer.batch == query.last_batch
    deadline = time.monotonic() + 60
    while "standby ready" not in set(running.timeline()["event"]) and \
            time.monotonic() < deadline:
        time.sleep(0.2)
    events = running.timeline()
    assert {"killed", "died", "promoted", "reassigned", "standby assigned",
            "standby ready"} <= set(events["event"])
    assert victim not in running.assignment.instances
    fresh = running.client()
    for _, row in theirs.head(20).iterrows():
        answer = fresh.get(key_of(row))
        assert not answer.from_standby and answer.partitions[0].instance == standby
        assert answer.value["count"] == row["count"]
    gathered = fresh.all().to_pandas()
    assert len(gathered) == len(snapshot)


def test_without_standbys_a_dead_owner_fails_fast_naming_the_partition(logged, broker,
                                                                      tmp_path):
    query, _ = logged
    snapshot = query.snapshot()
    with serve(broker, query.changelog_topic, instances=3, standbys=0,
               workdir=tmp_path) as running:
        running.wait_ready(timeout=180)
        client = ServingClient(dict(running.urls), timeout=2.0)
        running.kill("i2")
        time.sleep(0.5)
        row = snapshot[snapshot["partition"] == 2].iloc[0]
        started = time.monotonic()
        with pytest.raises(PartitionUnavailable, match="partition 2 is unavailable"):
            client.get(key_of(row))
        with pytest.raises(PartitionUnavailable, match="partition 2"):
            client.all()
        assert time.monotonic() - started < 15
        partial = client.all(partial=True)
        assert partial.missing == [2] and len(partial.to_pandas()) == (
            snapshot["partition"] != 2).sum()
        response = httpx.get(f"{running.urls['i0']}/stores/{client.store}/all")
        assert response.status_code == 503 and "partition 2" in response.text
        assert response.headers["retry-after"]
    assert isinstance(sk.serve.serve, object)


def test_a_get_for_a_batch_asked_as_soon_as_instances_answer_waits_for_their_restore(
        logged, broker, tmp_path):
    """``serve`` returns once the instances answer, before they have restored: a query that
    asks for a batch waits for the restore (over REST, the instance's own wait)."""
    query, _ = logged
    snapshot = query.snapshot()
    with serve(broker, query.changelog_topic, instances=2, standbys=0,
               workdir=tmp_path) as running:
        client = ServingClient(dict(running.urls), timeout=5.0)
        for _, row in snapshot.groupby("partition").head(1).iterrows():
            answer = client.get(key_of(row), min_batch=query.last_batch, timeout=30)
            assert answer.batch >= query.last_batch
            assert answer.value["count"] == row["count"]


ORPHAN_SCRIPT = """
import sys, time
from statekit.serve import serve
cluster = serve(sys.argv[1], sys.argv[2], instances=2, standbys=1, workdir=sys.argv[3])
print(" ".join(str(p.pid) for p in cluster.procs.values()), flush=True)
time.sleep(600)
"""


def test_no_instance_outlives_a_parent_killed_with_sigkill(logged, broker, tmp_path):
    import signal
    import subprocess
    import sys

    query, _ = logged
    parent = subprocess.Popen([sys.executable, "-c", ORPHAN_SCRIPT, broker.bootstrap_servers,
                               query.changelog_topic, str(tmp_path)],
                              stdout=subprocess.PIPE, text=True)
    try:
        pids = [int(p) for p in parent.stdout.readline().split()]
        assert len(pids) == 2 and all(is_alive(p) for p in pids)
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait(30)
    deadline = time.monotonic() + 30
    while any(is_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(is_alive(p) for p in pids), "a serving instance outlived its parent"


def test_an_exception_in_a_with_block_stops_every_instance(logged, broker, tmp_path):
    query, _ = logged
    with pytest.raises(RuntimeError, match="boom"), serve(
            broker, query.changelog_topic, instances=2, standbys=0, workdir=tmp_path) as running:
        procs = list(running.procs.values())
        raise RuntimeError("boom")
    assert all(proc.poll() is not None for proc in procs)
