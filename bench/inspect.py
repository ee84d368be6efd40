"""``open_checkpoint(path).describe()`` on an N-row checkpoint vs Spark's raw readers.

Builds (once; cached under /tmp) a checkpoint of a plain PySpark query: a running count per
key over a parquet file stream, ``BATCHES`` files of N / BATCHES new keys each, one file a
batch, so the RocksDB store holds N rows after the last batch. Then times, alternating,
after one warm-up round:

- **statekit**: ``open_checkpoint(path).describe()`` (logs, state metadata, state rows per
  partition of every retained batch, the change feed's deletes, state files);
- **baseline**: the same information from Spark's own readers: ``state-metadata``, one
  ``statestore`` read per batch unioned and counted per partition, the ``statestore``
  change feed counted per batch and change type, the offset and commit logs read as JSON
  files, the state files listed with their sizes.

Ratio = statekit / baseline (target <= 1.2).

    python -m bench.inspect --rows 1000000 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from functools import reduce
from pathlib import Path

from bench.common import median, print_table, session, timed, verdict, write_result
from bench.results import Figure, Run

BATCHES = 5
TARGET = 1.2


def build_checkpoint(spark, work: Path, rows: int) -> Path:
    """The checkpoint of a running count per key: BATCHES files of rows / BATCHES new keys.
    Reused when ``work`` already holds a finished one (its ``done`` marker)."""
    from pyspark.sql import functions as F

    checkpoint, done = work / "checkpoint", work / "done"
    if done.exists():
        return checkpoint
    shutil.rmtree(work, ignore_errors=True)
    per_file = rows // BATCHES
    for i in range(BATCHES):
        (spark.range(i * per_file, (i + 1) * per_file, numPartitions=1)
         .select(F.concat(F.lit("k"), F.col("id").cast("string")).alias("k"),
                 (F.lit("2026-01-05 10:00:00").cast("timestamp")
                  + F.make_interval(mins=F.lit(i))).alias("ts"))
         .write.mode("overwrite").parquet(str(work / "staging" / str(i))))
        # one parquet file per batch, in order (the file source reads the oldest first)
        part = next((work / "staging" / str(i)).glob("part-*.parquet"))
        target = work / "input" / f"batch-{i:02d}.parquet"
        target.parent.mkdir(parents=True, exist_ok=True)
        part.rename(target)
        os.utime(target, (1_767_600_000 + 10 * i,) * 2)
    stream = (spark.readStream.schema("k string, ts timestamp").option("maxFilesPerTrigger", 1)
              .parquet(str(work / "input")))
    counts = stream.withWatermark("ts", "1 hour").groupBy("k").count()
    query = (counts.writeStream.outputMode("update").format("noop")
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(f"building the checkpoint failed: {query.exception()}")
    done.write_text("ok\n")
    return checkpoint


def describe_with_statekit(checkpoint: Path, spark) -> dict:
    from statekit import open_checkpoint

    description = open_checkpoint(checkpoint, spark).describe(batches=BATCHES)
    return {"rows": int(description.table["rows"].iloc[0]),
            "flags": description.flag_names}


def _log(folder: Path) -> list[tuple[int, list[str]]]:
    entries = []
    for path in sorted(folder.iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else -1):
        if path.name.isdigit():
            entries.append((int(path.name), path.read_text().splitlines()))
    return entries


def describe_with_spark(checkpoint: Path, spark) -> dict:
    """Baseline: the same reads, straight from Spark's readers and the log files."""
    from pyspark.sql import functions as F

    path = str(checkpoint)
    offsets = {b: json.loads(lines[1]) for b, lines in _log(checkpoint / "offsets")}
    commits = {b: json.loads(lines[1]) for b, lines in _log(checkpoint / "commits")}
    watermarks = [(b, offsets[b].get("batchWatermarkMs"),
                   commits.get(b, {}).get("nextBatchWatermarkMs")) for b in sorted(offsets)]
    metadata = spark.read.format("state-metadata").load(path).toPandas()
    first, last = int(metadata["minBatchId"].max()), int(metadata["maxBatchId"].min())
    batches = [b for b in sorted(commits) if first <= b <= last][-BATCHES:]
    reads = [spark.read.format("statestore").option("batchId", b).load(path)
             .select(F.lit(b).alias("batch"), "partition_id") for b in batches]
    counts = (reduce(lambda a, b: a.unionByName(b), reads)
              .groupBy("batch", "partition_id").count().toPandas())
    changes = (spark.read.format("statestore").option("readChangeFeed", True)
               .option("changeStartBatchId", batches[1]).option("changeEndBatchId", batches[-1])
               .load(path).groupBy("batch_id", "change_type").count().toPandas())
    sizes = sum(os.path.getsize(os.path.join(d, f))
                for d, _, files in os.walk(checkpoint / "state") for f in files)
    rows = int(counts.loc[counts["batch"] == batches[-1], "count"].sum())
    return {"rows": rows, "watermarks": len(watermarks), "changes": len(changes),
            "state_bytes": sizes}


