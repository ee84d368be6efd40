"""Helpers shared by the benchmarks: timing, the Spark session, results and tables."""

from __future__ import annotations

import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.results import Figure, Run
from statekit.processes import descendants, process_table


def session(shuffle_partitions: int = 4, conf: dict[str, str] | None = None):
    """statekit's Spark session on ``local[2]`` with few shuffle partitions (``conf``: more
    settings, e.g. a larger driver heap)."""
    from statekit import spark_session

    return spark_session("local[2]", app_name="statekit-bench",
                         shuffle_partitions=shuffle_partitions, conf=conf)


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """(seconds, result) of one call."""
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def machine() -> dict:
    """What the figures were measured on."""
    import pyspark

    return {"cpus": os.cpu_count(), "python": platform.python_version(),
            "pyspark": pyspark.__version__, "platform": platform.platform()}


def embedded_kafka() -> str:
    """What a benchmark that starts ``EmbeddedBroker()`` measured against (its results and
    ``bench/README.md`` say it: figures measured before 2026-12-04 used Tansu)."""
    from statekit.kafka.jars import KAFKA_VERSION

    return f"Apache Kafka {KAFKA_VERSION}, embedded (one KRaft node)"


def write_result(run: Run, figures: list[Figure], details: dict, *,
                 broker: str | None = None) -> Path:
    """Write ``figures`` (and ``details``: settings, every repetition, the machine, the
    ``broker`` the run used, if any) to ``bench/results/<run.bench>.json`` through
    ``bench.results``."""
    extra = {} if broker is None else {"broker": broker}
    return run.write(figures, {"machine": machine(), **extra, **details})


def print_table(title: str, rows: list[tuple[str, str]]) -> None:
    """A two-column table under a title."""
    width = max(len(label) for label, _ in rows)
    print(f"\n== {title}")
    for label, value in rows:
        print(f"  {label:<{width}}  {value}")


def verdict(ratio: float, target: str, ok: bool) -> str:
    return f"{ratio:.2f}  (target {target}: {'met' if ok else 'NOT met'})"


def _process_kind(cmdline: str) -> str:
    """What a process of this benchmark is, from its command line."""
    if not cmdline.strip():
        return "exited"
    if "kafka.Kafka" in cmdline.split() or "tansu" in cmdline:  # Apache Kafka, or Tansu
        return "broker"
    if "java" in os.path.basename(cmdline.split()[0]):
        return "jvm"
    if "python_streaming_source_runner" in cmdline:
        return "py_source_runner"
    if "pyspark.daemon" in cmdline or "pyspark.worker" in cmdline:
        return "py_workers"
    if "pyspark.sql.worker" in cmdline:
        return "py_planning"
    return "other"


def cpu_snapshot() -> dict[int, tuple[str, float]]:
    """pid → (kind, CPU seconds incl. reaped children) of this process and its descendants.

    Linux only (``statekit.processes.process_table`` reads /proc); elsewhere an empty dict.
    A process's reaped children count in its own figure, so an exited worker's CPU lands on
    whoever started it.
    """
    table = process_table()
    me = os.getpid()
    return {pid: ("driver" if pid == me else _process_kind(table[pid].cmdline),
                  table[pid].cpu_s)
            for pid in [me, *descendants(me, table)] if pid in table}


def cpu_by_kind(before: dict, after: dict) -> dict[str, float]:
    """CPU seconds spent between two snapshots, summed by process kind."""
    spent: dict[str, float] = {}
    for pid, (kind, cpu) in after.items():
        spent[kind] = spent.get(kind, 0.0) + cpu - before.get(pid, (kind, 0.0))[1]
    return {k: round(v, 3) for k, v in sorted(spent.items()) if k != "exited"}
