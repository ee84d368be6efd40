"""The Python peer side by side: Quix Streams vs statekit on the same topic and broker.

One run, one embedded broker, one topic of R JSON game events (as ``bench.throughput``
makes them: 1000 players, 1 ms apart, 4 partitions, keyed by player). The same query on
both: a 1-minute tumbling window per player, ``count`` and ``sum(score)``, 10 s of
grace (Quix) / watermark (statekit), each with its RocksDB state and changelog topic.

- **Quix Streams** runs in a child process (its CPU measured apart): time to its first
  record (imports, changelog topic set-up and the consumer group's first join, ~23 s
  on the embedded broker), steady records/s from 10 % of the records to the last,
  cores used (process CPU / wall). Then its state directory is deleted and a second
  child restores it from Quix's changelog (``RecoveryManager.do_recovery`` timed).
- **statekit**: ``start_query`` on the same topic twice in this process: *cold* (the
  first query of a fresh Spark session) and *warm* (the next one). Steady records/s
  over the batches after the first, time to the first batch, cores (CPU of the JVM,
  Python workers and driver / wall). Then ``restore_stores`` of the warm query's
  changelog into fresh RocksDB stores.
- **Final per-window counts** (and sums) of Quix and the warm statekit query are
  compared; they must agree for every window neither drops as late (asserted).

The input topic is created with ``retention.ms`` and ``retention.bytes`` set: the
embedded broker's DescribeConfigs returns only configs set explicitly, and Quix
needs those two (``KeyError: 'retention.ms'`` otherwise).

Needs the optional ``bench`` extra (``pip install quixstreams``).

    python -m bench.peer --records 100000 --batch 20000
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from bench.common import cpu_by_kind, cpu_snapshot, print_table, session, timed, write_result
from bench.results import Figure, Run
from bench.throughput import EVENT_SCHEMA, PLAYERS, produce

WINDOW_MS, GRACE_MS = 60_000, 10_000
WINDOW, WATERMARK = "1 minute", "10 seconds"
AGGREGATES = ["count", "sum(score)"]
TOPIC = "bench-peer-games"
PARTITIONS = 4
#: Quix reads ``retention.ms`` / ``retention.bytes`` of its input topic to configure its
#: changelog topics; the embedded broker reports only explicitly set configs.
TOPIC_CONFIG = {"retention.ms": str(7 * 24 * 3600 * 1000), "retention.bytes": "-1"}


def quix_installed() -> bool:
    """Whether the optional ``quixstreams`` package can be imported."""
    import importlib.util

    return importlib.util.find_spec("quixstreams") is not None


# --- the Quix Streams side (runs in a child process) --------------------------------------
def _event_ms(value, headers, timestamp, timestamp_type) -> int:
    """The event time of a game event (its ``ts`` field) in epoch milliseconds."""
    return int(datetime.fromisoformat(value["ts"]).timestamp() * 1000)


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def quix_worker(config: dict) -> dict:
    """Run the windowed count and sum with Quix Streams; the figures as a dict.

    ``config``: bootstrap, topic, group, state_dir, records, mode ("process" or
    "restore"). In "process" mode it stops after ``records`` outputs (one per input
    record: ``.current()``) and returns the final per-window counts and sums.
    In "restore" mode it times ``RecoveryManager.do_recovery`` and stops once idle.
    """
    born = time.perf_counter()
    from quixstreams import Application
    from quixstreams.dataframe.windows import Count, Sum
    from quixstreams.state.recovery import RecoveryManager

    recovery: dict[str, float] = {}
    if config["mode"] == "restore":
        real = RecoveryManager.do_recovery

        def timed_recovery(self):
            start = time.perf_counter()
            try:
                return real(self)
            finally:
                recovery["seconds"] = recovery.get("seconds", 0.0) + time.perf_counter() - start

        RecoveryManager.do_recovery = timed_recovery

    app = Application(broker_address=config["bootstrap"], consumer_group=config["group"],
                      state_dir=config["state_dir"], auto_offset_reset="earliest",
                      loglevel="WARNING", commit_interval=5.0)
    topic = app.topic(config["topic"], value_deserializer="json", key_deserializer="str",
                      timestamp_extractor=_event_ms)
    sdf = app.dataframe(topic)
    sdf = sdf.tumbling_window(WINDOW_MS, grace_ms=GRACE_MS).agg(
        count=Count(), sum_score=Sum("score")).current()

    windows: dict[str, list] = {}
    marks: dict[str, float] = {}
    tenth = max(1, config["records"] // 10)
    seen = [0]

    def record(value, key, timestamp, headers):
        seen[0] += 1
        if seen[0] == 1:
            marks["first_t"], marks["first_cpu"] = time.perf_counter(), _cpu_s()
        elif seen[0] == tenth:
            marks["tenth_t"], marks["tenth_cpu"] = time.perf_counter(), _cpu_s()
        windows[f"{key}|{value['start']}"] = [value["count"], value["sum_score"]]
        marks["last_t"], marks["last_cpu"] = time.perf_counter(), _cpu_s()

    sdf = sdf.update(record, metadata=True)
    imported = time.perf_counter()
    if config["mode"] == "process":
        app.run(count=config["records"], timeout=120.0, collect=False)
    else:
        app.run(timeout=3.0, collect=False)
    ended = time.perf_counter()
    out = {"mode": config["mode"], "records_seen": seen[0],
           "import_s": imported - born, "wall_s": ended - born, "cpu_s": _cpu_s()}
    if config["mode"] == "restore":
        out["restore_s"] = recovery.get("seconds")
        return out
    if seen[0] < config["records"]:
        raise RuntimeError(f"Quix processed {seen[0]} of {config['records']} records")
    steady_rows = seen[0] - tenth
    steady_s = marks["last_t"] - marks["tenth_t"]
    out.update({
        "to_first_record_s": marks["first_t"] - born,
        "run_to_first_record_s": marks["first_t"] - imported,
        "steady_records_per_s": steady_rows / steady_s,
        "steady_cores": (marks["last_cpu"] - marks["tenth_cpu"]) / steady_s,
        "all_records_per_s": seen[0] / (marks["last_t"] - marks["first_t"]),
        "windows": windows})
    return out


def run_quix(config: dict, work: Path) -> dict:
    """``quix_worker(config)`` in a child process; its result plus its wall and CPU time."""
    spec = work / f"quix-{config['mode']}.json"
    spec.write_text(json.dumps(config))
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "bench.peer", "--quix-worker", str(spec)],
                            cwd=Path(__file__).resolve().parent.parent)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"the Quix Streams child ({config['mode']}) exited with "
                           f"{proc.returncode}; its output is above")
    result = json.loads(spec.with_suffix(".out.json").read_text())
    cpu = usage.ru_utime + usage.ru_stime
    return {**result, "process_wall_s": wall, "process_cpu_s": cpu, "process_cores": cpu / wall}


# --- the statekit side (this process) -------------------------------------------------------
def run_statekit(spark, bootstrap: str, records: int, batch: int, work: Path, label: str
                 ) -> dict:
    """``start_query`` on the topic until ``records`` rows are in; steady rate, cores, windows."""
    import statekit as sk
    from bench.throughput import _stop_quietly

    name = f"peer_{label}_{time.monotonic_ns()}"
    before = cpu_snapshot()
    started_wall, start = time.time(), time.perf_counter()
    query = sk.start_query(
        TOPIC, spark=spark, keys=["player"], window=sk.tumbling(WINDOW),
        aggregates=AGGREGATES, watermark=WATERMARK, name=name,
        checkpoint=str(work / name), trigger="100 ms", kafka=bootstrap, changelog=True,
        event_schema=EVENT_SCHEMA, max_offsets_per_trigger=batch, sink="memory")
    try:
        while sum(p["numInputRows"] for p in query.query.recentProgress) < records:
            if not query.is_active:
                raise RuntimeError(f"query {name!r} stopped: {query.query.exception()}")
            time.sleep(0.02)
        seconds = time.perf_counter() - start
        cpu = cpu_by_kind(before, cpu_snapshot())
        reports = [p for p in query.query.recentProgress if p["numInputRows"] > 0]
    finally:
        _stop_quietly(spark, query)
    first_start = _report_start(reports[0])
    warm = reports[1:] or reports
    warm_start = _report_start(warm[0])
    last_end = _report_start(warm[-1]) + warm[-1]["durationMs"]["triggerExecution"] / 1000
    cores = sum(v for k, v in cpu.items() if k != "broker") / seconds
    out = spark.table(name)
    total = next(c for c in out.columns if c.startswith("sum"))
    table = out.selectExpr("player", "unix_millis(window.start) AS start", "count",
                           f"`{total}` AS total").toPandas()
    windows: dict[str, list[int]] = {}
    for player, begin, count, total_score in table.itertuples(index=False):
        key = f"{player}|{int(begin)}"
        if key not in windows or count > windows[key][0]:
            windows[key] = [int(count), int(total_score)]
    return {"seconds": seconds, "records_per_s": records / seconds,
            "to_first_batch_s": first_start - started_wall,
            "steady_records_per_s": sum(p["numInputRows"] for p in warm) / (
                last_end - warm_start),
            "batches": len(reports), "cores": cores, "cpu_s": cpu,
            "changelog_topic": query.changelog_topic, "windows": windows}


def _report_start(report: dict) -> float:
    return datetime.fromisoformat(report["timestamp"].replace("Z", "+00:00")).timestamp()


def compare_windows(quix: dict, statekit: dict) -> dict:
    """Per-window [count, sum] of both; the windows both have must agree (asserted)."""
    both = quix.keys() & statekit.keys()
    differ = sorted(k for k in both if quix[k] != statekit[k])
    assert not differ, f"{len(differ)} windows differ, e.g. " + ", ".join(
        f"{k}: quix {quix[k]} statekit {statekit[k]}" for k in differ[:5])
    return {"windows_compared": len(both), "windows_differing": len(differ),
            "only_quix": len(quix.keys() - both), "only_statekit": len(statekit.keys() - both),
            "records_in_quix_windows": sum(v[0] for v in quix.values()),
            "records_in_statekit_windows": sum(v[0] for v in statekit.values())}


def _topic_records(bootstrap: str, topic: str) -> int:
    from statekit.kafka.topics import watermarks

    frame = watermarks(bootstrap, topic)
    return int((frame["high"] - frame["low"]).sum())


def load_average() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def run(records: int, batch: int) -> dict:
    import statekit as sk
    from statekit.kafka import EmbeddedBroker
    from statekit.kafka.topics import create_topic, list_topics
    from statekit.restore import restore_stores

    started = Run("peer")
    work = Path(tempfile.mkdtemp(prefix="statekit-bench-peer-"))
    load_before = load_average()
    try:
        with EmbeddedBroker() as broker:
            bootstrap = broker.bootstrap_servers
            create_topic(bootstrap, TOPIC, PARTITIONS, TOPIC_CONFIG)
            produce_s = produce(bootstrap, TOPIC, records)  # the topic exists: kept as is
            state_dir = work / "quix-state"
            config = {"bootstrap": bootstrap, "topic": TOPIC, "group": "bench-peer-quix",
                      "state_dir": str(state_dir), "records": records}
            quix = run_quix({**config, "mode": "process"}, work)
            quix_changelogs = [t for t in list_topics(bootstrap) if t.startswith("changelog__")]
            quix_log_records = sum(_topic_records(bootstrap, t) for t in quix_changelogs)
            shutil.rmtree(state_dir)
            quix_restore = run_quix({**config, "mode": "restore"}, work)

            spark = session()
            cold = run_statekit(spark, bootstrap, records, batch, work, "cold")
            warm = run_statekit(spark, bootstrap, records, batch, work, "warm")
            spec = sk.QuerySpec(keys=["player"], window=sk.tumbling(WINDOW),
                                aggregates=AGGREGATES, watermark=WATERMARK)
            sk_log_records = _topic_records(bootstrap, warm["changelog_topic"])
            restore_s, restored = timed(lambda: restore_stores(
                bootstrap, warm["changelog_topic"], spec, work / "statekit-restore",
                progress=False))
            restored.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    load_after = load_average()
    agreement = compare_windows(quix.pop("windows"), warm.pop("windows"))
    cold_windows = cold.pop("windows")
    assert agreement["records_in_statekit_windows"] == records, agreement
    assert sum(v[0] for v in cold_windows.values()) == records
    sk_restore_rate = sk_log_records / restore_s
    quix_restore_rate = quix_log_records / quix_restore["restore_s"]
    result = {
        "records": records, "batch": batch, "produce_s": produce_s,
        "quixstreams": _quix_version(), "quix": quix, "quix_restore": quix_restore,
        "quix_changelog_records": quix_log_records,
        "statekit_cold": cold, "statekit_warm": warm,
        "statekit_restore_s": restore_s, "statekit_changelog_records": sk_log_records,
        "ratio_steady_warm": warm["steady_records_per_s"] / quix["steady_records_per_s"],
        "ratio_steady_cold": cold["steady_records_per_s"] / quix["steady_records_per_s"],
        "ratio_restore_s": quix_restore["restore_s"] / restore_s,
        "ratio_restore_rate": sk_restore_rate / quix_restore_rate,
        "windows": agreement, "load_average_before": load_before,
        "load_average_after": load_after}
    _print(result)
    write_result(started, figures_of(result), result)
    return result


def figures_of(r: dict) -> list[Figure]:
    """The results file's figures: statekit's steady rate and restore against Quix's."""
    q, c, w = r["quix"], r["statekit_cold"], r["statekit_warm"]
    steady, restore = "Quix Streams: steady records/s", "Quix Streams: restore of its changelog"
    return [
        Figure(steady, q["steady_records_per_s"], "records/s"),
        Figure("statekit warm: steady records/s", w["steady_records_per_s"], "records/s",
               baseline=steady, ratio=r["ratio_steady_warm"]),
        Figure("statekit cold: steady records/s", c["steady_records_per_s"], "records/s",
               baseline=steady, ratio=r["ratio_steady_cold"]),
        Figure("Quix Streams: cores, steady", q["steady_cores"], "cores"),
        Figure("statekit warm: cores", w["cores"], "cores"),
        Figure("statekit cold: cores", c["cores"], "cores"),
        Figure("Quix Streams: start-up to first record", q["to_first_record_s"], "s"),
        Figure("Quix Streams: of which consumer-group join and topic set-up",
               q["run_to_first_record_s"], "s"),
        Figure("statekit warm: start-up to first batch", w["to_first_batch_s"], "s"),
        Figure("statekit cold: start-up to first batch", c["to_first_batch_s"], "s"),
        Figure("Quix Streams: start to all records in", q["process_wall_s"], "s"),
        Figure("statekit warm: start to all records in", w["seconds"], "s"),
        Figure("statekit cold: start to all records in", c["seconds"], "s"),
        Figure("Quix Streams: changelog records restored", r["quix_changelog_records"],
               "records"),
        Figure("statekit: changelog records restored", r["statekit_changelog_records"],
               "records"),
        Figure(restore, r["quix_restore"]["restore_s"], "s"),
        Figure("statekit: restore_stores of its changelog", r["statekit_restore_s"], "s",
               baseline=restore, ratio=r["statekit_restore_s"] / r["quix_restore"]["restore_s"]),
        Figure("final windows that agree",
               r["windows"]["windows_compared"] - r["windows"]["windows_differing"], "windows"),
        Figure("final windows that differ", r["windows"]["windows_differing"], "windows"),
    ]


