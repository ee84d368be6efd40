"""``statekit.diff`` of two snapshots of an N-key store against one snapshot read.

Builds a real checkpoint in two batches of a running aggregation over a parquet file
stream: batch 0 brings N distinct players, batch 1 the last tenth of them again (their
counts change) and 1% new players. Then times, alternating after a warm-up round:

- **statekit**: ``statekit.diff((query, 0), (query, 1))``: both snapshots read and joined by
  key in one Spark job, the differing keys (about 11% of N) into pandas, every kind counted;
- **baseline**: one snapshot of batch 1 into pandas with Spark's own reader
  (``spark.read.format("statestore")`` flattened, ``toPandas()``), as ``bench.snapshot``;
- **statekit, all keys differ**: the same store diffed against a second checkpoint where
  every key's count differs (the worst case: every key comes back).

Ratio = statekit / baseline (target <= 2.0, issue 41).

    python -m bench.diff --keys 1000000 --repeats 3
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from bench.common import median, print_table, session, timed, verdict, write_result
from bench.results import Figure, Run

AGGREGATES = ["count", "sum(score)", "max(score)"]
SCHEMA = "player string, ts timestamp, score long"


def write_players(spark, folder: str, first: int, count: int, score_plus: int = 0) -> None:
    """One parquet file (one batch) of players ``p<first>..p<first+count-1>``, one event each,
    scoring ``id % 100 + score_plus``."""
    from pyspark.sql import functions as F

    (spark.range(first, first + count)
     .select(F.concat(F.lit("p"), F.col("id").cast("string")).alias("player"),
             F.lit("2024-01-01 00:00:00").cast("timestamp").alias("ts"),
             (F.col("id") % 100 + score_plus).alias("score"))
     .coalesce(1).write.mode("overwrite").parquet(folder))


def build(spark, work: Path, name: str, files: list[tuple[int, int, int]]):
    """A running aggregation over ``files`` (first player, count, score added), one batch a
    file, run to the end; the stopped query."""
    import statekit as sk

    for i, (first, count, plus) in enumerate(files):
        write_players(spark, str(work / name / "in" / f"f{i}"), first, count, plus)
    stream = (spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1)
              .option("recursiveFileLookup", "true").parquet(str(work / name / "in")))
    query = sk.start_query(stream, spark=spark, keys=["player"], aggregates=AGGREGATES,
                           name=f"bench_diff_{name}", checkpoint=str(work / name / "ck"),
                           trigger="available-now")
    query.query.awaitTermination()
    query.close()
    if query.query.exception() is not None:
        raise RuntimeError(f"building the checkpoint failed: {query.query.exception()}")
    return query


def raw_snapshot(spark, checkpoint: str, batch: int):
    """Baseline: Spark's own state read of one batch, flattened, into pandas."""
    from pyspark.sql import functions as F

    raw = spark.read.format("statestore").option("batchId", batch).load(checkpoint)
    return raw.select("key.player", "value.*", F.col("partition_id")).toPandas()


def one_round(spark, query, other) -> tuple[dict, dict]:
    import statekit as sk

    t_diff, d = timed(lambda: sk.diff((query, 0), (query, 1)))
    t_raw, raw = timed(lambda: raw_snapshot(spark, str(query.checkpoint), 1))
    t_all, every = timed(lambda: sk.diff(query, other))
    seconds = {"statekit": t_diff, "baseline": t_raw, "statekit_all_differ": t_all}
    shape = {"diff_rows": len(d.frame), "counts": {k: int(v) for k, v in d.counts.items()},
             "baseline_rows": len(raw), "all_differ_rows": len(every.frame)}
    return seconds, shape


def run(keys: int = 1_000_000, repeats: int = 3, workdir: str | None = None) -> dict:
    started = Run("diff")
    spark = session()
    work = Path(workdir or tempfile.mkdtemp(prefix="statekit-bench-diff-"))
    tenth, new = keys // 10, keys // 100
    try:
        # batch 1: the last tenth of the players again (changed) and 1% new ones (added)
        files = [(0, keys, 0), (keys - tenth, tenth + new, 0)]
        t_build, query = timed(lambda: build(spark, work, "a", files))
        # the same players in a second checkpoint, every score one higher: every key differs
        other = build(spark, work, "b", [(first, count, 1) for first, count, _ in files])
        one_round(spark, query, other)  # warm-up
        runs: dict[str, list[float]] = {}
        shape: dict = {}
        for _ in range(repeats):
            seconds, shape = one_round(spark, query, other)
            for key, value in seconds.items():
                runs.setdefault(key, []).append(value)
    finally:
        if workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    med = {k: median(v) for k, v in runs.items()}
    ratio = med["statekit"] / med["baseline"]
    result = {"keys": keys, "repeats": repeats, "build_checkpoints_s": t_build,
              "ratio_statekit_over_baseline": ratio,
              "ratio_all_differ_over_baseline": med["statekit_all_differ"] / med["baseline"],
              "target": "<= 2.0", "target_met": ratio <= 2.0, **shape, "runs_s": runs,
              "median_s": med}
    write_result(started, figures_of(result), result)
    report(result)
    return result


def figures_of(r: dict) -> list[Figure]:
    med, keys = r["median_s"], f"{r['keys']:,} keys"
    base = f"baseline: one statestore read + toPandas, {keys}"
    return [
        Figure(base, med["baseline"], "s"),
        Figure(f"statekit: diff of two batches, {keys} ({r['diff_rows']:,} differ)",
               med["statekit"], "s", baseline=base, ratio=r["ratio_statekit_over_baseline"],
               target="ratio <= 2.0"),
        Figure(f"statekit: diff of two checkpoints, {keys}, every key differs",
               med["statekit_all_differ"], "s", baseline=base,
               ratio=r["ratio_all_differ_over_baseline"]),
        Figure("building the first checkpoint (two batches)", r["build_checkpoints_s"], "s"),
    ]


def report(r: dict) -> None:
    med = r["median_s"]
    print_table(f"diff of two snapshots of a {r['keys']:,}-key store (median of "
                f"{r['repeats']})", [
        ("ratio statekit / baseline", verdict(r["ratio_statekit_over_baseline"], "<= 2.0",
                                              r["target_met"])),
        ("statekit diff, two batches", f"{med['statekit']:.2f} s, {r['diff_rows']:,} rows "
                                       f"differ; {r['counts']}"),
        ("baseline: one snapshot read", f"{med['baseline']:.2f} s, {r['baseline_rows']:,} rows"),
        ("statekit diff, every key differs", f"{med['statekit_all_differ']:.2f} s, "
                                             f"{r['all_differ_rows']:,} rows (ratio "
                                             f"{r['ratio_all_differ_over_baseline']:.2f})"),
        ("building the checkpoint", f"{r['build_checkpoints_s']:.1f} s"),
    ])


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m bench.diff", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keys", type=int, default=1_000_000, help="keys in the store")
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds")
    parser.add_argument("--workdir", help="keep inputs and checkpoints here (default: temp)")
    args = parser.parse_args(argv)
    return run(args.keys, args.repeats, args.workdir)


if __name__ == "__main__":
    main()
