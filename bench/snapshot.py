"""Snapshot of an N-key state store into pandas: statekit vs Spark's raw ``statestore`` read.

Builds a real checkpoint (one available-now micro-batch of a windowed aggregation over
a parquet file stream with N distinct players, so the store holds N keys), then times
``StatefulQuery.snapshot()`` against ``spark.read.format("statestore")...toPandas()``
flattened to the same columns. Ratio = statekit / baseline (target <= 1.0).

    python -m bench.snapshot --keys 1000000 --repeats 5
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from bench.common import median, print_table, session, timed, verdict, write_result
from bench.results import Figure, Run

AGGREGATES = ["count", "sum(score)", "max(score)"]
BASE_TS = "2024-01-01 00:00:00"


def write_input(spark, folder: str, keys: int) -> None:
    """Parquet with ``keys`` distinct players, all inside one hour window."""
    from pyspark.sql import functions as F

    (spark.range(keys)
     .select(F.concat(F.lit("p"), F.col("id").cast("string")).alias("player"),
             (F.lit(BASE_TS).cast("timestamp")
              + F.make_interval(secs=(F.col("id") % 60).cast("int"))).alias("ts"),
             (F.col("id") % 100).alias("score"))
     .write.mode("overwrite").parquet(folder))


def build_checkpoint(spark, work: Path, keys: int):
    """Run the aggregation once (available-now) so the store holds ``keys`` keys."""
    import statekit as sk

    write_input(spark, str(work / "input"), keys)
    stream = spark.readStream.schema("player string, ts timestamp, score long").parquet(
        str(work / "input"))
    query = sk.start_query(stream, spark=spark, keys=["player"], window=sk.tumbling("1 hour"),
                           aggregates=AGGREGATES, watermark="1 day", name="bench_snapshot",
                           checkpoint=str(work / "checkpoint"), trigger="available-now")
    query.query.awaitTermination()
    query.close()
    if query.query.exception() is not None:
        raise RuntimeError(f"building the checkpoint failed: {query.query.exception()}")
    return query


def raw_snapshot(spark, checkpoint: str):
    """Baseline: Spark's own state read, flattened to comparable columns, into pandas."""
    from pyspark.sql import functions as F

    raw = spark.read.format("statestore").load(checkpoint)
    return raw.select(F.col("key.window.start").alias("window_start"),
                      F.col("key.window.end").alias("window_end"),
                      "key.player", "value.*", "partition_id").toPandas()


def one_round(spark, query, batch: int) -> tuple[dict, dict]:
    """(seconds, rows) of one statekit snapshot, one baseline read and statekit's parts."""
    t_sk, sk_frame = timed(query.snapshot)
    t_raw, raw_frame = timed(lambda: raw_snapshot(spark, str(query.checkpoint)))
    t_lookup, _ = timed(query.reader.batch_range)
    t_frame, unsorted = timed(lambda: query.reader.snapshot_frame(batch).toPandas())
    t_sort, _ = timed(lambda: unsorted.sort_values(query.spec.key_columns, kind="stable"))
    seconds = {"statekit": t_sk, "baseline": t_raw, "statekit_batch_lookup": t_lookup,
               "statekit_frame_to_pandas": t_frame, "statekit_pandas_sort": t_sort}
    return seconds, {"statekit": len(sk_frame), "baseline": len(raw_frame)}


def measure(spark, query, repeats: int) -> dict:
    """Alternate statekit and baseline reads (one warm-up round); medians in seconds."""
    batch = query.last_batch
    one_round(spark, query, batch)  # warm-up
    runs: dict[str, list[float]] = {}
    rows = {}
    for _ in range(repeats):
        seconds, rows = one_round(spark, query, batch)
        for key, value in seconds.items():
            runs.setdefault(key, []).append(value)
    return {"rows": rows, "runs_s": runs, "median_s": {k: median(v) for k, v in runs.items()}}


def run(keys: int = 1_000_000, repeats: int = 5, workdir: str | None = None) -> dict:
    """Build the checkpoint, time both reads, write and print the figures."""
    started = Run("snapshot")
    spark = session()
    work = Path(workdir or tempfile.mkdtemp(prefix="statekit-bench-snapshot-"))
    try:
        t_build, query = timed(lambda: build_checkpoint(spark, work, keys))
        figures = measure(spark, query, repeats)
    finally:
        if workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    med = figures["median_s"]
    ratio = med["statekit"] / med["baseline"]
    result = {"keys": keys, "repeats": repeats, "build_checkpoint_s": t_build,
              "ratio_statekit_over_baseline": ratio, "target": "<= 1.0",
              "target_met": ratio <= 1.0, "rows_ok": all(n == keys for n in
                                                         figures["rows"].values()),
              **figures}
    write_result(started, figures_of(result), result)
    report(result)
    return result


def figures_of(r: dict) -> list[Figure]:
    """The results file's figures: medians in seconds, statekit against the baseline read."""
    med, keys = r["median_s"], f"{r['keys']:,} keys"
    base = f"baseline: statestore read + toPandas, {keys}"
    return [
        Figure(base, med["baseline"], "s"),
        Figure(f"statekit: query.snapshot(), {keys}", med["statekit"], "s", baseline=base,
               ratio=r["ratio_statekit_over_baseline"], target="ratio <= 1.0"),
        Figure("of which: batch lookup", med["statekit_batch_lookup"], "s"),
        Figure("of which: frame toPandas", med["statekit_frame_to_pandas"], "s"),
        Figure("of which: pandas sort", med["statekit_pandas_sort"], "s"),
        Figure("building the checkpoint", r["build_checkpoint_s"], "s"),
    ]


def report(r: dict) -> None:
    med = r["median_s"]
    print_table(f"snapshot of a {r['keys']:,}-key store into pandas (median of {r['repeats']})", [
        ("ratio statekit / baseline", verdict(r["ratio_statekit_over_baseline"], "<= 1.0",
                                              r["target_met"])),
        ("statekit snapshot()", f"{med['statekit']:.2f} s, {r['rows']['statekit']:,} rows"),
        ("baseline statestore read",f"{med['baseline']:.2f} s, {r['rows']['baseline']:,} rows"),
        ("  of which: batch lookup", f"{med['statekit_batch_lookup']:.2f} s (state-metadata read)"),
        ("  of which: frame toPandas", f"{med['statekit_frame_to_pandas']:.2f} s (with lookup)"),
        ("  of which: pandas sort", f"{med['statekit_pandas_sort']:.2f} s (sort_values by keys)"),
        ("rows == keys", str(r["rows_ok"])),
        ("building the checkpoint", f"{r['build_checkpoint_s']:.1f} s"),
    ])


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m bench.snapshot", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keys", type=int, default=1_000_000, help="keys in the store")
    parser.add_argument("--repeats", type=int, default=5, help="timed reads of each kind")
    parser.add_argument("--workdir", help="keep input and checkpoint here (default: temp)")
    args = parser.parse_args(argv)
    return run(args.keys, args.repeats, args.workdir)


if __name__ == "__main__":
    main()
