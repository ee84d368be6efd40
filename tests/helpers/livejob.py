"""A person's own PySpark job, attached and shipping its changelogs, in a process of its own:
for tests that kill it with kill -9 mid-shipping and run it again.

``python livejob.py CONFIG_JSON`` starts the job, attaches with ``kafka=`` (a changelog per
part), says ``attached`` and runs until killed; the test runs it again on the same
checkpoint with ``start_job``. The job: JSON files → dropDuplicates(event_id) →
groupBy(player, level).agg(count, sum), update mode, the noop sink.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

SCHEMA = "event_id STRING, player STRING, level INT, score INT, ts TIMESTAMP"


def event(n: int) -> dict:
    """Event ``n``: a resent id carries the same event (which copy dropDuplicates keeps must
    not matter: the file source's order of files written in the same instant is not fixed)."""
    return {"event_id": f"e{n}", "player": f"p{n % 7}", "level": n % 2, "score": n % 100,
            "ts": "2026-01-05T10:00:00"}


def add_files(source: Path, files: int, rows: int = 20, first: int = 0) -> list[dict]:
    """``files`` event files numbered from ``first``, half of each file's ids new and half
    resent; returns the events in file order."""
    written = []
    for i in range(first, first + files):
        events = [event(i * rows // 2 + k) for k in range(rows)]
        tmp = source / f".f{i}.tmp"
        tmp.write_text("".join(json.dumps(e) + "\n" for e in events))
        tmp.rename(source / f"f{i:03d}.json")
        written += events
    return written


def start(config: dict) -> subprocess.Popen:
    """Run the job in a child process (it dies with this one)."""
    from statekit.processes import spawn

    return spawn([sys.executable, __file__, json.dumps(config)], stdout=subprocess.PIPE,
                 stderr=subprocess.STDOUT, text=True, start_new_session=True)


def kill_9(worker: subprocess.Popen, timeout: float = 60.0) -> None:
    """kill -9 the job's whole process group (its Python, its JVM, Spark's Python workers),
    as a crashed machine loses them, and wait until none is left: a JVM outliving its
    Python would go on writing the checkpoint the rerun takes over."""
    os.killpg(worker.pid, signal.SIGKILL)
    worker.wait(timeout)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(worker.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    raise AssertionError(f"the job's processes (group {worker.pid}) outlived kill -9 by "
                         f"{timeout:.0f} s")


def start_job(spark, config: dict):
    """The job, started on ``spark``; returns its StreamingQuery."""
    from pyspark.sql import functions as F

    return (spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1)
            .json(config["source"]).dropDuplicates(["event_id"]).groupBy("player", "level")
            .agg(F.count("*").alias("n"), F.sum("score").alias("points"))
            .writeStream.format("noop").outputMode("update")
            .option("checkpointLocation", config["checkpoint"]).queryName("livejob")
            .trigger(processingTime="200 milliseconds").start())


def _main(config: dict) -> None:
    import statekit as sk
    from statekit.changelog import naming
    from statekit.spark.session import spark_session

    # as in the suite's own process (tests/conftest.py): the topics keep every record until a
    # test lets the broker's log cleaner go, so that they can be compared with the change feed
    naming.QUICK_CLEANING.update(naming.HOLD_COMPACTION)

    spark = spark_session("local[2]", app_name="livejob", shuffle_partitions=3)
    query = start_job(spark, config)
    sk.attach(query, kafka=config["bootstrap_servers"], ledger_dir=config["ledgers"])
    print("attached", flush=True)
    while True:
        time.sleep(1)


if __name__ == "__main__":
    _main(json.loads(sys.argv[1]))
