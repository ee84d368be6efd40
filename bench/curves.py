"""Cost curves from 10k to 1M state keys (10M opt-in): every statekit step against its baseline.

For each size N it builds a real checkpoint like ``bench.snapshot`` (a tumbling-window
count / sum / max over a parquet file stream with N players: batch 0 puts N keys), then
restarts the query on the same checkpoint with a second file updating N/10 of those keys
(batch 1), and measures, each step against a baseline taken in the same run:

============================  ===============================================================
step                          baseline
============================  ===============================================================
Spark's restart restore       the restarted query's first batch (Spark loads the N-key state,
                              then updates N/10 keys) vs a fresh query over the same N/10 rows
snapshot (time, peak memory)  ``query.snapshot()`` vs Spark's ``statestore`` read + toPandas
change feed                   ``query.changes(from_batch=0)`` vs raw ``readChangeFeed`` + toPandas
                              (up to ``RAW_CHANGE_FEED_UP_TO`` keys: 1M)
changelog read                ``read_changelog`` (pandas) vs a bare consume of the topic
compaction                    ``compact()`` vs pandas ``drop_duplicates(keep="last")`` on key
restore, raw log              ``restore_stores`` (RocksDB) vs a bare consume of the topic
restore, compacted log        ``restore_stores`` of ``compacted_copy`` vs a bare consume of it
point query                   ``ServingInstance.get`` p50 / p99 vs ``store.get_raw(bytes)``
scatter-gather                ``ServingClient.top_k`` over 2 instances vs snapshot + nlargest
============================  ===============================================================

Peak memory is the peak resident set of this process and all its children (the Spark
JVM, Python workers, the broker) above what it was before the step, sampled every 20 ms.
Results go to ``bench/results/curves.json`` (rewritten after each size) and a log-log
chart of seconds and bytes vs keys to ``bench/curves.svg`` and ``bench/curves.png``.

    python -m bench.curves                       # 10k, 100k, 1M keys
    python -m bench.curves --sizes 10000 100000  # a quicker run
    python -m bench.curves --ten-million         # adds the opt-in 10M size
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import math
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from bench.common import print_table, session, timed, write_result
from bench.results import Figure, Run
from bench.snapshot import AGGREGATES, BASE_TS, build_checkpoint, raw_snapshot
from statekit.processes import descendants

HERE = Path(__file__).resolve().parent
CHART = HERE / "curves"
SIZES = (10_000, 100_000, 1_000_000)
TEN_MILLION = 10_000_000
UPDATE_SHARE = 10   # batch 1 updates N / UPDATE_SHARE keys
#: the largest size whose change-feed baseline (Spark's readChangeFeed + toPandas) runs: it
#: peaks at 1.2 GB at 1M keys and grows linearly, and a first 10M run was killed by the OOM
#: killer at 16 GB of Python memory beside the driver JVM and the broker on a 24 GB machine
RAW_CHANGE_FEED_UP_TO = 1_000_000
LOOKUPS = 2000

#: (step, what statekit does, its baseline) in the order of the table
STEPS = [
    ("spark restart restore", "restarted query, first batch", "fresh query, same batch"),
    ("snapshot", "query.snapshot()", "statestore + toPandas"),
    ("change feed", "query.changes(from_batch=0)", "readChangeFeed + toPandas"),
    ("changelog read", "read_changelog", "bare consume"),
    ("compaction", "compact()", "drop_duplicates(key)"),
    ("restore raw log", "restore_stores", "bare consume"),
    ("restore compacted", "restore_stores (compacted copy)", "bare consume of the copy"),
    ("point query p99", "ServingInstance.get", "store.get_raw"),
    ("scatter-gather top_k", "ServingClient.top_k, 2 instances", "snapshot + nlargest"),
]


# --- measuring -----------------------------------------------------------------------------
def _tree_pids(root: int) -> list[int]:
    """``root`` and all its descendants (Linux /proc; just ``root`` elsewhere)."""
    return [root, *descendants(root)]


def _rss(pids: list[int]) -> int:
    page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/statm") as f:
                total += int(f.read().split()[1]) * page
        except OSError:
            continue
    return total


def release_memory() -> None:
    """Give back what this process freed: Python's garbage, Arrow's pool, glibc's arenas
    (each step's peak is then measured from what it really holds)."""
    import ctypes

    import pyarrow as pa

    gc.collect()
    pa.default_memory_pool().release_unused()
    with contextlib.suppress(OSError, AttributeError):   # not glibc
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def measured(fn: Callable[[], Any]) -> tuple[float, Any, int]:
    """(seconds, result, peak resident bytes of this process tree above its level before)."""
    release_memory()
    pids = _tree_pids(os.getpid())
    before = _rss(pids)
    peak = [before]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.02):
            peak[0] = max(peak[0], _rss(pids))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        seconds, result = timed(fn)
    finally:
        done.set()
        sampler.join()
    peak[0] = max(peak[0], _rss(pids))
    return seconds, result, peak[0] - before


