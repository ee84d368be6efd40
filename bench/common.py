"""Helpers shared by the benchmarks: timing, the Spark session, results and tables."""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def session(shuffle_partitions: int = 4):
    """statekit's Spark session on ``local[2]`` with few shuffle partitions."""
    from statekit import spark_session

    return spark_session("local[2]", app_name="statekit-bench",
                         shuffle_partitions=shuffle_partitions)


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


def write_result(name: str, figures: dict) -> Path:
    """Write ``figures`` (plus machine and time) to ``bench/results/<name>.json``."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    payload = {"benchmark": name, "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
               "machine": machine(), **figures}
    path.write_text(json.dumps(payload, indent=2, default=str) + "\n")
    return path


def print_table(title: str, rows: list[tuple[str, str]]) -> None:
    """A two-column table under a title."""
    width = max(len(label) for label, _ in rows)
    print(f"\n== {title}")
    for label, value in rows:
        print(f"  {label:<{width}}  {value}")


def verdict(ratio: float, target: str, ok: bool) -> str:
    return f"{ratio:.2f}  (target {target}: {'met' if ok else 'NOT met'})"
