"""The RocksDB tuning presets measured: the same windowed aggregation under each, in one run.

For each configuration — Spark's defaults (the baseline), the presets of
``statekit.spark.tuning`` (``write_heavy``, ``read_heavy``, ``memory_bounded``) and
``memory_bounded_tight`` (the bounded preset with a 64 MB budget this run outgrows: what
the cap does when it binds) — a fresh Python process starts its own Spark session with
the settings (so they apply from the JVM's start: a bounded block cache is created once
per JVM), then runs the same query: Spark's ``rate-micro-batch`` source shaped like game
events, ``K`` players drawn at random (``abs(hash(value)) % K``, so each batch touches
keys all over the store), a ``tumbling("1 hour")`` window (all events in one window),
count / sum / max of score, watermark 1 day, ``B`` rows a batch, ``P`` state partitions
(default 1: one store instance holds everything, so its memtables outgrow a 64 MB write
buffer between two snapshots and its SST data outgrows the default 8 MB block cache),
trigger 100 ms, until the progress reports ``R`` input rows. Per configuration:

- **throughput**: R / seconds from ``start_query`` to the report that reaches R rows,
  and the median per-batch ``processedRowsPerSecond`` of the warm batches;
- **memory** (``statekit.monitor.memory_sizing``): peak and median ``memory_used``
  (memtables + block cache + indexes and filters) and the sizing rule's ceiling;
- **reads**: block cache hit ratio (all hits / all block reads), gets per put;
- **writes**: memtable flushes between snapshots (a full write buffer), write stalls;
- **checkpoint size**: bytes under the checkpoint's ``state/`` after the run, split into
  changelog files and snapshots (snapshots are uploaded by Spark's maintenance thread,
  asynchronously: whether the last one made it before the stop varies), and the peak SST
  size (what a snapshot uploads).

Each figure is printed as a ratio against the baseline of the same run (the machine is
shared: the seconds move, the ratios less). ``--repeats N`` runs every configuration N
times, alternating the order, and keeps medians. Figures go to ``bench/results/tuning.json``.

    python -m bench.tuning --records 1200000 --keys 1000000 --batch 60000 --partitions 1
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import median, print_table, write_result
from bench.results import Figure, Run

CONFIGS = ("default", "write_heavy", "read_heavy", "memory_bounded", "memory_bounded_tight")
#: ``memory_bounded`` with a budget this run's state outgrows: what the cap does when it binds.
TIGHT_MB = "64"
BASE_MS = 1_704_067_200_000  # 2024-01-01T00:00:00Z
#: Worker output line prefix (the rest of the line is JSON).
MARK = "TUNING-RESULT "


def _conf(name: str) -> dict[str, str]:
    from statekit.spark.tuning import PRESETS, key

    if name == "default":
        return {}
    if name == "memory_bounded_tight":
        return {**PRESETS["memory_bounded"], key("maxMemoryUsageMB"): TIGHT_MB}
    return dict(PRESETS[name])


def _tree_bytes(path: Path, suffix: str = "") -> int:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            if name.endswith(suffix):
                with contextlib.suppress(OSError):
                    total += os.path.getsize(os.path.join(root, name))
    return total


def worker(name: str, records: int, keys: int, batch: int, partitions: int, work: Path) -> dict:
    """Run the query once under configuration ``name`` in this (fresh) process."""
    from pyspark.sql import functions as F

    import statekit as sk
    from statekit.monitor import memory_estimate, rocksdb_metrics, wide

    conf = _conf(name)
    spark = sk.spark_session("local[2]", app_name=f"statekit-bench-tuning-{name}",
                             shuffle_partitions=partitions, conf=conf)
    raw = (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", batch)
           .option("advanceMillisPerBatch", 1000).option("startTimestamp", BASE_MS)
           .option("numPartitions", 2).load())
    events = raw.select(
        F.concat(F.lit("p"), F.lpad((F.abs(F.hash("value")) % keys).cast("string"), 7, "0"))
        .alias("player"), (F.col("value") % 100).alias("score"), F.col("timestamp").alias("ts"))
    checkpoint = work / f"ck-{name}-{time.monotonic_ns()}"
    start = time.perf_counter()
    query = sk.start_query(events, spark=spark, keys=["player"], window=sk.tumbling("1 hour"),
                           aggregates=["count", "sum(score)", "max(score)"], watermark="1 day",
                           name=f"tuning_{name}", checkpoint=str(checkpoint),
                           trigger="100 milliseconds")
    try:
        while sum(p["numInputRows"] for p in query.query.recentProgress) < records:
            if not query.is_active:
                raise RuntimeError(f"query under {name} stopped: {query.query.exception()}")
            time.sleep(0.02)
        seconds = time.perf_counter() - start
    finally:
        spark.sparkContext.setLogLevel("FATAL")   # stopping mid-batch is not an error here
        query.close()
    time.sleep(1.0)   # the progress listener writes the last report
    progress = query.progress()
    metrics = wide(rocksdb_metrics(progress))
    busy = progress[progress["input_rows"] > 0]
    warm = busy.iloc[1:] if len(busy) > 1 else busy
    hits = float(metrics.get("block_cache_hits", 0).sum())
    misses = float(metrics.get("block_cache_misses", 0).sum())
    peak = float(metrics["memory_used"].max())
    row_bytes = float(metrics["bytes_written"].sum() / max(metrics["puts"].sum(), 1))
    estimate = memory_estimate(keys, row_bytes, partitions, conf=conf)
    snapshots = metrics["commit_checkpoint"].fillna(0) > 0       # batches that made a snapshot
    flushes = metrics["flush_bytes_written"].fillna(0) > 0
    figures = {
        "config": name, "conf": conf, "seconds": seconds, "records": records,
        "records_per_s": records / seconds, "batches": int(len(busy)),
        "median_batch_rows_per_s": float(median(
            warm["processed_rows_per_second"].astype(float).tolist())),
        "memory_peak_bytes": peak, "memory_median_bytes": float(metrics["memory_used"].median()),
        "memory_ceiling_bytes": estimate.ceiling,
        "block_cache_hit_ratio": hits / (hits + misses) if hits + misses else None,
        "gets_per_put": float(metrics["gets"].sum() / max(metrics["puts"].sum(), 1)),
        "write_stall_ms": float(metrics.get("write_stall_time", 0).sum()),
        "flush_bytes": float(metrics.get("flush_bytes_written", 0).sum()),
        "flushes_between_snapshots": int((flushes & ~snapshots).sum()),
        "sst_bytes_peak": float(metrics["sst_size"].max()),
        "state_rows_reported": int(progress["state_rows_total"].iloc[-1]),
        "checkpoint_state_bytes": _tree_bytes(checkpoint / "state"),
        "checkpoint_changelog_bytes": _tree_bytes(checkpoint / "state", ".changelog"),
        "checkpoint_snapshot_bytes": _tree_bytes(checkpoint / "state", ".zip")
        + _tree_bytes(checkpoint / "state", ".sst"),
        "load_average": os.getloadavg(),
    }
    spark.stop()
    return figures


def run_one(name: str, records: int, keys: int, batch: int, partitions: int, work: Path,
            timeout: float = 1800.0) -> dict:
    """``worker`` in a fresh process (its own JVM); its figures."""
    cmd = [sys.executable, "-m", "bench.tuning", "--worker", name, "--records", str(records),
           "--keys", str(keys), "--batch", str(batch), "--partitions", str(partitions),
           "--workdir", str(work)]
    started = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                         cwd=Path(__file__).resolve().parents[1])
    lines = [line for line in out.stdout.splitlines() if line.startswith(MARK)]
    if out.returncode != 0 or not lines:
        raise RuntimeError(f"the {name} run failed (exit {out.returncode}):\n"
                           f"{out.stderr[-3000:]}")
    figures = json.loads(lines[-1][len(MARK):])
    figures["process_seconds"] = time.perf_counter() - started
    return figures


def _ratio(value, base) -> str:
    if value is None or base in (None, 0):
        return "n/a"
    return f"{value / base:.2f}"


def figures_of(summary: dict) -> list[Figure]:
    """The results file's figures: each preset's throughput, memory, cache hit ratio, gets
    per put and checkpoint size; rates, memory and size against the defaults of the run."""
    out = []
    for name, s in summary.items():
        label = "default (baseline)" if name == "default" else name
        for key, what, unit, scale in (("records_per_s", "throughput", "rows/s", 1),
                                       ("median_batch_rows_per_s", "per-batch rate", "rows/s", 1),
                                       ("memory_peak_bytes", "peak memory", "MiB", 2**20),
                                       ("memory_median_bytes", "median memory", "MiB", 2**20),
                                       ("block_cache_hit_ratio", "block cache hit ratio", "", 1),
                                       ("gets_per_put", "gets per put", "", 1),
                                       ("checkpoint_state_bytes", "checkpoint state/", "MiB",
                                        2**20),
                                       ("checkpoint_changelog_bytes",
                                        "checkpoint state/: changelog files", "MiB", 2**20),
                                       ("checkpoint_snapshot_bytes",
                                        "checkpoint state/: snapshots", "MiB", 2**20)):
            value = None if s[key] is None else s[key] / scale
            base = summary["default"][key]
            compare = name != "default" and key in ("records_per_s", "median_batch_rows_per_s",
                                                    "memory_peak_bytes", "memory_median_bytes",
                                                    "checkpoint_state_bytes")
            out.append(Figure(
                f"{label}: {what}", value, unit,
                baseline=f"default (baseline): {what}" if compare else None,
                ratio=(s[key] / base) if compare and s[key] is not None and base else None))
    return out


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m bench.tuning", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_200_000, help="input rows per run")
    parser.add_argument("--keys", type=int, default=1_000_000, help="distinct players")
    parser.add_argument("--batch", type=int, default=60_000, help="rows per micro-batch")
    parser.add_argument("--partitions", type=int, default=1,
                        help="shuffle partitions = state store instances")
    parser.add_argument("--repeats", type=int, default=1, help="runs per configuration")
    parser.add_argument("--only", nargs="+", choices=CONFIGS, help="configurations to run")
    parser.add_argument("--workdir", help="keep checkpoints there (default: a temp dir)")
    parser.add_argument("--worker", choices=CONFIGS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    work = Path(args.workdir or tempfile.mkdtemp(prefix="statekit-bench-tuning-"))
    work.mkdir(parents=True, exist_ok=True)
    if args.worker:
        figures = worker(args.worker, args.records, args.keys, args.batch, args.partitions,
                         work)
        print(MARK + json.dumps(figures, default=str), flush=True)
        return figures

    started = Run("tuning")
    configs = list(args.only or CONFIGS)
    if "default" not in configs:
        configs.insert(0, "default")
    print(f"tuning: {args.records:,} rows, {args.keys:,} keys, batches of {args.batch:,}, "
          f"{args.partitions} state partition(s), {args.repeats} run(s) per configuration; "
          f"load average "
          f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    runs: dict[str, list[dict]] = {c: [] for c in configs}
    try:
        for repeat in range(args.repeats):
            order = configs if repeat % 2 == 0 else configs[::-1]
            for name in order:
                figures = run_one(name, args.records, args.keys, args.batch, args.partitions,
                                  work)
                runs[name].append(figures)
                print(f"  {name:<15} {figures['records_per_s']:>10,.0f} rows/s  peak "
                      f"{figures['memory_peak_bytes'] / 2**20:7.1f} MiB  state/ "
                      f"{figures['checkpoint_state_bytes'] / 2**20:7.1f} MiB  load "
                      f"{figures['load_average'][0]:.1f}", flush=True)
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)

    def med(name: str, key: str):
        values = [r[key] for r in runs[name] if r.get(key) is not None]
        return statistics.median(values) if values else None

    keys = ("records_per_s", "median_batch_rows_per_s", "memory_peak_bytes",
            "memory_median_bytes", "block_cache_hit_ratio", "gets_per_put",
            "checkpoint_state_bytes", "checkpoint_changelog_bytes", "checkpoint_snapshot_bytes",
            "sst_bytes_peak", "flushes_between_snapshots", "write_stall_ms")
    summary = {name: {k: med(name, k) for k in keys} for name in configs}
    base = summary["default"]
    for name in configs:
        s = summary[name]
        hit = s["block_cache_hit_ratio"]
        print_table(f"{name} (ratio to default)", [
            ("throughput", f"{_ratio(s['records_per_s'], base['records_per_s'])}  "
                           f"({s['records_per_s']:,.0f} rows/s)"),
            ("per-batch rate", _ratio(s["median_batch_rows_per_s"],
                                      base["median_batch_rows_per_s"])),
            ("peak memory", f"{_ratio(s['memory_peak_bytes'], base['memory_peak_bytes'])}  "
                            f"({s['memory_peak_bytes'] / 2**20:,.1f} MiB)"),
            ("median memory", _ratio(s["memory_median_bytes"], base["memory_median_bytes"])),
            ("checkpoint state/",
             f"{_ratio(s['checkpoint_state_bytes'], base['checkpoint_state_bytes'])}  "
             f"({s['checkpoint_state_bytes'] / 2**20:,.1f} MiB: changelog files "
             f"{s['checkpoint_changelog_bytes'] / 2**20:,.1f}, snapshots "
             f"{s['checkpoint_snapshot_bytes'] / 2**20:,.1f})"),
            ("SST files (peak)", f"{_ratio(s['sst_bytes_peak'], base['sst_bytes_peak'])}  "
                                 f"({s['sst_bytes_peak'] / 2**20:,.1f} MiB)"),
            ("block cache hit ratio", "n/a" if hit is None else f"{hit:.3f}"),
            ("gets per put", f"{s['gets_per_put']:.2f}"),
            ("flushes between snapshots", f"{s['flushes_between_snapshots']:.0f}"),
            ("write stalls", f"{s['write_stall_ms']:.0f} ms"),
        ])
    path = write_result(started, figures_of(summary), {"records": args.records, "keys": args.keys,
                                   "batch": args.batch, "partitions": args.partitions,
                                   "repeats": args.repeats,
                                   "summary": summary, "runs": runs,
                                   "load_average_end": os.getloadavg()})
    print(f"\nfigures: {path}")
    return summary


if __name__ == "__main__":
    main()