def _quix_version() -> str:
    from importlib.metadata import version

    return version("quixstreams")


def _print(r: dict) -> None:
    q, qr, c, w, a = (r["quix"], r["quix_restore"], r["statekit_cold"], r["statekit_warm"],
                      r["windows"])
    rows = [
        ("steady rec/s: Quix", f"{q['steady_records_per_s']:,.0f} "
                               f"(on {q['steady_cores']:.2f} cores)"),
        ("steady rec/s: statekit warm", f"{w['steady_records_per_s']:,.0f}  "
                                        f"({r['ratio_steady_warm']:.2f}× Quix)"),
        ("steady rec/s: statekit cold", f"{c['steady_records_per_s']:,.0f}  "
                                        f"({r['ratio_steady_cold']:.2f}× Quix)"),
        ("start to all records in: Quix", f"{q['process_wall_s']:.1f} s "
                                          f"({r['records'] / q['process_wall_s']:,.0f} rec/s)"),
        ("start to all records in: statekit warm / cold",
         f"{w['seconds']:.1f} s / {c['seconds']:.1f} s "
         f"({w['records_per_s']:,.0f} / {c['records_per_s']:,.0f} rec/s)"),
        ("start-up: Quix to first record", f"{q['to_first_record_s']:.1f} s (imports "
                                           f"{q['import_s']:.1f} s, then group join + topic "
                                           f"set-up {q['run_to_first_record_s']:.1f} s)"),
        ("start-up: statekit to first batch, warm / cold",
         f"{w['to_first_batch_s']:.1f} s / {c['to_first_batch_s']:.1f} s (no group join: "
         "assign())"),
        ("cores used: Quix (whole child)", f"{q['process_cores']:.2f}"),
        ("cores used: statekit warm / cold", f"{w['cores']:.2f} / {c['cores']:.2f} "
                                             "(JVM + Python workers + driver)"),
        ("restore: Quix changelog", f"{qr['restore_s']:.2f} s, "
                                    f"{r['quix_changelog_records']:,} records "
                                    f"(child wall {qr['process_wall_s']:.1f} s)"),
        ("restore: statekit restore_stores", f"{r['statekit_restore_s']:.2f} s, "
                                             f"{r['statekit_changelog_records']:,} records "
                                             f"({r['ratio_restore_s']:.2f}× faster)"),
        ("final windows compared", f"{a['windows_compared']:,} agree, "
                                   f"{a['windows_differing']} differ; only Quix "
                                   f"{a['only_quix']}, only statekit {a['only_statekit']}"),
        ("records counted: Quix / statekit", f"{a['records_in_quix_windows']:,} / "
                                             f"{a['records_in_statekit_windows']:,}"),
        ("load average before → after", f"{r['load_average_before']} → "
                                        f"{r['load_average_after']} (2 cores, shared)"),
    ]
    print_table(f"Quix Streams {r['quixstreams']} vs statekit, {r['records']:,} records, "
                f"batches of {r['batch']:,}", rows)


def main(argv: list[str] | None = None) -> dict | None:
    parser = argparse.ArgumentParser(prog="python -m bench.peer", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=100_000, help="events to process")
    parser.add_argument("--batch", type=int, default=20_000,
                        help="statekit: records per micro-batch (maxOffsetsPerTrigger)")
    parser.add_argument("--quix-worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quix_worker:
        spec = Path(args.quix_worker)
        out = quix_worker(json.loads(spec.read_text()))
        spec.with_suffix(".out.json").write_text(json.dumps(out))
        return None
    if args.records < 10 * PLAYERS or args.batch < 1:
        parser.error(f"--records must be at least {10 * PLAYERS} and --batch at least 1; "
                     f"got {args.records} and {args.batch}")
    if not quix_installed():
        parser.exit(2, "bench.peer needs Quix Streams, the optional 'bench' extra: "
                       "pip install 'statekit[bench]' (or pip install quixstreams)\n")
    return run(args.records, args.batch)


if __name__ == "__main__":
    main()
