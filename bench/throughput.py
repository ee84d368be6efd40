"""End-to-end throughput of the Kafka-fed windowed aggregation vs the same query on ``rate``.

Kafka side: an EmbeddedBroker, R JSON game events in a 4-partition topic (murmur2),
``start_query(topic, ...)``; the query parses the JSON and counts malformed rows as it
goes. Baseline: the same aggregation (1000 players, same window, aggregates and watermark,
same batch size) over Spark's ``rate-micro-batch`` source through
``start_query(rate_df, ...)``. Both are timed the same way: from ``start_query`` until
progress reports R input rows. Two variants, each with both paths: ``plain`` (no
changelog: the headline ratio) and ``changelog`` (both queries ship their state changes
to a changelog topic, statekit's default with a broker). Ratio = kafka / rate records per
second (target >= 0.5).

    python -m bench.throughput --records 200000 --batch 50000
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from bench.common import median, print_table, session, verdict, write_result

PLAYERS = 1000
BASE = datetime(2024, 1, 1, tzinfo=UTC)
BASE_MS = int(BASE.timestamp() * 1000)
WINDOW, WATERMARK = "1 minute", "10 seconds"
AGGREGATES = ["count", "sum(score)", "max(score)"]
TRIGGER = "100 ms"


def _iso(ms: int) -> str:
    moment = datetime.fromtimestamp(ms / 1000, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def produce(bootstrap: str, topic: str, records: int) -> float:
    """Create a 4-partition topic and produce ``records`` events (1 ms apart); seconds taken."""
    from confluent_kafka import Producer

    from statekit.kafka.topics import create_topic

    create_topic(bootstrap, topic, partitions=4)
    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random",
                         "linger.ms": 20, "batch.num.messages": 10_000,
                         "queue.buffering.max.messages": 1_000_000})
    start = time.perf_counter()
    for i in range(records):
        player = f"p{i % PLAYERS:03d}"
        event = {"player": player, "game": f"g{i % 7}", "score": i % 100,
                 "ts": _iso(BASE_MS + i)}
        while True:
            try:
                producer.produce(topic, json.dumps(event).encode(), player.encode())
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(60) != 0:
        raise RuntimeError(f"{topic}: records left unsent after 60 s")
    return time.perf_counter() - start


def rate_stream(spark, batch: int):
    """Spark's rate-micro-batch source shaped like the game events (no ``value`` column)."""
    from pyspark.sql import functions as F

    raw = (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", batch)
           .option("advanceMillisPerBatch", batch).option("startTimestamp", BASE_MS)
           .option("numPartitions", 2).load())
    return raw.select(
        F.concat(F.lit("p"), F.lpad((F.col("value") % PLAYERS).cast("string"), 3, "0"))
        .alias("player"),
        (F.col("value") % 100).alias("score"), F.col("timestamp").alias("ts"))


def _query_args(spark, work: Path, name: str, bootstrap: str, changelog: bool) -> dict:
    import statekit as sk

    return {"spark": spark, "keys": ["player"], "window": sk.tumbling(WINDOW),
            "aggregates": AGGREGATES, "watermark": WATERMARK, "name": name,
            "checkpoint": str(work / name), "trigger": TRIGGER,
            "kafka": bootstrap, "changelog": changelog,
            "event_schema": "player string, game string, score long, ts timestamp"}


def _figures(query, seconds: float, records: int) -> dict:
    frame = query.progress()
    busy = frame[frame["input_rows"] > 0]
    return {"seconds": seconds, "records": records, "records_per_s": records / seconds,
            "input_rows": int(frame["input_rows"].sum()), "batches": len(busy),
            "median_batch_rows_per_s": float(median(
                busy["processed_rows_per_second"].astype(float).tolist()))}


def _timed_until(spark, start_query, records: int) -> tuple[float, object]:
    """Seconds from starting a query until its progress reports ``records`` rows in.

    The same clock for both paths: from ``start_query`` to the report of the batch that
    brings the input rows to ``records`` (a ``rate`` query has no end to drain to).
    """
    start = time.perf_counter()
    query = start_query()
    try:
        while sum(p["numInputRows"] for p in query.query.recentProgress) < records:
            if not query.is_active:
                raise RuntimeError(f"query {query.name!r} stopped: {query.query.exception()}")
            time.sleep(0.02)
        seconds = time.perf_counter() - start
    finally:
        _stop_quietly(spark, query)
    time.sleep(0.5)  # let the progress listener write the last report
    return seconds, query


def run_kafka(spark, bootstrap: str, topic: str, records: int, batch: int, work: Path,
              changelog: bool = False) -> dict:
    """Time start_query(topic) until ``records`` rows are processed."""
    import statekit as sk

    name = f"kafka_{time.monotonic_ns()}"
    seconds, query = _timed_until(spark, lambda: sk.start_query(
        topic, max_offsets_per_trigger=batch,
        **_query_args(spark, work, name, bootstrap, changelog)), records)
    return {**_figures(query, seconds, records), "malformed": query.malformed_count()}


