"""A person's own PySpark job, attached and shipping its changelogs, in a process of its own:
for tests that kill it with kill -9 mid-shipping and run it again.

``python livejob.py CONFIG_JSON``: ``mode`` ``run`` runs until killed; ``drain`` processes
every file, waits until each part's changelog holds the last batch, detaches and stops
(printing ``drained through batch N``). The job: JSON files → dropDuplicates(event_id) →
groupBy(player).agg(count, sum), update mode, the noop sink.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

SCHEMA = "event_id STRING, player STRING, score INT, ts TIMESTAMP"


def add_files(source: Path, files: int, rows: int = 20) -> None:
    """``files`` event files; ids repeat across files (duplicates the job drops)."""
    for i in range(files):
        events = [{"event_id": f"e{(i * rows // 2 + k) % 400}", "player": f"p{k % 7}",
                   "score": k, "ts": "2026-01-05T10:00:00"} for k in range(rows)]
        tmp = source / f".f{i}.tmp"
        tmp.write_text("".join(json.dumps(e) + "\n" for e in events))
        tmp.rename(source / f"f{i:03d}.json")


def start(config: dict) -> subprocess.Popen:
    """Run the job in a child process (it dies with this one)."""
    from statekit.processes import spawn

    return spawn([sys.executable, __file__, json.dumps(config)], stdout=subprocess.PIPE,
                 stderr=subprocess.STDOUT, text=True)


def start_job(spark, config: dict):
    """The job, started on ``spark``; returns its StreamingQuery."""
    return (spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1)
            .json(config["source"]).dropDuplicates(["event_id"]).groupBy("player")
            .agg({"score": "sum", "*": "count"})
            .writeStream.format("noop").outputMode("update")
            .option("checkpointLocation", config["checkpoint"]).queryName("livejob")
            .trigger(processingTime="200 milliseconds").start())


def drain(spark, config: dict) -> int:
    """Run the job again on its checkpoint, attached, until it has shipped every file."""
    import statekit as sk

    query = start_job(spark, config)
    try:
        live = sk.attach(query, kafka=config["bootstrap_servers"], ledger_dir=config["ledgers"])
        query.processAllAvailable()
        last = live.wait_shipped()
        live.detach()
    finally:
        query.stop()
    return last


def _main(config: dict) -> None:
    import statekit as sk
    from statekit.spark.session import spark_session

    spark = spark_session("local[2]", app_name="livejob", shuffle_partitions=3)
    if config["mode"] == "drain":
        print(f"drained through batch {drain(spark, config)}", flush=True)
        return
    query = start_job(spark, config)
    sk.attach(query, kafka=config["bootstrap_servers"], ledger_dir=config["ledgers"])
    print("attached", flush=True)
    while True:
        time.sleep(1)


if __name__ == "__main__":
    _main(json.loads(sys.argv[1]))
