"""A fresh notebook's first state rows: the README example against a bare PySpark process.

Each run is a new Python process. The **example** child runs the README's "In a notebook"
code *as written* (its statements are read from ``README.md`` and executed one by one, up
to the first ``query.snapshot()``: broker, 5,000 game events, ``spark_session()``,
``replay``, ``start_query``, ``wait_until_drained()``, ``snapshot()``) and times each
statement from the interpreter's start; the figure is interpreter start → the first
non-empty snapshot. The **floor** child is a bare PySpark process: a ``local[2]`` session
and one small aggregation (``spark.range(1000)`` grouped by ``id % 10``, counted, collected),
interpreter start → its rows. Ratio = example / floor, both medians of the same run; the
variants alternate in rounds so a busy minute of the machine falls on all of them.

The example's variants switch one of ``spark_session``'s start-up measures off (issue 39
item 5: keep those whose gain is larger than their run-to-run spread): ``no_archive``
(``class_archive=False``), ``no_early_workers``,
``zip`` (``cached_worker_imports=False``), ``full_jit`` (``jit="full"``); and
``ship_after_commit`` switches the changelog writer's early take-over and wake-up off
(``WRITER_OFF``).

    python -m bench.coldstart --repeats 5
    python -m bench.coldstart --repeats 3 --variants example,floor
"""

from __future__ import annotations

import ast
import functools
import json
import os
import re
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

from bench.common import cpu_by_kind, cpu_snapshot, median, print_table, write_result
from bench.results import Figure, Run

REPO = Path(__file__).resolve().parent.parent
#: example variants: spark_session's keywords (the README's call plus these)
EXAMPLE_VARIANTS: dict[str, dict] = {
    "example": {}, "no_archive": {"class_archive": False},
    "no_early_workers": {"early_workers": False},
    "zip": {"cached_worker_imports": False}, "full_jit": {"jit": "full"},
    "ship_after_commit": {}}
#: example variants that switch a measure of the changelog writer off: ``ship_after_commit``,
#: the writer as before issue 39 item 4 (it takes the topic over at the first commit, not
#: beside the first batch, and finds a commit at its next look, not when the query's progress
#: report wakes it: ``ChangelogWriter.prepare`` and ``wake`` do nothing)
WRITER_OFF = {"ship_after_commit"}
FLOOR = "floor"
VARIANTS = (*EXAMPLE_VARIANTS, FLOOR)
TARGET_RATIO = 0.6
FLOOR_CODE = """\
from pyspark.sql import SparkSession, functions as F
spark = SparkSession.builder.master("local[2]").getOrCreate()
rows = spark.range(1000).groupBy((F.col("id") % 10).alias("k")).count().collect()
"""


def readme_example(readme: Path = REPO / "README.md") -> list[str]:
    """The README's "In a notebook" statements up to and including the first
    ``query.snapshot()``, each as source text.

    Example:
        >>> statements = readme_example()
        >>> statements[0], statements[-1]
        ('import statekit as sk', 'query.snapshot()')
    """
    text = readme.read_text()
    match = re.search(r"^## In a notebook\n+```python\n(.*?)^```", text, re.S | re.M)
    if match is None:
        raise ValueError(f"{readme}: no ```python block under '## In a notebook'")
    out = []
    for node in ast.parse(match.group(1)).body:
        out.append(ast.unparse(node))
        if out[-1] == "query.snapshot()":
            return out
    raise ValueError(f"{readme}: its 'In a notebook' example never calls query.snapshot()")