def run_rate(spark, bootstrap: str, records: int, batch: int, work: Path,
             changelog: bool = False) -> dict:
    """Time start_query(rate_df) until ``records`` rows are processed."""
    import statekit as sk

    name = f"rate_{time.monotonic_ns()}"
    seconds, query = _timed_until(spark, lambda: sk.start_query(
        rate_stream(spark, batch), **_query_args(spark, work, name, bootstrap, changelog)),
        records)
    return _figures(query, seconds, records)


def _stop_quietly(spark, query) -> None:
    """Stop a query mid-batch without Spark logging the aborted batch as an ERROR."""
    spark.sparkContext.setLogLevel("FATAL")
    try:
        query.stop()
    finally:
        spark.sparkContext.setLogLevel("ERROR")


VARIANTS = {"plain": False, "changelog": True}  # variant → both queries ship a changelog


def measure(spark, bootstrap: str, records: int, batch: int, repeats: int, work: Path) -> dict:
    """Warm both paths up on a small input, then alternate timed runs of every variant."""
    warm = min(records, batch, 20_000)
    produce(bootstrap, "bench-warmup", warm)
    run_kafka(spark, bootstrap, "bench-warmup", warm, batch, work)
    run_rate(spark, bootstrap, warm, min(batch, warm), work)
    produce_s = produce(bootstrap, "bench-games", records)
    runs = {variant: {"kafka": [], "rate": []} for variant in VARIANTS}
    for i in range(repeats):
        for variant, changelog in VARIANTS.items():
            order = ("kafka", "rate") if i % 2 == 0 else ("rate", "kafka")
            for path in order:
                if path == "kafka":
                    figures = run_kafka(spark, bootstrap, "bench-games", records, batch, work,
                                        changelog)
                else:
                    figures = run_rate(spark, bootstrap, records, batch, work, changelog)
                runs[variant][path].append(figures)
    return {"produce_s": produce_s, "runs": runs}


def summarise(runs: dict) -> dict:
    """Per variant: median records/s and per-batch rate of each path, and their ratio."""
    out = {}
    for variant, paths in runs.items():
        out[variant] = {path: {
            "records_per_s": median([r["records_per_s"] for r in items]),
            "seconds": median([r["seconds"] for r in items]),
            "median_batch_rows_per_s": median([r["median_batch_rows_per_s"] for r in items])}
            for path, items in paths.items()}
        out[variant]["ratio"] = (out[variant]["kafka"]["records_per_s"]
                                 / out[variant]["rate"]["records_per_s"])
    return out


def run(records: int = 200_000, batch: int = 50_000, repeats: int = 3,
        workdir: str | None = None) -> dict:
    """Run both paths in both variants, write and print the figures."""
    import statekit as sk

    spark = session()
    work = Path(workdir or tempfile.mkdtemp(prefix="statekit-bench-throughput-"))
    try:
        with sk.EmbeddedBroker() as broker:
            measured = measure(spark, broker.bootstrap_servers, records, batch, repeats, work)
    finally:
        if workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    summary = summarise(measured["runs"])
    ratio = summary["plain"]["ratio"]
    result = {"records": records, "batch": batch, "repeats": repeats, "players": PLAYERS,
              "window": WINDOW, "watermark": WATERMARK, "trigger": TRIGGER,
              "ratio_kafka_over_rate": ratio,
              "ratio_with_changelog": summary["changelog"]["ratio"],
              "target": ">= 0.5", "target_met": ratio >= 0.5, "summary": summary, **measured,
              "note": "the Kafka path parses JSON and counts malformed rows in the same query"}
    write_result("throughput", result)
    report(result)
    return result


def _path_line(p: dict) -> str:
    return (f"{p['records_per_s']:,.0f} rec/s end to end ({p['seconds']:.1f} s); "
            f"per batch {p['median_batch_rows_per_s']:,.0f} rows/s")


def report(r: dict) -> None:
    s = r["summary"]
    plain, logged = s["plain"], s["changelog"]
    first_k = r["runs"]["plain"]["kafka"][0]
    print_table(f"throughput, {r['records']:,} records, batches of {r['batch']:,} "
                f"(median of {r['repeats']})", [
        ("ratio kafka / rate", verdict(r["ratio_kafka_over_rate"], ">= 0.5", r["target_met"])),
        ("kafka (statekit source)", _path_line(plain["kafka"])),
        ("rate-micro-batch", _path_line(plain["rate"])),
        ("with changelogs: ratio", f"{logged['ratio']:.2f} (both queries ship their changelog)"),
        ("  kafka", _path_line(logged["kafka"])),
        ("  rate", _path_line(logged["rate"])),
        ("kafka rows read / malformed", f"{first_k['input_rows']:,} / {first_k['malformed']}"),
        ("producing the topic", f"{r['produce_s']:.1f} s"),
        ("note", "timed from start_query until progress reports all records in; the Kafka "
                 "path also parses JSON and counts malformed rows (observe)"),
    ])


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m bench.throughput", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=200_000, help="events to process")
    parser.add_argument("--batch", type=int, default=50_000,
                        help="records per micro-batch (maxOffsetsPerTrigger / rowsPerBatch)")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs of each path")
    parser.add_argument("--workdir", help="keep checkpoints here (default: temp)")
    args = parser.parse_args(argv)
    return run(args.records, args.batch, args.repeats, args.workdir)


if __name__ == "__main__":
    main()
