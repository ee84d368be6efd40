"""statekit and Quix Streams side by side, fair both ways: same core budget, same clocks.

One embedded broker (in this process) and one topic of R JSON game events (as
``bench.throughput`` makes them: 1000 players, 1 ms apart, 4 partitions keyed by player).
The same query on both sides: a 1-minute tumbling window per player, ``count`` and
``sum(score)``, 10 s of grace (Quix) / watermark (statekit), each keeping its state in
RocksDB and shipping its changes to a changelog topic of its own.

Four configurations, each a FRESH child process (or two) per run:

- **statekit local[1]** and **statekit local[2]**: ``python -m bench.peer
  --statekit-worker`` on the project's interpreter, ``spark_session("local[N]")``, then
  ``start_query`` twice: *cold* (the process's first query) and *warm* (a second query on a
  fresh checkpoint and a fresh changelog topic), then ``restore_stores`` of the warm
  query's changelog into fresh stores.
- **Quix ×1** and **Quix ×2**: ``bench/peer_quix.py`` on its own interpreter
  (``--quix-python``, ``make peer-venv``): one process, or two processes in one consumer
  group (2 partitions each). After Quix ×1, a fresh Quix process restores that group's
  state from its changelog into an empty state directory.

Repetitions run in alternating order (A B C D, D C B A, A B C D, ...), with the load average
taken at the start and end of every run. Every side is measured the same way:

- *first window result*: seconds from the child's spawn to its first windowed output
  (statekit: the first batch's progress event, posted once its rows are in the memory sink;
  Quix: its first output). Quix's consumer-group join (``app.run`` to its partitions'
  ``on_assign``) is reported apart; statekit's source assigns partitions and joins no group.
- *steady records/s*: from the moment 10 % of the records are processed to the moment the
  last record's state change is in the changelog (statekit: the changelog writer has
  shipped the batch holding the last record, ``ChangelogWriter.wait_shipped``; Quix: the end
  of the first checkpoint commit after its last record, which flushes the changelog
  producer and commits the offsets).
- *records per CPU-second*: the CPU of each child's whole process tree (statekit: the Python
  driver, the JVM and Spark's Python workers, from /proc; Quix: its process(es), which
  start no processes, from ``os.times``, each checked for child processes at its end) at
  those two marks. The broker's CPU over the same window is reported apart.
- *restore*: Quix's ``RecoveryManager.do_recovery`` (first start to last end) against
  ``restore_stores`` (call to return), each into empty state.
- *per-window results*: every (player, window start) [count, sum] of every statekit query
  against every Quix configuration of the same repetition; they must agree for every
  window that neither side dropped records of as late (``WindowsDisagree`` otherwise).

The figures are medians over the repetitions (min–max in the details and the table);
ratios are statekit / Quix at the same core budget (local[1] against one Quix process,
local[2] against two).

    make peer-venv                      # once: .venv-peer with quixstreams
    python -m bench.peer --records 1000000 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from bench.common import (
    cpu_by_kind,
    cpu_snapshot,
    embedded_kafka,
    median,
    print_table,
    write_result,
)
from bench.results import REPO, Figure, Run, load_average
from bench.throughput import EVENT_SCHEMA, PLAYERS, produce
from statekit.processes import process_info

WINDOW, WATERMARK = "1 minute", "10 seconds"
AGGREGATES = ["count", "sum(score)"]
TOPIC = "bench-peer-games"
PARTITIONS = 4
TRIGGER = "100 ms"
#: Quix reads ``retention.ms`` / ``retention.bytes`` of its input topic to configure its
#: changelog topics; the embedded broker reports only explicitly set configs.
TOPIC_CONFIG = {"retention.ms": str(7 * 24 * 3600 * 1000), "retention.bytes": "-1"}
QUIX_SCRIPT = Path(__file__).resolve().parent / "peer_quix.py"
DEFAULT_QUIX_PYTHON = REPO / ".venv-peer" / "bin" / "python"
CHILD_TIMEOUT_S = 3600.0
STEADY_FROM = 0.1  # the steady window starts once this share of the records is processed
SAMPLES = 1000     # Quix's (time, records, CPU) samples over a run


@dataclass(frozen=True)
class Config:
    """One configuration: a side and its core budget."""

    side: str   # "statekit" or "quix"
    cores: int  # statekit: local[cores]; Quix: processes in the consumer group

    @property
    def label(self) -> str:
        return f"statekit local[{self.cores}]" if self.side == "statekit" else \
            f"Quix ×{self.cores}"


CONFIGS = (Config("statekit", 1), Config("statekit", 2), Config("quix", 1), Config("quix", 2))


class WindowsDisagree(AssertionError):
    """statekit and Quix computed different results for a window neither dropped as late."""


# --- the Quix interpreter -----------------------------------------------------------------
def quix_python(path: str | os.PathLike | None = None) -> Path:
    """The interpreter that runs ``bench/peer_quix.py``; an error naming ``make peer-venv``
    when it is not there."""
    python = Path(path) if path else DEFAULT_QUIX_PYTHON
    if not (python.is_file() and os.access(python, os.X_OK)):
        raise FileNotFoundError(
            f"--quix-python {str(python)!r}: no such interpreter. Quix Streams runs under an "
            f"interpreter of its own (it pins confluent-kafka<2.13 and pydantic<2.14): run "
            f"`make peer-venv` to build {DEFAULT_QUIX_PYTHON.relative_to(REPO)} with "
            f"quixstreams, or pass --quix-python PATH to a Python with quixstreams installed")
    return python


def quix_installed(path: str | os.PathLike | None = None) -> bool:
    """Whether the Quix interpreter (default ``.venv-peer/bin/python``) is there."""
    try:
        quix_python(path)
    except FileNotFoundError:
        return False
    return True


# --- child processes ------------------------------------------------------------------------
def _spawn(command: list[str]) -> subprocess.Popen:
    # a session of its own: on a timeout the child and what it started (the JVM) are killed
    return subprocess.Popen(command, cwd=REPO, start_new_session=True)


def _quix_command(python: Path, spec: Path) -> list[str]:
    # -I: isolated, so neither PYTHONPATH nor bench/ (the script's folder, whose inspect.py
    # would shadow the standard library's) is on the Quix interpreter's path
    return [str(python), "-I", str(QUIX_SCRIPT), str(spec)]


def _wait(procs: list[subprocess.Popen], what: str) -> None:
    deadline = time.monotonic() + CHILD_TIMEOUT_S
    for proc in procs:
        try:
            proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for p in procs:
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGKILL)
            raise RuntimeError(f"{what}: still running after {CHILD_TIMEOUT_S:.0f} s; "
                               f"killed") from None
    failed = [p.returncode for p in procs if p.returncode != 0]
    if failed:
        raise RuntimeError(f"{what}: a child exited with {failed[0]}; its output is above")


# --- the broker's CPU, sampled in this process ------------------------------------------
def _process_cpu(pid: int) -> float | None:
    info = process_info(pid)
    return None if info is None else info.cpu_s


class BrokerCpu:
    """Samples the embedded broker's CPU seconds every ``interval`` seconds (a thread);
    ``between(t0, t1)`` interpolates its CPU over a window of ``time.monotonic()`` marks."""

    def __init__(self, interval: float = 0.25):
        self.pids = [pid for pid, (kind, _) in cpu_snapshot().items() if kind == "broker"]
        self.samples: list[tuple[float, float]] = []
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="broker-cpu", daemon=True)

    def _sample(self) -> None:
        cpus = [_process_cpu(pid) for pid in self.pids]
        self.samples.append((time.monotonic(), sum(c for c in cpus if c is not None)))

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def __enter__(self) -> BrokerCpu:
        if self.pids:
            self._sample()
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def at(self, t: float) -> float | None:
        points = self.samples
        if not points or t < points[0][0] or t > points[-1][0] + 2 * self.interval:
            return None
        for (t0, c0), (t1, c1) in zip(points, points[1:], strict=False):
            if t0 <= t <= t1:
                return c0 + (c1 - c0) * (t - t0) / (t1 - t0) if t1 > t0 else c1
        return points[-1][1]

    def between(self, start: float, end: float) -> float | None:
        a, b = self.at(start), self.at(end)
        return None if a is None or b is None else b - a


# --- the statekit side (the child) ----------------------------------------------------------
def _progress_watch(spark):
    """A listener keeping (arrival, batch, input rows) of every progress report, per query."""
    from pyspark.sql.streaming import StreamingQueryListener

    class ProgressWatch(StreamingQueryListener):
        def __init__(self):
            self.changed = threading.Condition()
            self.reports: dict[str, dict[int, tuple[float, int]]] = {}

        def onQueryStarted(self, event) -> None:
            pass

        def onQueryProgress(self, event) -> None:
            at, progress = time.monotonic(), event.progress
            with self.changed:
                self.reports.setdefault(str(progress.id), {}).setdefault(
                    progress.batchId, (at, progress.numInputRows))
                self.changed.notify_all()

        def onQueryIdle(self, event) -> None:
            pass

        def onQueryTerminated(self, event) -> None:
            with self.changed:
                self.changed.notify_all()

        def rows(self, query_id: str) -> tuple[int, int, float | None]:
            """(input rows so far, last batch with input, arrival of the first such
            batch's report)."""
            batches = self.reports.get(query_id, {})
            with_rows = sorted((b, at, n) for b, (at, n) in batches.items() if n > 0)
            if not with_rows:
                return 0, -1, None
            return sum(n for _, _, n in with_rows), with_rows[-1][0], with_rows[0][1]

        def wait_rows(self, query, at_least: int, timeout: float = CHILD_TIMEOUT_S
                      ) -> tuple[int, int, float]:
            """Block until ``query`` has read ``at_least`` rows; ``rows()`` then."""
            query_id, deadline = str(query.query.id), time.monotonic() + timeout
            with self.changed:
                while True:
                    rows, batch, at = self.rows(query_id)
                    if rows >= at_least:
                        return rows, batch, at
                    if not query.query.isActive:
                        raise RuntimeError(f"query {query.name!r} stopped after {rows} rows: "
                                           f"{query.query.exception()}")
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"query {query.name!r}: {rows} of {at_least} rows "
                                           f"after {timeout:.0f} s")
                    self.changed.wait(1.0)

    watch = ProgressWatch()
    spark.streams.addListener(watch)
    return watch