# --- the children: one fresh process each -------------------------------------------------
def example_child(variant: str, born: float) -> dict:
    """Run the README example statement by statement; seconds from ``born`` after each."""
    marks: list[tuple[str, float]] = [("interpreter", time.time() - born)]
    namespace: dict = {}
    rows = None
    if variant in WRITER_OFF:
        from statekit.changelog.writer import ChangelogWriter

        ChangelogWriter.prepare = lambda self: False
        ChangelogWriter.wake = lambda self: None
    for statement in readme_example():
        if statement == "query.snapshot()":
            rows = eval(statement, namespace)  # noqa: S307 - the README's own code
        else:
            exec(statement, namespace)  # noqa: S102
        if statement == "import statekit as sk" and EXAMPLE_VARIANTS[variant]:
            sk = namespace["sk"]
            sk.spark_session = functools.partial(sk.spark_session, **EXAMPLE_VARIANTS[variant])
        marks.append((statement.split("(")[0].split(" = ")[-1][:40], time.time() - born))
    if rows is None or rows.empty:
        raise RuntimeError(f"the README example's snapshot() is empty: {rows!r}")
    query = namespace["query"]
    first = next(p for p in query.query.recentProgress if p.numInputRows > 0)
    drained = dict(marks)["query.wait_until_drained"]
    batches = [_batch_times(p, born) for p in query.query.recentProgress]
    return {"variant": variant, "first_rows_s": marks[-1][1], "marks": marks,
            "rows": len(rows), "first_batch_ms": dict(first.durationMs),
            "cpu_s": cpu_by_kind({}, cpu_snapshot()),
            "batch_times": batches,
            # the last batch done before wait_until_drained() returned → its return: the wait
            # for the changelog of the batches to be shipped
            "shipping_wait_s": round(drained - max(
                [b["end_s"] for b in batches if b["end_s"] <= drained], default=drained), 3),
            "batches": query.last_batch + 1, "archive_mapped": _archive_mapped(),
            # the writer's rounds: first and last batch, records, seconds each
            "changelog_rounds": [list(r) for r in getattr(query.changelog, "rounds", ())]}


def _batch_times(progress, born: float) -> dict:
    """A progress report's batch: its start and end in seconds from ``born``, its rows."""
    start = datetime.fromisoformat(progress.timestamp.replace("Z", "+00:00")).timestamp()
    took = progress.durationMs["triggerExecution"] / 1000
    return {"batch": progress.batchId, "rows": progress.numInputRows,
            "start_s": round(start - born, 3), "end_s": round(start + took - born, 3)}


def floor_child(born: float) -> dict:
    """A bare PySpark process: ``local[2]``, one small aggregation."""
    marks: list[tuple[str, float]] = [("interpreter", time.time() - born)]
    namespace: dict = {}
    for statement in ast.parse(FLOOR_CODE).body:
        exec(ast.unparse(statement), namespace)  # noqa: S102
        marks.append((ast.unparse(statement)[:40], time.time() - born))
    assert len(namespace["rows"]) == 10, namespace["rows"]
    return {"variant": FLOOR, "first_rows_s": marks[-1][1], "marks": marks,
            "rows": len(namespace["rows"]), "cpu_s": cpu_by_kind({}, cpu_snapshot())}


def _archive_mapped() -> bool:
    from pyspark import SparkContext

    from statekit.spark.class_archive import ClassArchive
    from statekit.spark.worker_home import worker_spark_home

    proc = getattr(SparkContext._gateway, "proc", None)
    return proc is not None and ClassArchive.for_this_machine(worker_spark_home()).mapped_by(
        proc.pid)


def child(variant: str, born: float) -> dict:
    return floor_child(born) if variant == FLOOR else example_child(variant, born)


# --- the parent -----------------------------------------------------------------------------
def _spawn(variant: str) -> dict:
    born = time.time()
    out = subprocess.run([sys.executable, "-m", "bench.coldstart", "--first-rows-child", variant,
                          "--born", repr(born)], capture_output=True, text=True, cwd=REPO,
                         env={**os.environ, "PYTHONUNBUFFERED": "1"}, timeout=600)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
    if out.returncode != 0 or not lines:
        raise RuntimeError(f"first-rows child ({variant}) failed:\n{out.stderr[-3000:]}")
    result = json.loads(lines[-1][len("RESULT "):])
    result["load"] = [round(x, 2) for x in os.getloadavg()]
    return result


