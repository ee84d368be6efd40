"""The Kafka source alone vs a bare confluent-kafka consumer of the same records.

One process, one EmbeddedBroker, one 4-partition topic of R JSON game events (as in
``bench.throughput``). Each repetition, in alternating order:

- ``plain``: one confluent-kafka consumer assigned to all 4 partitions from offset 0,
  ``consume(10_000, 1.0)`` until it holds R records (values touched, nothing kept);
- ``source``: ``spark.readStream.format("statekit_kafka")`` into Spark's ``noop`` sink
  (``maxOffsetsPerTrigger`` = batch, trigger 100 ms), timed from ``start()`` until
  progress reports R input rows; also the warm batches alone (rows / summed
  ``triggerExecution``), which leave out the query's start-up.

Figures: records/s of each, the ratio source / plain (target >= 0.8, on the warm batches
and on the whole), and the broker's CPU seconds per million records of each (ratio target
<= 2). The load average is printed with them: on a shared machine the figures are
provisional. It measures the installed ``statekit`` only: putting another version first
on ``PYTHONPATH`` changes the driver's copy, not necessarily what Spark's Python workers
import (an editable install), so a "before" figure needs a checkout of that version.

    python -m bench.source --records 1000000 --batch 100000 --repeats 3
"""

from __future__ import annotations

import argparse
import os
import time

from bench.common import (
    cpu_by_kind,
    cpu_snapshot,
    embedded_kafka,
    median,
    print_table,
    session,
    write_result,
)
from bench.results import Figure, Run
from bench.throughput import produce

PARTITIONS = 4


def read_plain(bootstrap: str, topic: str, records: int) -> dict:
    """A bare confluent-kafka consumer reads ``records`` records of ``topic`` from offset 0."""
    from confluent_kafka import Consumer, TopicPartition

    before = cpu_snapshot()
    start = time.perf_counter()
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-plain",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got = size = 0
    while got < records:
        for msg in consumer.consume(10_000, 1.0):
            if msg.error() is None:
                got += 1
                size += len(msg.value())
    seconds = time.perf_counter() - start
    cpu = cpu_by_kind(before, cpu_snapshot())
    consumer.close()
    return {"seconds": seconds, "records_per_s": records / seconds, "bytes": size, "cpu_s": cpu}


def read_source(spark, bootstrap: str, topic: str, records: int, batch: int) -> dict:
    """The statekit source into Spark's ``noop`` sink until ``records`` rows are in."""
    before = cpu_snapshot()
    start = time.perf_counter()
    query = (spark.readStream.format("statekit_kafka")
             .option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
             .option("startingOffsets", "earliest")
             .option("maxOffsetsPerTrigger", batch).load()
             .writeStream.format("noop").trigger(processingTime="100 milliseconds").start())
    try:
        while sum(p["numInputRows"] for p in query.recentProgress) < records:
            if not query.isActive:
                raise RuntimeError(f"source query stopped: {query.exception()}")
            time.sleep(0.02)
        seconds = time.perf_counter() - start
        cpu = cpu_by_kind(before, cpu_snapshot())
        reports = [p for p in query.recentProgress if p["numInputRows"] > 0]
    finally:
        query.stop()
    warm = reports[1:] or reports  # the first batch also plans and starts Python workers
    warm_rows = sum(p["numInputRows"] for p in warm)
    warm_s = sum(p["durationMs"]["triggerExecution"] for p in warm) / 1000
    return {"seconds": seconds, "records_per_s": records / seconds,
            "warm_records_per_s": warm_rows / warm_s if warm_s else float("nan"),
            "batches": len(reports),
            "warm_batch_ms": median([p["durationMs"]["triggerExecution"] for p in warm]),
            "cpu_s": cpu}


def _broker_cpu_per_million(run: dict, records: int) -> float:
    return run["cpu_s"].get("broker", float("nan")) * 1_000_000 / records