def _tree_cpu(before: dict, after: dict) -> tuple[float | None, dict]:
    kinds = cpu_by_kind(before, after)
    if not kinds:
        return None, kinds
    return sum(v for k, v in kinds.items() if k != "broker"), kinds


def _statekit_query(spark, watch, spec: dict, label: str) -> dict:
    """One ``start_query`` over the whole topic: its marks, CPU and final windows."""
    import statekit as sk
    from bench.throughput import _stop_quietly

    records = spec["records"]
    name = f"peer_{label}_{time.monotonic_ns()}"
    started, cpu_started = time.monotonic(), cpu_snapshot()
    query = sk.start_query(
        spec["topic"], spark=spark, keys=["player"], window=sk.tumbling(WINDOW),
        aggregates=AGGREGATES, watermark=WATERMARK, name=name,
        checkpoint=str(Path(spec["work"]) / name), trigger=TRIGGER, kafka=spec["bootstrap"],
        changelog=True, event_schema=EVENT_SCHEMA, max_offsets_per_trigger=spec["batch"],
        sink="memory")
    try:
        _, _, first_result = watch.wait_rows(query, 1)
        watch.wait_rows(query, int(records * STEADY_FROM))
        steady_start, cpu_steady_start = time.monotonic(), cpu_snapshot()
        with watch.changed:
            rows_at_start = watch.rows(str(query.query.id))[0]
        rows, last_batch, _ = watch.wait_rows(query, records)
        query.changelog.wait_shipped(last_batch, timeout=CHILD_TIMEOUT_S)
        flushed, cpu_flushed = time.monotonic(), cpu_snapshot()
        late = query.late_events()
        out = spark.table(name)
        total = next(c for c in out.columns if c.startswith("sum"))
        table = out.selectExpr("player", "unix_millis(window.start) AS start", "count",
                               f"`{total}` AS total").collect()
    finally:
        _stop_quietly(spark, query)
    if rows != records:
        raise RuntimeError(f"query {name!r} read {rows} rows; the topic holds {records}")
    windows: dict[str, list[int]] = {}
    for player, begin, count, total_score in table:
        key = f"{player}|{int(begin)}"
        if key not in windows or count > windows[key][0]:
            windows[key] = [int(count), int(total_score)]
    steady_cpu, steady_kinds = _tree_cpu(cpu_steady_start, cpu_flushed)
    run_cpu, _ = _tree_cpu(cpu_started, cpu_flushed)
    return {"query_started": started, "first_result": first_result,
            "steady_start": steady_start, "rows_at_steady_start": rows_at_start,
            "flushed": flushed, "last_batch": last_batch, "steady_cpu_s": steady_cpu,
            "steady_cpu_by_kind": steady_kinds, "run_cpu_s": run_cpu,
            "changelog_topic": query.changelog_topic, "late_events": late,
            "windows": windows}