def run(repeats: int = 5, variants: list[str] | None = None) -> dict:
    started = Run("coldstart_first_rows")
    variants = variants or list(VARIANTS)
    runs: dict[str, list[dict]] = {v: [] for v in variants}
    for i in range(repeats):
        order = variants if i % 2 == 0 else list(reversed(variants))
        for variant in order:
            runs[variant].append(_spawn(variant))
            r = runs[variant][-1]
            print(f"round {i + 1} {variant}: {r['first_rows_s']:.2f} s (load {r['load'][0]})",
                  flush=True)
    summary = {v: summarize(items) for v, items in runs.items()}
    result = {"repeats": repeats, "summary": summary, "runs": runs}
    write_result(started, figures_of(summary), result)
    report(summary)
    return result


def summarize(items: list[dict]) -> dict:
    """Median, spread (max − min) and each step's median seconds of one variant's runs.

    Example:
        >>> s = summarize([{"first_rows_s": 6.0, "marks": [["a", 1.0], ["b", 6.0]]},
        ...                {"first_rows_s": 8.0, "marks": [["a", 2.0], ["b", 8.0]]}])
        >>> s["median_s"], s["spread_s"], s["steps"]
        (7.0, 2.0, [['a', 1.5], ['b', 5.5]])
    """
    values = [r["first_rows_s"] for r in items]
    steps = []
    for j, (name, _) in enumerate(items[0]["marks"]):
        step = [r["marks"][j][1] - (r["marks"][j - 1][1] if j else 0.0) for r in items]
        steps.append([name, round(median(step), 3)])
    waits = [r["shipping_wait_s"] for r in items if "shipping_wait_s" in r]
    return {"median_s": median(values), "spread_s": max(values) - min(values),
            "shipping_wait_s": median(waits) if waits else None,
            "shipping_wait_spread_s": max(waits) - min(waits) if waits else None,
            "stdev_s": statistics.stdev(values) if len(values) > 1 else 0.0, "steps": steps}


def figures_of(summary: dict) -> list[Figure]:
    """Per variant: interpreter start → first rows (median), against the floor."""
    out = []
    if FLOOR in summary:
        out.append(Figure("floor: bare PySpark, local[2] + one aggregation",
                          summary[FLOOR]["median_s"], "s"))
    base = "floor: bare PySpark, local[2] + one aggregation" if FLOOR in summary else None
    for variant, s in summary.items():
        if variant == FLOOR:
            continue
        ratio = s["median_s"] / summary[FLOOR]["median_s"] if base else None
        out.append(Figure(f"{variant}: README example → first non-empty snapshot",
                          s["median_s"], "s", baseline=base, ratio=ratio,
                          target=f"ratio <= {TARGET_RATIO}" if variant == "example" and base
                          else None))
        out.append(Figure(f"{variant}: spread (max − min)", s["spread_s"], "s"))
        if s.get("shipping_wait_s") is not None:
            out.append(Figure(f"{variant}: last batch done → drained (the changelog shipped)",
                              s["shipping_wait_s"], "s"))
            out.append(Figure(f"{variant}: that wait's spread (max − min)",
                              s["shipping_wait_spread_s"], "s"))
    if "example" in summary:
        for name, seconds in summary["example"]["steps"]:
            out.append(Figure(f"example step: {name}", seconds, "s"))
    return out


def report(summary: dict) -> None:
    rows = []
    floor = summary.get(FLOOR, {}).get("median_s")
    for variant, s in summary.items():
        ratio = f", {s['median_s'] / floor:.2f}x the floor" if floor else ""
        wait = (f"; last batch → drained {s['shipping_wait_s']:.2f} s"
                if s.get("shipping_wait_s") is not None else "")
        rows.append((variant, f"{s['median_s']:.2f} s (spread {s['spread_s']:.2f} s){ratio}"
                              f"{wait}"))
    print_table("first state rows of a fresh process (median)", rows)
    if "example" in summary:
        print_table("the example, per statement (median seconds)",
                    [(name, f"{sec:.2f}") for name, sec in summary["example"]["steps"]])
