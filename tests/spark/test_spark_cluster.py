"""statekit on a real Spark standalone cluster: the same query, the same answers.

One cluster for the module (``local_cluster``: a master and two one-core workers, each a
JVM, on 127.0.0.1). The test session's own ``local[2]`` session cannot drive it (one
SparkContext a process), so a child process runs the leaderboard query on
``cluster.master_url`` (executors in the workers' JVMs, with Python workers of their own)
and writes what it saw to files; the tests compare that with the ``local[2]`` run of the
same query over the same topic (the ``logged`` fixture). Restore and serving read the
changelog the cluster's query shipped. Nothing may be left running afterwards.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from helpers.plainrun import assert_same_rows

from statekit.changelog.reader import read_changelog
from statekit.errors import BadArgument
from statekit.processes import is_alive, process_table
from statekit.restore import restore_stores
from statekit.serve import serve
from statekit.spark.standalone import LocalCluster, local_cluster

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]

KEYS = ["window_start", "window_end", "player"]

#: The child process: the very code a user runs on a laptop, pointed at the cluster.
DRIVER = r'''
import json, os, sys, urllib.request
from pathlib import Path

import statekit as sk
from statekit.datasets import GAME_EVENT_SCHEMA, GAME_SPEC

master, web_url, bootstrap, topic, out = sys.argv[1:6]
conf = json.loads(sys.argv[6])
out = Path(out)
spark = sk.spark_session(master, app_name="statekit-on-cluster", shuffle_partitions=3,
                         conf=conf)
query = sk.start_query(topic, GAME_SPEC, spark=spark, kafka=bootstrap,
                       event_schema=GAME_EVENT_SCHEMA, checkpoint=str(out / "checkpoint"),
                       name="board-on-cluster", store_name="counts",
                       max_offsets_per_trigger=500, trigger="100 milliseconds",
                       # compared record for record with the local run's log
                       changelog_topic_config=sk.changelog.HOLD_COMPACTION)
query.wait_until_drained(timeout=1500)
with urllib.request.urlopen(web_url + "/json", timeout=10) as answer:
    apps = json.load(answer)["activeapps"]
where = (spark.sparkContext.parallelize(range(4), 4)
         .map(lambda _: (os.getpid(), os.getcwd())).collect())
query.snapshot().to_pickle(out / "snapshot.pkl")
query.changes(from_batch=0).to_pickle(out / "changes.pkl")
query.metadata().to_pickle(out / "metadata.pkl")
(out / "run.json").write_text(json.dumps({
    "master": spark.sparkContext.master, "last_batch": query.last_batch,
    "changelog_topic": query.changelog_topic, "apps": apps, "python_workers": where,
    "driver_pid": os.getpid()}))
query.close()
spark.stop()
'''


#: A checkpoint on each machine's own disk: the query runs, statekit refuses to read it.
UNSHARED_DRIVER = r'''
import json, sys
from pathlib import Path

import statekit as sk
from statekit.datasets import GAME_EVENT_SCHEMA, GAME_SPEC

master, bootstrap, topic, checkpoint, out = sys.argv[1:6]
spark = sk.spark_session(master, app_name="statekit-unshared", shuffle_partitions=3,
                         conf=json.loads(sys.argv[6]))
query = sk.start_query(topic, GAME_SPEC, spark=spark, kafka=bootstrap, changelog=False,
                       event_schema=GAME_EVENT_SCHEMA, checkpoint=checkpoint,
                       name="board-unshared", max_offsets_per_trigger=1000,
                       trigger="100 milliseconds")
seen = {}
try:  # each partition's task usually stays on the executor holding its state; if one moves:
    query.wait_until_drained(timeout=900)
except sk.StatekitError as exc:
    seen["query_failed"] = str(exc)[:4000]
seen |= {"last_batch": query.checkpoint.last_batch, "driver_sees": sorted(
    str(p.relative_to(checkpoint)) for p in Path(checkpoint, "state").rglob("*")
    if p.is_file() and not p.name.startswith("."))}
try:
    query.snapshot()
except sk.StatekitError as exc:
    seen["snapshot"] = [type(exc).__name__, str(exc)]
query.close()
spark.stop()
Path(out).write_text(json.dumps(seen))
'''


def _can_unshare() -> bool:
    from statekit.spark.standalone import require_unshare

    try:
        require_unshare()
    except Exception:
        return False
    return True


@pytest.fixture(scope="module")
def unshared_disk(tmp_path_factory) -> Path | None:
    """A folder each worker sees as a disk of its own (None: mount namespaces not permitted)."""
    return tmp_path_factory.mktemp("workers-own-disk") if _can_unshare() else None


@pytest.fixture(scope="module")
def cluster(unshared_disk):
    with local_cluster(workers=2, cores=1, memory="1g", timeout=900,
                       unshared=[unshared_disk] if unshared_disk else ()) as running:
        yield running


@pytest.fixture(scope="module")
def on_cluster(cluster, broker, games, tmp_path_factory):
    """The leaderboard query run on the cluster by a child process: (run.json, its dir)."""
    out = tmp_path_factory.mktemp("on-cluster")
    script = out / "driver.py"
    script.write_text(DRIVER)
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, str(script), cluster.master_url, cluster.web_url,
         broker.bootstrap_servers, games, str(out), json.dumps(cluster.session_conf())],
        capture_output=True, text=True, timeout=2400)
    assert done.returncode == 0, done.stderr[-4000:]
    run = json.loads((out / "run.json").read_text())
    run["seconds"] = time.monotonic() - started
    return run, out


def test_two_workers_with_one_core_each_register(cluster):
    assert cluster.master_url.startswith("spark://127.0.0.1:")
    workers = cluster.alive_workers()
    assert len(workers) == 2
    assert [w["cores"] for w in workers] == [1, 1]
    assert all(w["host"] == "127.0.0.1" for w in workers)


def test_the_query_runs_in_the_clusters_executors(cluster, on_cluster):
    run, _ = on_cluster
    assert run["master"] == cluster.master_url
    app = [a for a in run["apps"] if a["name"] == "statekit-on-cluster"]
    assert len(app) == 1 and app[0]["cores"] == 2  # both workers' cores, as executors
    work = str(cluster.directory / "work")
    for pid, cwd in run["python_workers"]:  # Python workers run under the workers' executors
        assert cwd.startswith(work) and pid != run["driver_pid"]


def test_snapshot_changes_and_metadata_equal_the_local_run(logged, on_cluster):
    local, _ = logged
    run, out = on_cluster
    assert run["last_batch"] == local.last_batch
    assert_same_rows(pd.read_pickle(out / "snapshot.pkl"), local.snapshot(), KEYS)
    remote_changes = pd.read_pickle(out / "changes.pkl")
    local_changes = local.changes(from_batch=0)
    order = ["batch", *KEYS, "change"]
    columns = [c for c in local_changes.columns if c in remote_changes.columns]
    pd.testing.assert_frame_equal(
        remote_changes[columns].sort_values(order, ignore_index=True),
        local_changes[columns].sort_values(order, ignore_index=True), check_dtype=False)
    metadata = pd.read_pickle(out / "metadata.pkl")
    assert list(metadata["partitions"]) == list(local.metadata()["partitions"]) == [3]


def test_the_clusters_changelog_restores_and_serves_the_local_store(logged, on_cluster, broker,
                                                                    tmp_path):
    local, local_log = logged
    run, _ = on_cluster
    log = read_changelog(broker.bootstrap_servers, run["changelog_topic"])
    assert len(log) == len(local_log)
    columns = ["partition", "batch", "tombstone", *KEYS]
    pd.testing.assert_frame_equal(
        log.records[columns].sort_values(columns, ignore_index=True),
        local_log.records[columns].sort_values(columns, ignore_index=True), check_dtype=False)
    with restore_stores(broker.bootstrap_servers, run["changelog_topic"], local.spec,
                        tmp_path / "stores", store_name="counts") as restored:
        assert_same_rows(restored.table(), local.snapshot(), KEYS)
    with serve(broker, run["changelog_topic"], instances=2, standbys=0,
               workdir=tmp_path / "serving") as serving:
        serving.wait_ready(timeout=180)
        served = serving.client().to_pandas(min_batch=run["last_batch"])
        assert_same_rows(served, local.snapshot(), KEYS)


def test_a_checkpoint_on_the_workers_own_disks_is_refused_with_what_to_share(
        cluster, unshared_disk, broker, games, tmp_path):
    if unshared_disk is None:
        pytest.skip("`unshare --mount` is not permitted here (needs root): no way to give "
                    "each worker a disk of its own")
    script, out = tmp_path / "driver.py", tmp_path / "seen.json"
    script.write_text(UNSHARED_DRIVER)
    done = subprocess.run(
        [sys.executable, str(script), cluster.master_url, broker.bootstrap_servers, games,
         str(unshared_disk / "ck"), str(out), json.dumps(cluster.session_conf())],
        capture_output=True, text=True, timeout=2400)
    assert done.returncode == 0, done.stderr[-4000:]
    seen = json.loads(out.read_text())
    if "query_failed" in seen:  # a task ran where its partition's files are not
        assert "CANNOT_READ_STREAMING_STATE_FILE" in seen["query_failed"]
    else:  # Spark keeps each partition's task on the executor holding its state store
        assert seen["last_batch"] >= 4
    # the driver sees the logs and Spark's _metadata, and not one state file
    assert seen["driver_sees"] and all("_metadata" in f for f in seen["driver_sees"])
    kind, message = seen["snapshot"]
    assert kind == "CheckpointNotShared"
    assert f"committed batches 0-{seen['last_batch']}" in message
    assert "mount at the same path" in message


def test_stopping_leaves_no_master_worker_or_executor_running(cluster, on_cluster):
    assert cluster.running_processes()  # master and workers, until now
    cluster.stop()
    assert cluster.running_processes() == []
    assert not [line for line in _processes() if cluster.master_url in line]


def _processes() -> list[str]:
    return [info.cmdline for info in process_table().values()]


CRASHING_PARENT = r'''
import json, sys, time
from statekit.spark.standalone import local_cluster
cluster = local_cluster(workers=1, cores=1, memory="512m", timeout=900)
print(json.dumps({"directory": str(cluster.directory), "pids": cluster.running_processes()}),
      flush=True)
time.sleep(600)
'''


def test_a_parent_killed_with_sigkill_leaves_no_jvm_behind(tmp_path):
    parent = subprocess.Popen([sys.executable, "-c", CRASHING_PARENT], stdout=subprocess.PIPE,
                              text=True)
    try:
        started = json.loads(parent.stdout.readline())
    finally:
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
    shutil.rmtree(started["directory"], ignore_errors=True)  # what stop() would have deleted
    assert len(started["pids"]) >= 2  # a master and a worker JVM
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and _alive(started["pids"]):
        time.sleep(0.5)
    assert _alive(started["pids"]) == []


def _alive(pids: list[int]) -> list[int]:
    return [pid for pid in pids if is_alive(pid)]


@pytest.mark.parametrize("kwargs, named", [
    ({"workers": 0}, "number of workers"), ({"cores": "two"}, "cores per worker"),
    ({"memory": "lots"}, "worker memory"), ({"executor_memory": 512}, "executor memory"),
    ({"unshared": ["data/ck"]}, "unshared folder: 'data/ck'; accepted: an absolute path")])
def test_bad_cluster_sizes_are_named(kwargs, named):
    with pytest.raises(BadArgument, match=named):
        LocalCluster(**kwargs)
