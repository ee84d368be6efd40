"""statekit through Spark Connect: the query, its changelog and a snapshot over ``sc://``.

One Connect server for the module (``connect_server``: PySpark's own
``SparkConnectServer`` on ``local[2]``, a JVM of its own). PySpark runs a process either
as a classic or as a Connect client, and the test session holds a classic ``local[2]``
session, so a child process is the Connect client: it runs the leaderboard query (the
Kafka source registered as a Python data source from the client, the progress listener on
the client, the State Data Source read through the server) and writes what it saw to
files, which the tests compare with the ``local[2]`` run of the same query (``logged``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pandas as pd
import pytest
from helpers.plainrun import assert_same_rows

from statekit.errors import BadArgument, NotOnConnect
from statekit.spark.connect import NOT_ON_CONNECT, connect_server, connect_session, require_classic

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]

KEYS = ["window_start", "window_end", "player"]

CLIENT = r'''
import json, sys
from pathlib import Path

import statekit as sk
from statekit.datasets import GAME_EVENT_SCHEMA, GAME_SPEC
from statekit.spark.connect import connect_session, is_connect, require_classic
from statekit.errors import NotOnConnect

url, bootstrap, topic, out = sys.argv[1:5]
out = Path(out)
spark = connect_session(url)
query = sk.start_query(topic, GAME_SPEC, spark=spark, kafka=bootstrap,
                       event_schema=GAME_EVENT_SCHEMA, checkpoint=str(out / "checkpoint"),
                       name="board-over-connect", store_name="counts",
                       max_offsets_per_trigger=500, trigger="100 milliseconds",
                       # compared record for record with the local run's log
                       changelog_topic_config=sk.changelog.HOLD_COMPACTION)
query.wait_until_drained(timeout=1500)
query.snapshot().to_pickle(out / "snapshot.pkl")
query.changes(from_batch=0).to_pickle(out / "changes.pkl")
progress = query.progress()
try:
    require_classic(spark, "SparkSession.sparkContext")
    refused = None
except NotOnConnect as exc:
    refused = str(exc)
query.close()

# a plain PySpark job over Connect, attached: Spark does not tell a Connect client where its
# checkpoint is, so attach asks for it; given it, the state reads through the server
source = out / "own-in"
source.mkdir()
(source / "a.json").write_text("".join(json.dumps({"player": f"p{i % 3}", "score": i}) + "\n"
                                       for i in range(9)))
own = (spark.readStream.schema("player STRING, score INT").json(str(source))
       .groupBy("player").count().writeStream.format("noop").outputMode("update")
       .option("checkpointLocation", str(out / "own-ck")).queryName("own_over_connect")
       .trigger(processingTime="200 milliseconds").start())
own.processAllAvailable()
try:
    sk.attach(own, spark=spark)
    attach_refused = None
except sk.StatekitError as exc:
    attach_refused = str(exc)
live = sk.attach(own, spark=spark, checkpoint=str(out / "own-ck"))
own_snapshot = live.snapshot("0/default")
attached = {"refused": attach_refused, "parts": list(live.states()["part"]),
            "rows": sorted([p, int(n)] for p, n in zip(own_snapshot["player"],
                                                       own_snapshot["count"]))}
live.close()
own.stop()

(out / "run.json").write_text(json.dumps({
    "connect": is_connect(spark), "last_batch": query.last_batch,
    "changelog_topic": query.changelog_topic, "progress_batches": len(progress),
    "input_rows": int(progress["input_rows"].sum()), "refused": refused,
    "attached": attached}))
spark.stop()
'''


@pytest.fixture(scope="module")
def server():
    with connect_server("local[2]", conf={"spark.sql.shuffle.partitions": "3"},
                        timeout=900) as running:
        yield running
    assert running.pid is None


@pytest.fixture(scope="module")
def over_connect(server, broker, games, tmp_path_factory):
    out = tmp_path_factory.mktemp("over-connect")
    script = out / "client.py"
    script.write_text(CLIENT)
    started = time.monotonic()
    done = subprocess.run([sys.executable, str(script), server.url, broker.bootstrap_servers,
                           games, str(out)], capture_output=True, text=True, timeout=2400)
    assert done.returncode == 0, done.stderr[-4000:]
    run = json.loads((out / "run.json").read_text())
    run["seconds"] = time.monotonic() - started
    return run, out


def test_the_query_and_its_snapshot_over_connect_equal_the_local_run(logged, over_connect):
    local, local_log = logged
    run, out = over_connect
    assert run["connect"] is True
    assert run["last_batch"] == local.last_batch
    assert_same_rows(pd.read_pickle(out / "snapshot.pkl"), local.snapshot(), KEYS)
    changes, local_changes = pd.read_pickle(out / "changes.pkl"), local.changes(from_batch=0)
    order = ["batch", *KEYS, "change"]
    columns = [c for c in local_changes.columns if c in changes.columns]
    pd.testing.assert_frame_equal(changes[columns].sort_values(order, ignore_index=True),
                                  local_changes[columns].sort_values(order, ignore_index=True),
                                  check_dtype=False)
    # progress reached the client: a report for every batch (a later no-data batch that
    # evicts windows may add one), all 5,000 events in
    assert run["progress_batches"] >= run["last_batch"] + 1
    assert run["input_rows"] == int(local.progress()["input_rows"].sum())


def test_the_changelog_shipped_over_connect_equals_the_local_one(logged, over_connect, broker):
    from statekit.changelog.reader import read_changelog

    _, local_log = logged
    run, _ = over_connect
    log = read_changelog(broker.bootstrap_servers, run["changelog_topic"])
    columns = ["partition", "batch", "tombstone", *KEYS]
    pd.testing.assert_frame_equal(
        log.records[columns].sort_values(columns, ignore_index=True),
        local_log.records[columns].sort_values(columns, ignore_index=True), check_dtype=False)


def test_a_call_connect_does_not_allow_is_named_with_the_reason(over_connect):
    run, _ = over_connect
    assert run["refused"].startswith("SparkSession.sparkContext does not work through "
                                     "Spark Connect: a Connect client has no SparkContext")


def test_a_plain_job_over_connect_is_attached_given_its_checkpoint(over_connect):
    attached = over_connect[0]["attached"]
    assert "pass checkpoint=<the query's checkpointLocation option>" in attached["refused"]
    assert "Spark Connect" in attached["refused"]
    assert attached["parts"] == ["0/default"]
    assert attached["rows"] == [["p0", 3], ["p1", 3], ["p2", 3]]


NAMES_CLIENT = r'''
import json, sys
from pathlib import Path

from pyspark.sql import functions as F

import statekit as sk
from statekit.spark.connect import connect_session

url, out = sys.argv[1:3]
out = Path(out)
spark = connect_session(url)
(out / "in").mkdir()
(out / "in" / "a.json").write_text("".join(json.dumps({"player": f"p{i % 3}", "score": i}) + "\n"
                                           for i in range(9)))
own = (spark.readStream.schema("player STRING, score INT").json(str(out / "in"))
       .groupBy("player").agg(F.avg("score").alias("avg_score"), F.count("*").alias("n"))
       .writeStream.format("noop").outputMode("update")
       .option("checkpointLocation", str(out / "ck")).queryName("names_over_connect").start())
own.processAllAvailable()
live = sk.attach(own, spark=spark, checkpoint=str(out / "ck"))
snap = live.snapshot("0/default", sort=True)
spark_names = list(live.snapshot("0/default", names="spark").columns)
(out / "names.json").write_text(json.dumps({
    "columns": list(snap.columns), "spark": spark_names,
    "avg": dict(zip(snap["player"], snap["avg_score"], strict=True))}))
live.detach()
own.stop()
spark.stop()
'''


def test_an_attached_job_over_connect_carries_the_names_of_its_plan(server, tmp_path):
    """The Connect client prints the server's explain() as the classic one does: the plan's
    names are read over Connect too."""
    script = tmp_path / "client.py"
    script.write_text(NAMES_CLIENT)
    done = subprocess.run([sys.executable, str(script), server.url, str(tmp_path)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    got = json.loads((tmp_path / "names.json").read_text())
    assert got["columns"] == ["player", "avg_score", "avg_score_sum", "avg_score_count", "n",
                              "partition"]
    assert got["spark"] == ["player", "sum", "count", "value_count", "partition"]
    assert got["avg"] == {"p0": 3.0, "p1": 4.0, "p2": 5.0}   # (0+3+6)/3, (1+4+7)/3, ...


def test_a_process_with_a_classic_session_is_told_to_use_another(spark, server):
    with pytest.raises(NotOnConnect, match="a classic and a Connect session in one process"):
        connect_session(server.url)
    require_classic(spark, "SparkSession.sparkContext")  # classic: allowed
    assert set(NOT_ON_CONNECT) >= {"SparkSession.sparkContext"}


@pytest.mark.parametrize("url", ["localhost:15002", "http://localhost:15002", None])
def test_a_bad_connect_url_is_named(url):
    with pytest.raises(BadArgument, match="Spark Connect URL"):
        connect_session(url)


def test_the_server_is_stopped_and_gone(server):
    pid = server.pid
    server.stop()
    assert server.pid is None
    with pytest.raises(ProcessLookupError):
        import os

        os.kill(pid, 0)