def statekit_worker(spec: dict) -> dict:
    """The statekit child: a session on ``local[cores]``, a cold and a warm query, then
    ``restore_stores`` of the warm query's changelog."""
    import statekit as sk
    from statekit.restore import restore_stores

    spark = sk.spark_session(f"local[{spec['cores']}]", app_name="statekit-bench-peer",
                             shuffle_partitions=PARTITIONS)
    watch = _progress_watch(spark)
    cold = _statekit_query(spark, watch, spec, "cold")
    warm = _statekit_query(spark, watch, spec, "warm")
    query_spec = sk.QuerySpec(keys=["player"], window=sk.tumbling(WINDOW),
                              aggregates=AGGREGATES, watermark=WATERMARK)
    cpu_before, start = cpu_snapshot(), time.monotonic()
    restored = restore_stores(spec["bootstrap"], warm["changelog_topic"], query_spec,
                              Path(spec["work"]) / "restore", progress=False)
    restore_s = time.monotonic() - start
    restore_cpu, _ = _tree_cpu(cpu_before, cpu_snapshot())
    restored.close()
    return {"cold": cold, "warm": warm, "restore_s": restore_s, "restore_cpu_s": restore_cpu}


def run_statekit(config: Config, bootstrap: str, records: int, batch: int, work: Path,
                 broker: BrokerCpu) -> dict:
    """One statekit child; its figures against the time it was spawned."""
    folder = work / f"statekit-{time.monotonic_ns()}"
    folder.mkdir()
    spec_path = folder / "spec.json"
    spec_path.write_text(json.dumps({"bootstrap": bootstrap, "topic": TOPIC, "records": records,
                                     "batch": batch, "cores": config.cores,
                                     "work": str(folder)}))
    spawned = time.monotonic()
    proc = _spawn([sys.executable, "-m", "bench.peer", "--statekit-worker", str(spec_path)])
    _wait([proc], config.label)
    out = json.loads(spec_path.with_suffix(".out.json").read_text())
    result = {"restore_s": out["restore_s"], "restore_cpu_s": out["restore_cpu_s"]}
    for phase in ("cold", "warm"):
        q = out[phase]
        window_s = q["flushed"] - q["steady_start"]
        rows = records - q["rows_at_steady_start"]
        result[phase] = {
            "first_result_from_spawn_s": q["first_result"] - spawned,
            "first_result_from_start_query_s": q["first_result"] - q["query_started"],
            "steady_s": window_s, "steady_rows": rows,
            "steady_records_per_s": rows / window_s,
            "steady_cpu_s": q["steady_cpu_s"], "steady_cpu_by_kind": q["steady_cpu_by_kind"],
            "records_per_cpu_s": _per(rows, q["steady_cpu_s"]),
            "steady_cores": _per(q["steady_cpu_s"], window_s),
            "broker_steady_cpu_s": broker.between(q["steady_start"], q["flushed"]),
            "start_to_flushed_s": q["flushed"] - q["query_started"],
            "last_batch": q["last_batch"], "late_events": q["late_events"],
            "changelog_topic": q["changelog_topic"], "windows": q["windows"]}
    return result


