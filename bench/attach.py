"""What attaching costs a person's own job: its batch time with and without statekit.attach.

The job is plain PySpark: parquet files read as a file stream (one file a micro-batch),
``groupBy(key).agg(count, sum)`` in update mode into the noop sink, K distinct keys (so
the state holds K rows: 100,000 by default). It runs alternately (after a warm-up round)
**plain** and **attached** with ``statekit.attach(query, kafka=<embedded broker>)``, which
ships the aggregation's changelog after each batch, in the same Spark session, so
shipping's Spark jobs compete with the job's batches for the same 2 cores.

Figures (medians of the repeats):

- **batch time**: the job's batches' own time (Spark's ``triggerExecution``, summed over
  the batches); overhead = attached / plain - 1 (**target <= 15%**);
- **shipping per batch**: the changelog writer's rounds (reading the batch's change feed,
  encoding, producing, committing the transaction; ``ChangelogWriter.rounds``), summed and
  divided by the batches, against the batch's own mean time;
- **lag at the end**: seconds from the job's last commit to its changelog holding it.

    python -m bench.attach --keys 100000 --records 300000 --files 5 --repeats 2
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

import pandas as pd

from bench.common import median, print_table, session, verdict, write_result
from bench.results import Figure, Run


def write_input(folder: Path, records: int, keys: int, files: int) -> None:
    """``records`` rows over ``keys`` keys in ``files`` parquet files."""
    i = pd.RangeIndex(records)
    frame = pd.DataFrame({"key": [f"k{k:06d}" for k in (i * 7919) % keys],
                          "score": (i % 100).astype("int64")})
    folder.mkdir(parents=True)
    size = -(-records // files)
    for n in range(files):
        frame.iloc[n * size:(n + 1) * size].to_parquet(folder / f"part-{n:04d}.parquet")


def _start(spark, folder: Path, checkpoint: Path, name: str):
    from pyspark.sql import functions as F

    return (spark.readStream.schema("key string, score bigint").option("maxFilesPerTrigger", 1)
            .parquet(str(folder)).groupBy("key")
            .agg(F.count("*").alias("n"), F.sum("score").alias("total"))
            .writeStream.format("noop").outputMode("update").queryName(name)
            .option("checkpointLocation", str(checkpoint))
            .trigger(processingTime="100 milliseconds").start())


def _batch_ms(query) -> tuple[float, int, int]:
    """(sum of the batches' triggerExecution ms, batches with input, state rows)."""
    reports = [json.loads(p.json) for p in query.recentProgress]
    ran = [r for r in reports if r.get("numInputRows", 0) > 0]
    rows = max((sum(op.get("numRowsTotal", 0) for op in r.get("stateOperators") or [])
                for r in ran), default=0)
    return float(sum(r["durationMs"]["triggerExecution"] for r in ran)), len(ran), rows


def run(spark, folder: Path, work: Path, attached: bool, kafka: str | None) -> dict:
    import statekit as sk

    checkpoint = work / ("attached" if attached else "plain")
    shutil.rmtree(checkpoint, ignore_errors=True)
    name = f"bench_{'attached' if attached else 'plain'}_{int(time.time() * 1000)}"
    query = _start(spark, folder, checkpoint, name)
    live = None
    try:
        if attached:
            live = sk.attach(query, kafka=kafka, app=name, ledger_dir=work / f"ledgers-{name}")
        query.processAllAvailable()
        committed = time.perf_counter()
        figures = {}
        if live is not None:
            live.wait_shipped()
            figures["lag_s"] = round(time.perf_counter() - committed, 3)
            rounds = [r for w in live.changelogs.values() for r in w.rounds]
            figures["ship_s"] = round(sum(r[3] for r in rounds), 3)
            figures["rounds"] = len(rounds)
            figures["shipped_records"] = sum(r[2] for r in rounds)
            live.detach()
        batch_ms, batches, rows = _batch_ms(query)
        figures.update(batch_ms=batch_ms, batches=batches, state_rows=rows)
        return figures
    finally:
        query.stop()


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m bench.attach", description=__doc__)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--files", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    started = Run("attach")
    from statekit.kafka import EmbeddedBroker

    work = Path(tempfile.mkdtemp(prefix="statekit-bench-attach-"))
    try:
        write_input(work / "in", args.records, args.keys, args.files)
        with EmbeddedBroker() as broker:
            spark = session(shuffle_partitions=4)
            run(spark, work / "in", work, False, None)  # warm-up
            plain, attached = [], []
            for _ in range(args.repeats):
                plain.append(run(spark, work / "in", work, False, None))
                attached.append(run(spark, work / "in", work, True, broker.bootstrap_servers))
        plain_ms = median([r["batch_ms"] for r in plain])
        attached_ms = median([r["batch_ms"] for r in attached])
        batches = attached[0]["batches"]
        overhead = attached_ms / plain_ms - 1
        ship_per_batch = median([r["ship_s"] for r in attached]) / max(batches, 1)
        batch_mean = attached_ms / 1000 / max(batches, 1)
        figures = {"keys": args.keys, "records": args.records, "files": args.files,
                   "repeats": args.repeats, "plain": plain, "attached": attached,
                   "plain_batch_ms": plain_ms, "attached_batch_ms": attached_ms,
                   "overhead": round(overhead, 3),
                   "ship_s_per_batch": round(ship_per_batch, 3),
                   "batch_s_mean": round(batch_mean, 3),
                   "lag_s": median([r["lag_s"] for r in attached])}
        plain_name = "batches' own time, plain job (median)"
        write_result(started, [
            Figure(plain_name, plain_ms / 1000, "s"),
            Figure("batches' own time, attached with its changelog shipped", attached_ms / 1000,
                   "s", baseline=plain_name, ratio=attached_ms / plain_ms,
                   target="ratio <= 1.15"),
            Figure("shipping per batch", ship_per_batch, "s"),
            Figure("mean attached batch", batch_mean, "s"),
            Figure("changelog lag after the last commit", figures["lag_s"], "s"),
        ], figures)
        print_table(f"statekit.attach on a plain groupBy: {args.records:,} records, "
                    f"{args.keys:,} keys ({plain[0]['state_rows']:,} state rows), "
                    f"{batches} batches, median of {args.repeats}", [
                        ("batch time, plain", f"{plain_ms / 1000:.2f} s"),
                        ("batch time, attached", f"{attached_ms / 1000:.2f} s"),
                        ("overhead", verdict(overhead, "<= 0.15", overhead <= 0.15)),
                        ("shipping per batch", f"{ship_per_batch:.2f} s against a "
                                               f"{batch_mean:.2f} s batch "
                                               f"({ship_per_batch / batch_mean:.2f}x)"),
                        ("changelog lag after the last commit", f"{figures['lag_s']:.2f} s"),
                    ])
        return figures
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
