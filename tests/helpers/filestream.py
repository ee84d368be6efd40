"""Real checkpoints with Spark state snapshots, for tests: JSON event files, built in a process of
their own.

Spark's state store maintenance (the background task that uploads snapshots) runs once per JVM,
with the interval of the first query that started it, so the test session's JVM cannot be switched
to frequent snapshots. A checkpoint that needs them is built by this module run as a script
(``python filestream.py CONFIG_JSON``) in a fresh Spark session that has ``SNAPSHOT_CONF`` from the
start; the tests then read that checkpoint, or restart its query, in the test session.

The child has a deadline of its own (it dumps its threads' stacks and exits when it passes it) and
the parent kills the child's process group a little later still, so a build can fail but not hang.
"""

from __future__ import annotations

import faulthandler
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

SNAPSHOT_CONF = {"spark.sql.streaming.stateStore.minDeltasForSnapshot": "2",
                 "spark.sql.streaming.stateStore.maintenanceInterval": "1s"}
SCHEMA = "player string, score long, ts timestamp"
#: seconds a build may take; the parent gives the child this plus ``_GRACE`` before killing it
BUILD_TIMEOUT = 300.0
_GRACE = 30.0


def add_events_file(source: Path, i: int, players: int, rows: int) -> None:
    """File ``f<i>.json`` of ``rows`` events in minute ``i`` (written whole, then renamed)."""
    events = [{"player": f"p{j % players}", "score": j, "ts": f"2026-01-05T10:{i:02d}:{j:02d}"}
              for j in range(rows)]
    tmp = source / f".f{i}.tmp"
    tmp.write_text("\n".join(json.dumps(e) for e in events))
    tmp.rename(source / f"f{i:02d}.json")


def snapshot_versions(checkpoint: Path) -> dict[int, list[int]]:
    """Versions of the uploaded snapshots (``<version>.zip``) of operator 0, by partition."""
    operator = Path(checkpoint) / "state" / "0"
    if not operator.is_dir():
        return {}
    return {int(p.name): sorted(int(f.stem) for f in p.glob("*.zip") if f.stem.isdigit())
            for p in operator.iterdir() if p.name.isdigit()}


def start_windowed_count(spark, source: Path, checkpoint: Path, name: str):
    """statekit's windowed count (2-minute windows per player) over the event files."""
    from statekit.model.query_spec import tumbling
    from statekit.query.start import start_query

    events = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(str(source))
    return start_query(events, spark=spark, keys=["player"], window=tumbling("2 minutes"),
                       watermark="1 minute", checkpoint=str(checkpoint), name=name,
                       trigger="200 milliseconds", changelog=False)


#: what the child builds: these (required) and ``BUILD_DEFAULTS``' (optional) settings
BUILD_REQUIRED = ("query", "files", "players", "rows")
BUILD_DEFAULTS = {"name": "snapshots", "shuffle_partitions": 3, "snapshot_before_last": 0}


def build_snapshot_checkpoint(base: Path, *, timeout: float = BUILD_TIMEOUT, **build) -> dict:
    """Run a windowed count over ``files`` event files in a Spark session of a child process.

    ``query``: ``"plain"`` (Spark's own groupBy/count into the noop sink) or ``"statekit"``
    (``start_windowed_count``). The child waits (up to 25 s) until every state partition has
    an uploaded snapshot of a version at least ``snapshot_before_last`` below the last one,
    stops its query and its session. Returns the child's report: ``checkpoint``, ``source``,
    ``last_batch``, ``snapshots`` (versions by partition), ``pid``.
    """
    unknown = sorted(set(build) - {*BUILD_REQUIRED, *BUILD_DEFAULTS})
    missing = [k for k in BUILD_REQUIRED if k not in build]
    if unknown or missing:
        raise TypeError(f"build_snapshot_checkpoint: unknown {unknown}, missing {missing}; "
                        f"accepted: {[*BUILD_REQUIRED, *BUILD_DEFAULTS]}")
    base = Path(base)
    source, checkpoint = base / "in", base / "ck"
    source.mkdir(parents=True, exist_ok=True)
    report, output = base / "built.json", base / "builder.log"
    config = {**BUILD_DEFAULTS, **build, "source": str(source), "checkpoint": str(checkpoint),
              "report": str(report), "deadline": timeout}
    with open(output, "w") as out:
        child = subprocess.Popen([sys.executable, str(Path(__file__).resolve()),
                                  json.dumps(config)], stdin=subprocess.DEVNULL, stdout=out,
                                 stderr=subprocess.STDOUT, start_new_session=True)
        timed_out = False
        try:
            child.wait(timeout + _GRACE)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:   # timed out or interrupted: the child, its JVM and its Python workers go
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()
    if timed_out:
        raise AssertionError(f"building the checkpoint in {base} took over "
                             f"{timeout + _GRACE:.0f} s; the builder said:\n{_tail(output)}")
    if child.returncode != 0 or not report.exists():
        raise AssertionError(f"building the checkpoint in {base} failed (exit "
                             f"{child.returncode}); the builder said:\n{_tail(output)}")
    built = json.loads(report.read_text())
    built["snapshots"] = {int(p): v for p, v in built["snapshots"].items()}
    return built


def _tail(path: Path, lines: int = 80) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


# --- the child ---------------------------------------------------------------------------------
def _build(config: dict) -> None:
    # past the deadline: print every thread's stack and exit (the JVM follows its parent)
    faulthandler.dump_traceback_later(config["deadline"], exit=True)
    from pyspark.sql import functions as F

    from statekit.spark.session import spark_session
    from statekit.spark_state.state_reader import committed_batches

    source, checkpoint = Path(config["source"]), Path(config["checkpoint"])
    spark = spark_session("local[2]", app_name=f"snapshots-{config['name']}",
                          shuffle_partitions=config["shuffle_partitions"], conf=SNAPSHOT_CONF)
    if config["query"] == "plain":
        events = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1) \
            .json(str(source))
        counts = events.withWatermark("ts", "1 minute") \
            .groupBy(F.window("ts", "2 minutes"), "player").count()
        started = counts.writeStream.format("noop").outputMode("update") \
            .option("checkpointLocation", str(checkpoint)) \
            .trigger(processingTime="200 milliseconds").start()
        stream, drain = started, started.processAllAvailable
    else:
        statekit_query = start_windowed_count(spark, source, checkpoint, config["name"])
        stream, drain = statekit_query, statekit_query.wait_until_drained
    for i in range(config["files"]):
        add_events_file(source, i, players=config["players"], rows=config["rows"])
        drain()
    last_version = committed_batches(str(checkpoint))[-1] + 1
    wanted = last_version - config["snapshot_before_last"]
    deadline = time.monotonic() + 25
    while time.monotonic() < deadline:   # maintenance uploads the snapshots in the background
        zips = snapshot_versions(checkpoint)
        if zips and all(versions and versions[0] <= wanted for versions in zips.values()):
            break
        time.sleep(0.3)
    stream.stop()
    report = {"checkpoint": str(checkpoint), "source": str(source),
              "last_batch": committed_batches(str(checkpoint))[-1],
              "snapshots": snapshot_versions(checkpoint), "pid": os.getpid()}
    Path(config["report"]).write_text(json.dumps(report))
    spark.stop()
    faulthandler.cancel_dump_traceback_later()


if __name__ == "__main__":
    _build(json.loads(sys.argv[1]))