def run(records: int = 1_000_000, batch: int = 100_000, repeats: int = 3,
        label: str = "after") -> dict:
    """Measure both readers ``repeats`` times in alternating order; write and print figures."""
    import statekit as sk
    from statekit.spark.kafka_source import register

    started = Run(f"source_{label}")
    spark = session()
    register(spark)
    runs: dict[str, list[dict]] = {"plain": [], "source": []}
    load_before = tuple(round(x, 1) for x in os.getloadavg())
    with sk.EmbeddedBroker() as broker:
        bootstrap, topic = broker.bootstrap_servers, f"bench-source-{time.monotonic_ns()}"
        produce(bootstrap, topic, records)
        for i in range(repeats):
            order = ("plain", "source") if i % 2 == 0 else ("source", "plain")
            for path in order:
                runs[path].append(read_plain(bootstrap, topic, records) if path == "plain"
                                  else read_source(spark, bootstrap, topic, records, batch))
    load_after = tuple(round(x, 1) for x in os.getloadavg())
    plain_rps = [r["records_per_s"] for r in runs["plain"]]
    broker = {path: [_broker_cpu_per_million(r, records) for r in rs]
              for path, rs in runs.items()}
    result = {
        "label": label, "statekit": sk.__file__, "records": records, "batch": batch,
        "repeats": repeats, "load_average_before": load_before, "load_average_after": load_after,
        "ratio_source_over_plain": median([s["records_per_s"] / p for s, p in
                                           zip(runs["source"], plain_rps, strict=True)]),
        "ratio_warm_source_over_plain": median([s["warm_records_per_s"] / p for s, p in
                                                zip(runs["source"], plain_rps, strict=True)]),
        "broker_cpu_s_per_million": {k: median(v) for k, v in broker.items()},
        "ratio_broker_cpu_source_over_plain": median(
            [s / p for s, p in zip(broker["source"], broker["plain"], strict=True)]),
        "runs": runs,
    }
    write_result(started, figures_of(result), result, broker=embedded_kafka())
    report(result)
    return result


def figures_of(r: dict) -> list[Figure]:
    """The results file's figures: medians of the repetitions, ratios paired per repetition."""
    src, plain = r["runs"]["source"], r["runs"]["plain"]
    cpu = r["broker_cpu_s_per_million"]
    base, base_cpu = "plain consumer", "broker CPU per million records, plain consumer"
    return [
        Figure(base, median([p["records_per_s"] for p in plain]), "records/s"),
        Figure("source -> noop, warm batches", median([s["warm_records_per_s"] for s in src]),
               "records/s", baseline=base, ratio=r["ratio_warm_source_over_plain"],
               target="ratio >= 0.8"),
        Figure("source -> noop, whole run from start()",
               median([s["records_per_s"] for s in src]), "records/s", baseline=base,
               ratio=r["ratio_source_over_plain"]),
        Figure(base_cpu, cpu["plain"], "CPU-s"),
        Figure("broker CPU per million records, source", cpu["source"], "CPU-s",
               baseline=base_cpu, ratio=r["ratio_broker_cpu_source_over_plain"],
               target="ratio <= 2"),
    ]


def report(r: dict) -> None:
    src, plain = r["runs"]["source"], r["runs"]["plain"]

    def spread(values: list[float]) -> str:
        return f"{median(values):,.0f} ({min(values):,.0f}–{max(values):,.0f})"

    print_table(f"source alone vs a bare consumer [{r['label']}: {r['statekit']}], "
                f"{r['records']:,} records, {r['repeats']} repetitions", [
        ("load average (1, 5, 15 min) before / after",
         f"{r['load_average_before']} / {r['load_average_after']}"),
        ("plain consumer rec/s", spread([p["records_per_s"] for p in plain])),
        ("source -> noop rec/s (whole, from start())", spread([s["records_per_s"] for s in src])),
        ("source -> noop rec/s (warm batches)", spread([s["warm_records_per_s"] for s in src])),
        ("ratio source / plain (whole; target >= 0.8)", f"{r['ratio_source_over_plain']:.2f}"),
        ("ratio source / plain (warm; target >= 0.8)",
         f"{r['ratio_warm_source_over_plain']:.2f}"),
        ("broker CPU-s per million: plain / source",
         " / ".join(f"{r['broker_cpu_s_per_million'][k]:.2f}" for k in ("plain", "source"))),
        ("ratio broker CPU source / plain (target <= 2)",
         f"{r['ratio_broker_cpu_source_over_plain']:.2f}"),
    ])


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m bench.source", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=100_000, help="maxOffsetsPerTrigger")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--label", default="after", help="names the results file")
    args = parser.parse_args(argv)
    return run(args.records, args.batch, args.repeats, args.label)


if __name__ == "__main__":
    main()