def load_average() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def _dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())


# --- building the state --------------------------------------------------------------------
def _update_input(spark, folder: Path, keys: int) -> None:
    """A parquet file updating the first ``keys // UPDATE_SHARE`` players in the same window."""
    from pyspark.sql import functions as F

    (spark.range(max(1, keys // UPDATE_SHARE))
     .select(F.concat(F.lit("p"), F.col("id").cast("string")).alias("player"),
             (F.lit(BASE_TS).cast("timestamp") + F.make_interval(secs=F.lit(30))).alias("ts"),
             F.lit(7).cast("long").alias("score"))
     .write.mode("append").parquet(str(folder)))


def _run_available_now(spark, input_dir: Path, checkpoint: Path, name: str):
    """Start the aggregation on ``input_dir`` (available-now) and wait for it to finish."""
    import statekit as sk

    stream = spark.readStream.schema("player string, ts timestamp, score long").parquet(
        str(input_dir))
    query = sk.start_query(stream, spark=spark, keys=["player"], window=sk.tumbling("1 hour"),
                           aggregates=AGGREGATES, watermark="1 day", name=name,
                           checkpoint=str(checkpoint), trigger="available-now")
    query.query.awaitTermination()
    query.close()
    if query.query.exception() is not None:
        raise RuntimeError(f"query {name!r} failed: {query.query.exception()}")
    return query


def spark_restart(spark, work: Path, keys: int) -> tuple[dict, Any]:
    """Restart on the N-key checkpoint with an N/10-key update vs a fresh query on it alone."""
    updates = work / "updates"
    _update_input(spark, updates, keys)
    shutil.copytree(updates, work / "input", dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("_SUCCESS", ".*"))
    fresh_s, _ = timed(lambda: _run_available_now(spark, updates, work / "fresh-ck",
                                                  "bench_curves_fresh"))
    import statekit as sk

    before = sk.Checkpoint(str(work / "checkpoint")).last_batch
    restart_s, query = timed(lambda: _run_available_now(spark, work / "input",
                                                        work / "checkpoint", "bench_snapshot"))
    if query.last_batch <= before:
        raise RuntimeError(f"the restart committed no batch after {before}")
    return {"statekit": restart_s, "baseline": fresh_s, "batches_before": before,
            "last_batch": query.last_batch}, query


# --- the steps -----------------------------------------------------------------------------
def raw_change_feed(spark, checkpoint: str):
    """Spark's own change feed of every batch, into pandas, as it comes."""
    return (spark.read.format("statestore").option("readChangeFeed", "true")
            .option("changeStartBatchId", 0).load(checkpoint).toPandas())


def bare_consume(bootstrap: str, topic: str) -> int:
    """Every record of every partition of ``topic`` touched (key, value, headers)."""
    from statekit.kafka.clients import plain_consumer
    from statekit.kafka.offsets import consume_ranges, end_offsets
    from statekit.kafka.topics import partition_count

    consumer = plain_consumer(bootstrap)
    n = 0
    try:
        ranges = end_offsets(consumer, topic, list(range(partition_count(bootstrap, topic))))
        for chunk in consume_ranges(consumer, topic, ranges, chunk=50_000):
            for msg in chunk:
                msg.key(), msg.value(), msg.headers()
            n += len(chunk)
    finally:
        consumer.close()
    return n


def one_size(spark, broker, keys: int, work: Path) -> dict:
    """Every step at ``keys`` state keys: {step: {statekit, baseline, ...}} plus build figures."""
    from bench.serving import leaderboard, local_lookups, sample_keys
    from statekit.changelog.compaction import compact
    from statekit.changelog.reader import read_changelog
    from statekit.changelog.writer import ChangelogWriter
    from statekit.restore import compacted_copy, restore_stores
    from statekit.serve import ServingInstance, serve

    out: dict[str, Any] = {"keys": keys, "load_average": {"start": load_average()}}
    steps: dict[str, dict] = {}

    def step(name: str) -> None:   # a 10M size runs for half an hour: say where it is
        release_memory()
        done = {k: {n: v for n, v in f.items() if isinstance(v, (int, float))}
                for k, f in steps.items()}
        print(f"[{keys:,} keys] {name} (load {load_average()}; so far {done})", flush=True)

    step("building the checkpoint")
    out["build_s"], _ = timed(lambda: build_checkpoint(spark, work, keys))
    step("spark restart restore")
    steps["spark restart restore"], query = spark_restart(spark, work, keys)
    out["checkpoint_state_bytes"] = _dir_bytes(work / "checkpoint" / "state")
    checkpoint = str(query.checkpoint)

    step("snapshot")
    t_sk, frame, mem_sk = measured(query.snapshot)
    t_raw, raw, mem_raw = measured(lambda: raw_snapshot(spark, checkpoint))
    if len(frame) != keys or len(raw) != keys:
        raise RuntimeError(f"snapshot rows {len(frame)} / {len(raw)}, expected {keys}")
    steps["snapshot"] = {"statekit": t_sk, "baseline": t_raw, "statekit_peak_bytes": mem_sk,
                         "baseline_peak_bytes": mem_raw,
                         "frame_bytes": int(frame.memory_usage(deep=True).sum())}
    del frame, raw
    step("change feed")
    t_sk, changes, mem_sk = measured(lambda: query.changes(from_batch=0))
    changed = len(changes)
    del changes
    t_raw = mem_raw = None
    if keys <= RAW_CHANGE_FEED_UP_TO:
        t_raw, raw, mem_raw = measured(lambda: raw_change_feed(spark, checkpoint))
        if len(raw) != changed:
            raise RuntimeError(f"change feed rows {changed} / {len(raw)}")
        del raw
    if changed < keys + max(1, keys // UPDATE_SHARE):
        raise RuntimeError(f"change feed rows {changed}, expected at least "
                           f"{keys + max(1, keys // UPDATE_SHARE)}")
    steps["change feed"] = {"statekit": t_sk, "baseline": t_raw, "statekit_peak_bytes": mem_sk,
                            "baseline_peak_bytes": mem_raw, "rows": changed}
    out["load_average"]["kafka"] = load_average()

    topic = f"bench-curves-{keys}-counts-changelog"
    step("changelog: ship, read, compact")
    writer = ChangelogWriter(query.reader, broker, topic)
    out["ship_s"], _ = timed(writer.ship)
    writer.stop()
    bootstrap = broker.bootstrap_servers
    consume_s, consumed = timed(lambda: bare_consume(bootstrap, topic))
    read_s, log, mem_read = measured(lambda: read_changelog(bootstrap, topic, progress=False))
    if consumed != len(log) or len(log) != changed:
        raise RuntimeError(f"changelog records {consumed} / {len(log)}, expected {changed} "
                           f"(the change feed's rows)")
    steps["changelog read"] = {"statekit": read_s, "baseline": consume_s,
                               "statekit_peak_bytes": mem_read, "records": len(log)}
    compact_s, kept = timed(lambda log=log: compact(log))
    dedup_s, dedup = timed(lambda log=log: log.records.drop_duplicates("key", keep="last"))
    steps["compaction"] = {"statekit": compact_s, "baseline": dedup_s, "kept": len(kept),
                           "baseline_kept": len(dedup)}
    del log, kept, dedup
    step("restore")
    restore_dir = work / "restored"
    restore_s, restored = timed(lambda: restore_stores(bootstrap, topic, query.spec,
                                                       restore_dir, progress=False))
    restored_records = int(restored.report["records"].sum())
    restored.close()
    steps["restore raw log"] = {"statekit": restore_s, "baseline": consume_s,
                                "records": restored_records,
                                "store_bytes": _dir_bytes(restore_dir)}
    copy_s, copy = timed(lambda: compacted_copy(bootstrap, topic, progress=False))
    copy_consume_s, copy_records = timed(lambda: bare_consume(bootstrap, copy))
    compacted_s, compacted = timed(lambda: restore_stores(
        bootstrap, copy, query.spec, work / "compacted", store_name="counts", progress=False))
    compacted_records = int(compacted.report["records"].sum())
    compacted.close()
    if compacted_records != copy_records or copy_records != keys:
        raise RuntimeError(f"compacted copy {copy_records} / restored {compacted_records}, "
                           f"expected {keys}")
    steps["restore compacted"] = {"statekit": compacted_s, "baseline": copy_consume_s,
                                  "records": compacted_records, "copy_s": copy_s}
    out["load_average"]["serving"] = load_average()

    step("serving")
    instance = ServingInstance("solo", broker, topic, work / "solo")
    try:
        out["instance_restore_s"], _ = timed(lambda: instance.start().wait_ready(timeout=1800))
        sample = sample_keys(keys, LOOKUPS, seed=7)
        point = local_lookups(instance, sample, warmup=min(500, LOOKUPS))
        if point["instance_get"]["found"] != LOOKUPS:
            raise RuntimeError(f"point queries found {point['instance_get']['found']} of "
                               f"{LOOKUPS} keys")
        steps["point query p99"] = {"statekit": point["instance_get"]["p99_us"] / 1e6,
                                    "baseline": point["raw_get_raw"]["p99_us"] / 1e6,
                                    "statekit_p50_s": point["instance_get"]["p50_us"] / 1e6,
                                    "baseline_p50_s": point["raw_get_raw"]["p50_us"] / 1e6}
        cluster_s, cluster = timed(lambda: serve(broker, topic, instances=2, standbys=0,
                                                 workdir=work / "cluster",
                                                 timeout=1800).wait_ready(timeout=1800))
        out["cluster_restore_s"] = cluster_s
        with cluster:
            client = cluster.client(timeout=120.0)
            top = leaderboard(query, instance, client, repeats=1)
            client.close()
        if not top["same_answer"]:
            raise RuntimeError("the served top_k differs from snapshot + nlargest")
        steps["scatter-gather top_k"] = {"statekit": top["median_s"]["routed_top_k"],
                                         "baseline": top["median_s"]["snapshot_nlargest"],
                                         "in_process_s": top["median_s"]["instance_top_k"]}
    finally:
        instance.close()
    for figures in steps.values():
        figures["ratio"] = (None if figures["baseline"] is None
                            else figures["statekit"] / figures["baseline"])
    out["steps"] = steps
    out["load_average"]["end"] = load_average()
    return out


# --- from figures to a table, a chart and a verdict ------------------------------------------
def curves_frame(sizes: list[dict]) -> pd.DataFrame:
    """One row per (keys, step, who): seconds, and bytes where measured.

    Example:
        >>> curves_frame([{"keys": 10, "steps": {"snapshot": {"statekit": 0.5, "baseline": 1.0,
        ...     "statekit_peak_bytes": 2048}}}])[["keys", "step", "who", "seconds", "bytes"]]
           keys      step       who  seconds   bytes
        0    10  snapshot  statekit      0.5  2048.0
        1    10  snapshot  baseline      1.0     NaN
    """
    rows = []
    for size in sizes:
        for step, f in size["steps"].items():
            for who in ("statekit", "baseline"):
                rows.append({"keys": size["keys"], "step": step, "who": who,
                             "seconds": f[who], "bytes": f.get(f"{who}_peak_bytes")})
    frame = pd.DataFrame(rows, columns=["keys", "step", "who", "seconds", "bytes"])
    frame["bytes"] = frame["bytes"].astype("float64")
    return frame


def exponents(frame: pd.DataFrame, column: str = "seconds") -> pd.DataFrame:
    """Log-log slope of ``column`` between consecutive sizes, per step and who (1 = linear).

    Example:
        >>> f = pd.DataFrame({"keys": [10, 100, 1000], "step": ["s"] * 3, "who": ["w"] * 3,
        ...                   "seconds": [1.0, 10.0, 200.0]})
        >>> exponents(f)[["step", "from_keys", "to_keys", "exponent"]]
          step  from_keys  to_keys  exponent
        0    s         10      100       1.0
        1    s        100     1000       1.3
    """
    rows = []
    for (step, who), group in frame.dropna(subset=[column]).groupby(["step", "who"], sort=False):
        group = group.sort_values("keys")
        pairs = zip(group.itertuples(index=False), list(group.itertuples(index=False))[1:],
                    strict=False)
        for a, b in pairs:
            va, vb = getattr(a, column), getattr(b, column)
            if va > 0 and vb > 0:
                rows.append({"step": step, "who": who, "from_keys": a.keys, "to_keys": b.keys,
                             "exponent": round(math.log(vb / va) / math.log(b.keys / a.keys),
                                               2)})
    return pd.DataFrame(rows, columns=["step", "who", "from_keys", "to_keys", "exponent"])


def linearity_text(frame: pd.DataFrame) -> list[str]:
    """A line per statekit step: the log-log exponents, and where cost stops being linear
    (exponent below 0.8: fixed costs still dominate; above 1.2: worse than linear)."""
    lines = []
    slopes = exponents(frame)
    for step, group in slopes[slopes["who"] == "statekit"].groupby("step", sort=False):
        parts = [f"{r.from_keys:,}→{r.to_keys:,}: {r.exponent:.2f}"
                 for r in group.itertuples(index=False)]
        last = group.iloc[-1]["exponent"]
        shape = ("sub-linear (fixed costs dominate)" if last < 0.8 else
                 "super-linear" if last > 1.2 else "linear")
        lines.append(f"{step}: exponents {', '.join(parts)} → {shape} at the top size")
    return lines


def curves_chart(frame: pd.DataFrame):
    """Log-log seconds vs keys (one line per step, solid statekit, dashed baseline) beside
    peak bytes vs keys. A pure function of ``curves_frame``.

    Example:
        >>> f = curves_frame([{"keys": k, "steps": {"snapshot": {"statekit": k / 1e5,
        ...     "baseline": k / 5e4, "statekit_peak_bytes": 100 * k}}} for k in (10, 100)])
        >>> spec = curves_chart(f).to_dict()
        >>> [c["encoding"]["y"]["scale"]["type"] for c in spec["hconcat"]]
        ['log', 'log']
    """
    import altair as alt

    seconds = frame[frame["seconds"] > 0]
    memory = frame.dropna(subset=["bytes"])
    memory = memory[memory["bytes"] > 0]
    x = alt.X("keys:Q", title="state keys", scale=alt.Scale(type="log"))
    colour = alt.Color("step:N", title="step", sort=[s for s, _, _ in STEPS])
    dash = alt.StrokeDash("who:N", title="who", sort=["statekit", "baseline"],
                          legend=alt.Legend(symbolType="stroke"))
    time_chart = alt.Chart(seconds).mark_line(point=True).encode(
        x=x, y=alt.Y("seconds:Q", title="seconds (log)", scale=alt.Scale(type="log")),
        color=colour, strokeDash=dash,
        tooltip=["step", "who", "keys", alt.Tooltip("seconds:Q", format=".4g")],
    ).properties(title="Seconds vs state keys", width=380, height=300)
    bytes_chart = alt.Chart(memory).mark_line(point=True).encode(
        x=x, y=alt.Y("bytes:Q", title="peak resident bytes above start (log)",
                     scale=alt.Scale(type="log")),
        color=colour, strokeDash=dash,
        tooltip=["step", "who", "keys", alt.Tooltip("bytes:Q", format=".3s")],
    ).properties(title="Peak memory vs state keys", width=300, height=300)
    return alt.hconcat(time_chart, bytes_chart).properties(
        title=alt.Title("statekit cost curves (solid) against same-run baselines (dashed)",
                        subtitle="log-log: a slope of 1 is linear in the number of keys"))


def table_rows(sizes: list[dict]) -> list[tuple[str, str]]:
    rows = []
    for size in sizes:
        for step, what, base in STEPS:
            f = size["steps"].get(step)
            if f is None:
                continue
            against = (f"{base} not run at this size" if f["baseline"] is None else
                       f"vs {f['baseline']:.4g} s ({base}) = {f['ratio']:.2f}×")
            rows.append((f"{size['keys']:>10,}  {step}", f"{f['statekit']:.4g} s ({what}) "
                                                           f"{against}"))
    return rows


def figures_of(sizes: list[dict]) -> list[Figure]:
    """The results file's figures: each size's steps, statekit against its baseline."""
    out = []
    for size in sizes:
        for step, what, base in STEPS:
            f = size["steps"].get(step)
            if f is None:
                continue
            # the point query's figures are p99 latencies: microseconds read better
            scale, unit = (1e6, "µs") if step == "point query p99" else (1, "s")
            prefix = f"{size['keys']:,} keys, {step}"
            if f["baseline"] is None:   # not run at this size (RAW_CHANGE_FEED_UP_TO)
                out.append(Figure(f"{prefix}: {what}", f["statekit"] * scale, unit))
            else:
                out += [Figure(f"{prefix}: {base}", f["baseline"] * scale, unit),
                        Figure(f"{prefix}: {what}", f["statekit"] * scale, unit,
                               baseline=f"{prefix}: {base}", ratio=f["ratio"])]
            if f.get("statekit_peak_bytes") and not f.get("baseline_peak_bytes"):
                out.append(Figure(f"{prefix}: {what}, peak memory",
                                  f["statekit_peak_bytes"] / 1e6, "MB"))
            if f.get("statekit_peak_bytes") and f.get("baseline_peak_bytes"):
                out += [Figure(f"{prefix}: {base}, peak memory", f["baseline_peak_bytes"] / 1e6,
                               "MB"),
                        Figure(f"{prefix}: {what}, peak memory", f["statekit_peak_bytes"] / 1e6,
                               "MB", baseline=f"{prefix}: {base}, peak memory",
                               ratio=f["statekit_peak_bytes"] / f["baseline_peak_bytes"])]
    return out


def save(sizes: list[dict], args: dict, run: Run) -> dict:
    """Write curves.json and the chart (SVG and PNG) for the sizes measured so far."""
    from statekit.charts import save_chart

    frame = curves_frame(sizes)
    result = {"sizes": sizes, "settings": args,
              "exponents": exponents(frame).to_dict("records"),
              "linearity": linearity_text(frame),
              "chart": [str(p.relative_to(HERE.parent)) for p in
                        save_chart(curves_chart(frame), CHART, formats=("svg", "png"))]}
    write_result(run, figures_of(sizes), result)
    return result


def big_state_conf(keys: int, driver_memory: str | None = None) -> dict[str, str] | None:
    """The session settings a run up to ``keys`` needs beyond statekit's defaults: at 10M
    keys, shipping the first changelog round collects Spark's change feed of 11M rows
    (1.3 GB of task results, over ``spark.driver.maxResultSize``'s 1 GB, and more than a
    4 GB heap holds), so a larger heap, no result-size cap, and a JVM that gives its unused
    heap back.

    Example:
        >>> big_state_conf(1_000_000), big_state_conf(1_000_000, "3g")
        (None, {'spark.driver.memory': '3g'})
        >>> sorted(big_state_conf(10_000_000))
        ['spark.driver.extraJavaOptions', 'spark.driver.maxResultSize', 'spark.driver.memory']
    """
    conf = {"spark.driver.memory": driver_memory} if driver_memory else {}
    if keys >= TEN_MILLION:
        from statekit.spark.session import driver_java_options
        from statekit.spark.worker_home import worker_spark_home

        # the heap the JVM no longer uses goes back to the OS while Python works (G1's
        # periodic collection): the JVM, Python's 11M-row frames and the broker do not fit
        # 24 GB together otherwise (two runs were OOM-killed at the changelog read)
        conf = {"spark.driver.memory": driver_memory or "8g", "spark.driver.maxResultSize": "0",
                "spark.driver.extraJavaOptions": f"{driver_java_options(worker_spark_home())} "
                                                 "-XX:G1PeriodicGCInterval=5000"}
    return conf or None


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m bench.curves", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES),
                        help="state keys per size (default: 10k, 100k, 1M)")
    parser.add_argument("--ten-million", action="store_true",
                        help="add the opt-in 10,000,000-key size")
    parser.add_argument("--driver-memory", default=None,
                        help="Spark driver heap (default: statekit's 2g; 8g with --ten-million)")
    parser.add_argument("--workdir", help="keep each size's files here (default: temp)")
    args = parser.parse_args(argv)
    sizes = sorted(set(args.sizes) | ({TEN_MILLION} if args.ten_million else set()))
    if any(k < 100 for k in sizes):
        parser.error(f"--sizes must be at least 100 keys each; got {sizes}")

    from statekit.kafka import EmbeddedBroker

    run = Run("curves")
    spark = session(conf=big_state_conf(max(sizes), args.driver_memory))
    measured_sizes: list[dict] = []
    result: dict = {}
    settings = {"sizes": sizes, "update_share": UPDATE_SHARE, "lookups": LOOKUPS,
                "session_conf": big_state_conf(max(sizes), args.driver_memory)}
    with EmbeddedBroker() as broker:
        for keys in sizes:
            work = Path(args.workdir or tempfile.mkdtemp(prefix="statekit-bench-curves-"))
            work = work / str(keys) if args.workdir else work
            try:
                started = time.perf_counter()
                figures = one_size(spark, broker, keys, work)
                figures["wall_s"] = time.perf_counter() - started
            finally:
                if not args.workdir:
                    shutil.rmtree(work, ignore_errors=True)
            measured_sizes.append(figures)
            result = save(measured_sizes, settings, run)
            print_table(f"cost at {keys:,} keys (wall {figures['wall_s']:.0f} s, load "
                        f"{figures['load_average']})", table_rows([figures]))
    print_table("where the cost stops being linear (log-log exponents, statekit)",
                [(line.split(":")[0], line.split(":", 1)[1]) for line in result["linearity"]])
    return result


if __name__ == "__main__":
    main()