def one_round(checkpoint: Path, spark) -> tuple[dict, dict]:
    t_sk, sk_out = timed(lambda: describe_with_statekit(checkpoint, spark))
    t_raw, raw_out = timed(lambda: describe_with_spark(checkpoint, spark))
    return {"statekit": t_sk, "baseline": t_raw}, {"statekit": sk_out, "baseline": raw_out}


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def run(rows: int = 1_000_000, repeats: int = 3, workdir: str | None = None) -> dict:
    started = Run("inspect")
    spark = session()
    work = Path(workdir or f"/tmp/statekit-bench-inspect-{rows}")
    t_build, checkpoint = timed(lambda: build_checkpoint(spark, work, rows))
    load_before = load_average()
    one_round(checkpoint, spark)  # warm-up
    runs: dict[str, list[float]] = {"statekit": [], "baseline": []}
    outputs: dict = {}
    for _ in range(repeats):
        seconds, outputs = one_round(checkpoint, spark)
        for key, value in seconds.items():
            runs[key].append(value)
    med = {k: median(v) for k, v in runs.items()}
    ratio = med["statekit"] / med["baseline"]
    result = {"rows": rows, "batches": BATCHES, "repeats": repeats, "checkpoint": str(checkpoint),
              "build_checkpoint_s": t_build, "runs_s": runs, "median_s": med,
              "ratio_statekit_over_baseline": ratio, "target": f"<= {TARGET}",
              "target_met": ratio <= TARGET, "outputs": outputs,
              "rows_ok": outputs["statekit"]["rows"] == outputs["baseline"]["rows"] == rows,
              "load_average_before": load_before, "load_average_after": load_average()}
    base = "baseline: Spark's readers + log files"
    write_result(started, [
        Figure(base, med["baseline"], "s"),
        Figure(f"open_checkpoint().describe(), {rows:,} rows", med["statekit"], "s",
               baseline=base, ratio=ratio, target=f"ratio <= {TARGET}"),
        Figure("building the checkpoint (0 when cached)", t_build, "s"),
    ], result)
    report(result)
    return result


def report(r: dict) -> None:
    med = r["median_s"]
    print_table(f"describe() of a {r['rows']:,}-row checkpoint, {r['batches']} batches "
                f"(median of {r['repeats']})", [
        ("ratio statekit / baseline", verdict(r["ratio_statekit_over_baseline"],
                                              r["target"], r["target_met"])),
        ("statekit open_checkpoint().describe()", f"{med['statekit']:.2f} s, flags: "
                                                  f"{r['outputs']['statekit']['flags']}"),
        ("baseline Spark readers + log files", f"{med['baseline']:.2f} s"),
        ("rows after the last batch == N", str(r["rows_ok"])),
        ("building the checkpoint", f"{r['build_checkpoint_s']:.1f} s (0 when cached)"),
        ("load average before / after", f"{r['load_average_before']} / "
                                        f"{r['load_average_after']}"),
    ])


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m bench.inspect", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000, help="state rows at the end")
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds")
    parser.add_argument("--workdir", help="build and keep the checkpoint here "
                                          "(default /tmp/statekit-bench-inspect-<rows>)")
    args = parser.parse_args(argv)
    return run(args.rows, args.repeats, args.workdir)


if __name__ == "__main__":
    main()