def _per(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b


# --- the Quix side (children on their own interpreter) -------------------------------------
def _quix_spec(bootstrap: str, group: str, state_dir: Path, mode: str, **more) -> dict:
    return {"bootstrap": bootstrap, "topic": TOPIC, "group": group, "state_dir": str(state_dir),
            "mode": mode, **more}


def run_quix(config: Config, bootstrap: str, records: int, ends: dict[int, int], work: Path,
             python: Path, broker: BrokerCpu) -> dict:
    """``config.cores`` Quix processes in one fresh consumer group; then, for one process,
    a fresh process restoring that group's state from its changelog."""
    folder = work / f"quix-{time.monotonic_ns()}"
    sync = folder / "sync"
    sync.mkdir(parents=True)
    group = f"bench-peer-{folder.name}"
    specs = []
    for member in range(config.cores):
        path = folder / f"member-{member}.json"
        path.write_text(json.dumps(_quix_spec(
            bootstrap, group, folder / f"state-{member}", "process", records=records,
            ends={str(p): e for p, e in ends.items()}, member=member, members=config.cores,
            sync_dir=str(sync), step=max(1, records // SAMPLES))))
        specs.append(path)
    spawned = time.monotonic()
    procs = [_spawn(_quix_command(python, p)) for p in specs]
    _wait(procs, config.label)
    members = [json.loads(p.with_suffix(".out.json").read_text()) for p in specs]
    result = quix_figures(members, spawned, records)
    result["group"] = group
    result["broker_steady_cpu_s"] = broker.between(result.pop("_steady_start"),
                                                   result.pop("_flushed"))
    if config.cores == 1:
        path = folder / "restore.json"
        path.write_text(json.dumps(_quix_spec(bootstrap, group, folder / "state-restored",
                                              "restore")))
        _wait([_spawn(_quix_command(python, path))], f"{config.label}: restore")
        restored = json.loads(path.with_suffix(".out.json").read_text())
        result["restore_s"] = restored["restore_s"]
        result["restore_cpu_s"] = restored["restore_cpu_s"]
    return result


def quix_figures(members: list[dict], spawned: float, records: int) -> dict:
    """A Quix configuration's figures from its members' marks and samples.

    The steady window starts at the first sample where the members together have processed
    ``STEADY_FROM`` of the records and ends at the last member's first commit after its
    last record; the CPU is each member's, at its sample before the start and at its commit.

    Example:
        >>> member = {"ready": 1.0, "first_assigned": 3.0, "first_output": 4.0,
        ...           "samples": [[1.0, 0, 0.5], [5.0, 10, 1.0], [9.0, 100, 3.0]],
        ...           "end": 10.0, "end_cpu": 3.5, "processed": 100, "outputs": 100,
        ...           "assignments": [{"at": 3.0, "assigned": [0]}], "late": [],
        ...           "recovery_spans": [], "windows": {"p1|0": [100, 5]}}
        >>> f = quix_figures([member], 0.0, 100)
        >>> f["first_result_from_spawn_s"], f["steady_records_per_s"], f["records_per_cpu_s"]
        (4.0, 18.0, 36.0)
    """
    tenth = int(records * STEADY_FROM)
    events = sorted((s[0], i, s[1], s[2]) for i, m in enumerate(members) for s in m["samples"])
    counts, cpus = [0] * len(members), [None] * len(members)
    start = rows_at_start = None
    for t, i, n, cpu in events:
        counts[i], cpus[i] = n, cpu
        if sum(counts) >= tenth:
            start, rows_at_start = t, sum(counts)
            break
    if start is None:
        raise RuntimeError(f"the Quix members processed {sum(counts)} of {records} records")
    flushed = max(m["end"] for m in members)
    known = all(c is not None for c in cpus) and all(m["end_cpu"] is not None for m in members)
    cpu = sum(m["end_cpu"] for m in members) - sum(cpus) if known else None
    rows, window_s = records - rows_at_start, flushed - start
    windows: dict[str, list[int]] = {}
    for m in members:  # a window met by two members (a partition moved): the later, larger
        for key, value in m["windows"].items():
            if key not in windows or value[0] > windows[key][0]:
                windows[key] = value
    assigned = sum(1 for m in members for a in m["assignments"] if "assigned" in a)
    first_output = min(m["first_output"] for m in members)
    return {
        "quixstreams": members[0].get("quixstreams"),
        "first_result_from_spawn_s": first_output - spawned,
        "group_join_s": max(m["first_assigned"] - m["ready"] for m in members),
        "first_result_from_spawn_less_join_s": first_output - spawned - max(
            m["first_assigned"] - m["ready"] for m in members),
        "steady_s": window_s, "steady_rows": rows, "steady_records_per_s": rows / window_s,
        "steady_cpu_s": cpu, "records_per_cpu_s": _per(rows, cpu),
        "steady_cores": _per(cpu, window_s), "start_to_flushed_s": flushed - spawned,
        "processed": sum(m["processed"] for m in members),
        "outputs": sum(m["outputs"] for m in members),
        "assignments": [m["assignments"] for m in members],
        "rebalances": assigned - len(members),  # assignments after each member's first
        "recovery_during_run_s": sum(s[1] - s[0] for m in members
                                     for s in m["recovery_spans"]),
        "late_windows": sorted({k for m in members for k in m["late"]}),
        "late_records": sum(len(m["late"]) for m in members),
        "windows": windows, "_steady_start": start, "_flushed": flushed}


# --- per-window agreement ------------------------------------------------------------------
def compare_windows(quix: dict, quix_late: set[str], statekit: dict, statekit_late: int,
                    what: str) -> dict:
    """Every window's [count, sum] of both sides; raise ``WindowsDisagree`` unless they agree
    wherever neither dropped records as late.

    Quix names the windows it dropped late records of: those are left out. statekit counts
    its late events: a window where statekit has fewer records than Quix (or none) is left
    out as long as the records missing add up to no more than that count.

    Example:
        >>> compare_windows({"p1|0": [3, 9], "p2|0": [2, 4]}, {"p2|0"},
        ...                 {"p1|0": [3, 9], "p2|0": [1, 2]}, 0, "demo")["compared"]
        1
    """
    keys = quix.keys() | statekit.keys()
    left_out_quix = {k for k in keys if k in quix_late}
    short, differ = {}, []
    for key in sorted(keys - left_out_quix):
        q, s = quix.get(key, [0, 0]), statekit.get(key, [0, 0])
        if q == s:
            continue
        if s[0] < q[0]:
            short[key] = q[0] - s[0]
        else:
            differ.append(key)
    if sum(short.values()) > statekit_late:
        differ += sorted(short)
        short = {}
    if differ:
        raise WindowsDisagree(
            f"{what}: {len(differ)} windows differ (statekit dropped {statekit_late} events "
            f"as late, Quix {len(quix_late)} windows' records), e.g. " + ", ".join(
                f"{k}: Quix {quix.get(k)} statekit {statekit.get(k)}" for k in differ[:5]))
    return {"compared": len(keys) - len(left_out_quix) - len(short),
            "left_out_late_quix": len(left_out_quix), "left_out_late_statekit": len(short)}


# --- the whole benchmark -----------------------------------------------------------------
def _topic_offsets(bootstrap: str, topic: str) -> int:
    from statekit.kafka.topics import watermarks

    frame = watermarks(bootstrap, topic)
    return int((frame["high"] - frame["low"]).sum())


def _order(repeat: int) -> tuple[Config, ...]:
    return CONFIGS if repeat % 2 == 0 else CONFIGS[::-1]


def run(records: int, batch: int, repeats: int, python: Path) -> dict:
    from statekit.kafka import EmbeddedBroker
    from statekit.kafka.topics import create_topic, list_topics, watermarks

    started = Run("peer")
    work = Path(tempfile.mkdtemp(prefix="statekit-bench-peer-"))
    runs: list[dict] = []
    agreement: list[dict] = []
    try:
        with EmbeddedBroker() as broker:
            bootstrap = broker.bootstrap_servers
            create_topic(bootstrap, TOPIC, PARTITIONS, TOPIC_CONFIG)
            produce_s = produce(bootstrap, TOPIC, records)  # the topic exists: kept as is
            marks = watermarks(bootstrap, TOPIC)
            ends = {int(p): int(h) for p, h in zip(marks["partition"], marks["high"],
                                                   strict=True)}
            with BrokerCpu() as broker_cpu:
                for repeat in range(repeats):
                    done: dict[Config, dict] = {}
                    for position, config in enumerate(_order(repeat)):
                        load_start = load_average()
                        if config.side == "statekit":
                            figures = run_statekit(config, bootstrap, records, batch, work,
                                                   broker_cpu)
                        else:
                            figures = run_quix(config, bootstrap, records, ends, work, python,
                                               broker_cpu)
                        done[config] = figures
                        runs.append({"repeat": repeat, "position": position,
                                     "config": config.label, "load_start": load_start,
                                     "load_end": load_average(), **figures})
                        print(f"peer: repeat {repeat + 1}/{repeats}, {config.label} done",
                              flush=True)
                    agreement += _agreement(done, repeat)
            topics = list_topics(bootstrap)
            for r in runs:
                r.pop("windows", None)
                r.pop("late_windows", None)
                if "group" in r:
                    prefix = f"changelog__{r['group']}--"
                    r["changelog_offsets"] = sum(_topic_offsets(bootstrap, t) for t in topics
                                                 if t.startswith(prefix))
                for phase in ("cold", "warm"):
                    if phase in r:
                        r[phase].pop("windows")
                        r[phase]["changelog_offsets"] = _topic_offsets(
                            bootstrap, r[phase]["changelog_topic"])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result = {"records": records, "batch": batch, "repeats": repeats, "produce_s": produce_s,
              "partitions": PARTITIONS, "steady_from": STEADY_FROM,
              "orders": [[c.label for c in _order(r)] for r in range(repeats)],
              "quixstreams": _quix_version(runs), "runs": runs, "windows": agreement}
    figures, spread = figures_of(runs, agreement)
    result["spread"] = spread
    _print(result, figures, spread)
    write_result(started, figures, result, broker=embedded_kafka())
    return result


def _agreement(done: dict[Config, dict], repeat: int) -> list[dict]:
    out = []
    for config, figures in done.items():
        if config.side != "statekit":
            continue
        for phase in ("cold", "warm"):
            sk_run = figures[phase]
            for other, quix in done.items():
                if other.side != "quix":
                    continue
                what = f"repeat {repeat + 1}: {config.label} {phase} against {other.label}"
                compared = compare_windows(quix["windows"], set(quix["late_windows"]),
                                           sk_run["windows"], sk_run["late_events"], what)
                out.append({"repeat": repeat, "statekit": f"{config.label} {phase}",
                            "quix": other.label, **compared})
    return out


def _quix_version(runs: list[dict]) -> str | None:
    return next((r.get("quixstreams") for r in runs if r.get("quixstreams")), None)


def _values(runs: list[dict], label: str, *path: str) -> list[float]:
    out = []
    for r in runs:
        if r["config"] != label:
            continue
        value = r
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if value is not None:
            out.append(value)
    return out


def figures_of(runs: list[dict], agreement: list[dict]
               ) -> tuple[list[Figure], dict[str, list[float]]]:
    """The results file's figures (medians over the repetitions) and each one's min–max."""
    figures: list[Figure] = []
    spread: dict[str, list[float]] = {}

    def add(name: str, values: list[float], unit: str, baseline: str | None = None,
            target: str | None = None) -> None:
        value = median(values)
        if values:
            spread[name] = [min(values), max(values)]
        ratio = None
        if baseline is not None:
            base = next(f.value for f in figures if f.name == baseline)
            ratio = value / base if base and math.isfinite(value) else None
        figures.append(Figure(name, value, unit, baseline=baseline if ratio else None,
                              ratio=ratio, target=target))

    for cores in (1, 2):
        quix, sk = f"Quix ×{cores}", f"statekit local[{cores}]"
        q_rate, q_cpu = f"{quix}: steady records/s", f"{quix}: records per CPU-second"
        q_first = f"{quix}: spawn to first window result"
        add(q_rate, _values(runs, quix, "steady_records_per_s"), "records/s")
        add(f"{sk} warm: steady records/s", _values(runs, sk, "warm", "steady_records_per_s"),
            "records/s", q_rate, "ratio >= 2.0")
        add(f"{sk} cold: steady records/s", _values(runs, sk, "cold", "steady_records_per_s"),
            "records/s", q_rate)
        add(q_cpu, _values(runs, quix, "records_per_cpu_s"), "records")
        add(f"{sk} warm: records per CPU-second",
            _values(runs, sk, "warm", "records_per_cpu_s"), "records", q_cpu, "ratio >= 1.3")
        add(f"{sk} cold: records per CPU-second",
            _values(runs, sk, "cold", "records_per_cpu_s"), "records", q_cpu, "ratio >= 1.3")
        add(q_first, _values(runs, quix, "first_result_from_spawn_s"), "s")
        add(f"{sk}: spawn to first window result (cold)",
            _values(runs, sk, "cold", "first_result_from_spawn_s"), "s", q_first)
        add(f"{sk} warm: start_query to first window result",
            _values(runs, sk, "warm", "first_result_from_start_query_s"), "s")
        add(f"{quix}: of which consumer-group join", _values(runs, quix, "group_join_s"), "s")
        add(f"{quix}: spawn to first window result, less the group join",
            _values(runs, quix, "first_result_from_spawn_less_join_s"), "s")
        add(f"{quix}: broker CPU-seconds in the steady window",
            _values(runs, quix, "broker_steady_cpu_s"), "s")
        add(f"{sk} warm: broker CPU-seconds in the steady window",
            _values(runs, sk, "warm", "broker_steady_cpu_s"), "s")
    q_restore = "Quix ×1: restore of its changelog"
    add(q_restore, _values(runs, "Quix ×1", "restore_s"), "s")
    add("statekit: restore_stores of its changelog",
        [v for c in (1, 2) for v in _values(runs, f"statekit local[{c}]", "restore_s")], "s",
        q_restore)
    add("Quix ×1: changelog offsets restored", _values(runs, "Quix ×1", "changelog_offsets"),
        "offsets")
    add("statekit: changelog offsets restored",
        [v for c in (1, 2) for v in _values(runs, f"statekit local[{c}]", "warm",
                                             "changelog_offsets")], "offsets")
    figures.append(Figure("windows compared, all agree", sum(a["compared"] for a in agreement),
                          "windows"))
    return figures, spread


def _cell(f: Figure, spread: dict[str, list[float]]) -> str:
    from bench.report import number

    text = f"{number(f.value)} {f.unit}"
    if f.name in spread and spread[f.name][0] != spread[f.name][1]:
        low, high = spread[f.name]
        text += f" ({number(low)}–{number(high)})"
    if f.ratio is not None:
        text += f"  ratio {f.ratio:.2f}"
        if f.target:
            text += f" (target {f.target.split(' ', 1)[1]}: {'met' if f.met else 'NOT met'})"
    return text


def _print(r: dict, figures: list[Figure], spread: dict[str, list[float]]) -> None:
    rows = [(f.name, _cell(f, spread)) for f in figures]
    rows.append(("load average, every run (1 min, start → end)", ", ".join(
        f"{x['config']} {x['load_start'][0] if x['load_start'] else '?'}→"
        f"{x['load_end'][0] if x['load_end'] else '?'}" for x in r["runs"])))
    print_table(f"statekit vs Quix Streams {r['quixstreams']}: {r['records']:,} records, "
                f"batches of {r['batch']:,}, {r['repeats']} repetitions (medians, min–max)",
                rows)


def main(argv: list[str] | None = None) -> dict | None:
    parser = argparse.ArgumentParser(prog="python -m bench.peer", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000, help="events to process")
    parser.add_argument("--batch", type=int, default=250_000,
                        help="statekit: records per micro-batch (maxOffsetsPerTrigger); a "
                             "fixed cost per batch (planning, commits, task hand-offs) makes "
                             "larger batches faster: 1M records at 100k a batch ran at "
                             "62k rec/s warm, at 250k 125k rec/s, at 500k 144k rec/s")
    parser.add_argument("--repeats", type=int, default=3,
                        help="repetitions of the four configurations, in alternating order")
    parser.add_argument("--quix-python", default=None,
                        help=f"the interpreter with quixstreams (default "
                             f"{DEFAULT_QUIX_PYTHON.relative_to(REPO)}: make peer-venv)")
    parser.add_argument("--statekit-worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.statekit_worker:
        spec = Path(args.statekit_worker)
        out = statekit_worker(json.loads(spec.read_text()))
        spec.with_suffix(".out.json").write_text(json.dumps(out))
        return None
    if args.records < 10 * PLAYERS or args.batch < 1 or args.repeats < 1:
        parser.error(f"--records must be at least {10 * PLAYERS}, --batch and --repeats at "
                     f"least 1; got {args.records}, {args.batch} and {args.repeats}")
    try:
        python = quix_python(args.quix_python)
    except FileNotFoundError as exc:
        parser.exit(2, f"bench.peer: {exc}\n")
    return run(args.records, args.batch, args.repeats, python)


if __name__ == "__main__":
    main()
