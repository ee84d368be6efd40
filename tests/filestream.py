"""Real checkpoints with Spark state snapshots, for tests: JSON event files and snapshot settings.

Spark keeps the maintenance interval of the first query that started its maintenance task;
stopping the task makes the next query start it again with the settings of now (local mode).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

SNAPSHOT_CONF = {"spark.sql.streaming.stateStore.minDeltasForSnapshot": "2",
                 "spark.sql.streaming.stateStore.maintenanceInterval": "1s"}


def restart_maintenance(spark) -> None:
    """Stop Spark's state store maintenance task so the next query starts it afresh."""
    with contextlib.suppress(Exception):
        jvm = spark.sparkContext._jvm
        module = jvm.java.lang.Class.forName(
            "org.apache.spark.sql.execution.streaming.state.StateStore$")
        module.getField("MODULE$").get(None).stopMaintenanceTask()


@contextlib.contextmanager
def frequent_snapshots(spark) -> Iterator[None]:
    """A snapshot every 2 versions, maintenance every second; the old settings after."""
    old = {key: spark.conf.get(key, None) for key in SNAPSHOT_CONF}
    for key, value in SNAPSHOT_CONF.items():
        spark.conf.set(key, value)
    restart_maintenance(spark)
    try:
        yield
    finally:
        for key, value in old.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)
        restart_maintenance(spark)


def add_events_file(source: Path, i: int, players: int, rows: int) -> None:
    """File ``f<i>.json`` of ``rows`` events in minute ``i`` (written whole, then renamed)."""
    events = [{"player": f"p{j % players}", "score": j, "ts": f"2026-01-05T10:{i:02d}:{j:02d}"}
              for j in range(rows)]
    tmp = source / f".f{i}.tmp"
    tmp.write_text("\n".join(json.dumps(e) for e in events))
    tmp.rename(source / f"f{i:02d}.json")
