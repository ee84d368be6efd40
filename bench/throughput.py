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

A third path, ``kafka_parsed``, prototypes a change to ``statekit/query/stateful.py``
(see ``parsed_in_source``): the Kafka source parses the JSON values itself (option
``valueSchema``) and ``parse_events`` runs ``from_json`` only where the source left a
value unparsed. It is ``start_query`` over the same topic with the same query; only the
raw stream and ``parse_events``' JSON expression differ.

Besides seconds, every path reports its warm batches' progress ``durationMs`` (median per
phase) and, on Linux, the CPU seconds each kind of process spent on it (the JVM, Spark's
Python workers, the Python source runner, the broker, this driver).

    python -m bench.throughput --records 200000 --batch 50000
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import tempfile
import time
import types
from datetime import UTC, datetime
from pathlib import Path

from bench.common import (
    cpu_by_kind,
    cpu_snapshot,
    median,
    print_table,
    session,
    verdict,
    write_result,
)
from bench.results import Figure, Run

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


EVENT_SCHEMA = "player string, game string, score long, ts timestamp"
PHASES = ("triggerExecution", "latestOffset", "getBatch", "queryPlanning", "addBatch",
          "walCommit", "commitOffsets")


def _query_args(spark, work: Path, name: str, bootstrap: str, changelog: bool) -> dict:
    import statekit as sk

    return {"spark": spark, "keys": ["player"], "window": sk.tumbling(WINDOW),
            "aggregates": AGGREGATES, "watermark": WATERMARK, "name": name,
            "checkpoint": str(work / name), "trigger": TRIGGER,
            "kafka": bootstrap, "changelog": changelog, "event_schema": EVENT_SCHEMA}


def _figures(query, seconds: float, records: int, reports: list[dict], cpu: dict) -> dict:
    frame = query.progress()
    busy = frame[frame["input_rows"] > 0]
    batches = [p for p in reports if p["numInputRows"] > 0]
    warm = batches[1:] or batches  # the first batch of a query also plans and compiles
    return {"seconds": seconds, "records": records, "records_per_s": records / seconds,
            "input_rows": int(frame["input_rows"].sum()), "batches": len(busy),
            "median_batch_rows_per_s": float(median(
                busy["processed_rows_per_second"].astype(float).tolist())),
            "first_batch_ms": batches[0]["durationMs"] if batches else {},
            "to_first_trigger_s": _first_trigger_s(reports, query),
            "warm_batch_ms": {phase: median([p["durationMs"].get(phase, 0) for p in warm])
                              for phase in PHASES},
            "cpu_s": cpu}


def _first_trigger_s(reports: list[dict], query) -> float | None:
    started = getattr(query, "_bench_started_wall", None)
    if not reports or started is None:
        return None
    first = datetime.fromisoformat(reports[0]["timestamp"].replace("Z", "+00:00"))
    return first.timestamp() - started


def _timed_until(spark, start_query, records: int) -> tuple[float, object, list, dict]:
    """Seconds from starting a query until its progress reports ``records`` rows in.

    The same clock for every path: from ``start_query`` to the report of the batch that
    brings the input rows to ``records`` (a ``rate`` query has no end to drain to). Also
    returns the progress reports and the CPU seconds spent meanwhile, by process kind.
    """
    before = cpu_snapshot()
    started_wall, start = time.time(), time.perf_counter()
    query = start_query()
    query._bench_started_wall = started_wall
    try:
        while sum(p["numInputRows"] for p in query.query.recentProgress) < records:
            if not query.is_active:
                raise RuntimeError(f"query {query.name!r} stopped: {query.query.exception()}")
            time.sleep(0.02)
        seconds = time.perf_counter() - start
        cpu = cpu_by_kind(before, cpu_snapshot())  # before stop(): its runner still counts
        reports = list(query.query.recentProgress)
    finally:
        _stop_quietly(spark, query)
    time.sleep(0.5)  # let the progress listener write the last report
    return seconds, query, reports, cpu


def run_kafka(spark, bootstrap: str, topic: str, records: int, batch: int, work: Path,
              changelog: bool = False) -> dict:
    """Time start_query(topic) until ``records`` rows are processed."""
    import statekit as sk

    name = f"kafka_{time.monotonic_ns()}"
    seconds, query, reports, cpu = _timed_until(spark, lambda: sk.start_query(
        topic, max_offsets_per_trigger=batch,
        **_query_args(spark, work, name, bootstrap, changelog)), records)
    return {**_figures(query, seconds, records, reports, cpu),
            "malformed": query.malformed_count()}


@contextlib.contextmanager
def parsed_in_source():
    """While active, ``stateful.parse_events`` takes the source's ``parsed`` column where set.

    The prototype of the proposed ``statekit/query/stateful.py`` change, applied to the
    current ``parse_events`` rather than to a copy of it: the module's ``F.from_json`` is
    replaced, for the DataFrames built inside the block, by
    ``when(parsed is not null, struct(parsed.*, null AS _corrupt_record)).otherwise(
    from_json(...))``. Everything else ``parse_events`` does (reasons, the observed counts,
    the malformed side) is unchanged. The proposed diff does the same in the code.
    """
    from pyspark.sql import functions as F

    from statekit.query import stateful
    from statekit.spark.kafka_source import PARSED

    def from_json(col, schema, options=None):
        fields = [f.name for f in schema.fields if f.name != stateful.CORRUPT]
        fast = F.struct(*[F.col(PARSED)[n].alias(n) for n in fields],
                        F.lit(None).cast("string").alias(stateful.CORRUPT))
        return F.when(F.col(PARSED).isNotNull(), fast).otherwise(
            F.from_json(col, schema, options))

    proxy = types.SimpleNamespace(**{n: getattr(F, n) for n in dir(F) if not n.startswith("_")})
    proxy.from_json = from_json
    real, stateful.F = stateful.F, proxy
    try:
        yield
    finally:
        stateful.F = real


def kafka_parsed_stream(spark, bootstrap: str, topic: str, batch: int):
    """``kafka_stream(spark, topic, ...)`` as the proposed change builds it (valueSchema set)."""
    from pyspark.sql.types import StructType

    from statekit.kafka.topics import partition_count
    from statekit.spark.kafka_source import register

    partition_count(bootstrap, topic)  # kafka_stream's broker check, kept for parity
    return (spark.readStream.format(register(spark))
            .option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
            .option("startingOffsets", "earliest").option("failOnDataLoss", "true")
            .option("maxOffsetsPerTrigger", batch)
            .option("valueSchema", StructType.fromDDL(EVENT_SCHEMA).json()).load())


def run_kafka_parsed(spark, bootstrap: str, topic: str, records: int, batch: int, work: Path,
                     changelog: bool = False) -> dict:
    """Time the prototype (JSON parsed in the source) until ``records`` rows are processed."""
    import statekit as sk

    def start():
        with parsed_in_source():
            return sk.start_query(kafka_parsed_stream(spark, bootstrap, topic, batch),
                                  **_query_args(spark, work, name, bootstrap, changelog))

    name = f"kafka_parsed_{time.monotonic_ns()}"
    seconds, query, reports, cpu = _timed_until(spark, start, records)
    return {**_figures(query, seconds, records, reports, cpu),
            "malformed": query.malformed_count()}


def run_rate(spark, bootstrap: str, records: int, batch: int, work: Path,
             changelog: bool = False) -> dict:
    """Time start_query(rate_df) until ``records`` rows are processed."""
    import statekit as sk

    name = f"rate_{time.monotonic_ns()}"
    seconds, query, reports, cpu = _timed_until(spark, lambda: sk.start_query(
        rate_stream(spark, batch), **_query_args(spark, work, name, bootstrap, changelog)),
        records)
    return _figures(query, seconds, records, reports, cpu)


def _stop_quietly(spark, query) -> None:
    """Stop a query mid-batch without Spark logging the aborted batch as an ERROR."""
    spark.sparkContext.setLogLevel("FATAL")
    try:
        query.close()
    finally:
        spark.sparkContext.setLogLevel("ERROR")


VARIANTS = {"plain": False, "changelog": True}  # variant → both queries ship a changelog
PATHS = ("kafka", "kafka_parsed", "rate")


def _run_path(path: str, spark, bootstrap: str, topic: str, records: int, batch: int,
              work: Path, changelog: bool = False) -> dict:
    if path == "kafka":
        return run_kafka(spark, bootstrap, topic, records, batch, work, changelog)
    if path == "kafka_parsed":
        return run_kafka_parsed(spark, bootstrap, topic, records, batch, work, changelog)
    return run_rate(spark, bootstrap, records, batch, work, changelog)


def measure(spark, bootstrap: str, records: int, batch: int, repeats: int, work: Path,
            paths: tuple[str, ...] = PATHS) -> dict:
    """Warm every path up on a small input, then alternate timed runs of every variant."""
    warm = min(records, batch, 20_000)
    produce(bootstrap, "bench-warmup", warm)
    for path in paths:
        _run_path(path, spark, bootstrap, "bench-warmup", warm, min(batch, warm), work)
    produce_s = produce(bootstrap, "bench-games", records)
    runs = {variant: {path: [] for path in paths} for variant in VARIANTS}
    for i in range(repeats):
        for variant, changelog in VARIANTS.items():
            order = paths if i % 2 == 0 else tuple(reversed(paths))
            for path in order:
                runs[variant][path].append(_run_path(path, spark, bootstrap, "bench-games",
                                                     records, batch, work, changelog))
    return {"produce_s": produce_s, "runs": runs}


def summarise(runs: dict) -> dict:
    """Per variant: median records/s, per-batch figures and CPU of each path; the ratios."""
    out = {}
    for variant, paths in runs.items():
        out[variant] = {path: _path_summary(items) for path, items in paths.items()}
        rate = out[variant]["rate"]["records_per_s"]
        out[variant]["ratio"] = out[variant]["kafka"]["records_per_s"] / rate
        # each repetition's paths run back to back: their ratio is less moved by a load
        # that changes over minutes than the ratio of medians
        out[variant]["paired_ratios"] = [k["records_per_s"] / r["records_per_s"]
                                         for k, r in zip(paths["kafka"], paths["rate"],
                                                         strict=True)]
        if "kafka_parsed" in out[variant]:
            out[variant]["ratio_parsed"] = out[variant]["kafka_parsed"]["records_per_s"] / rate
            out[variant]["paired_ratios_parsed"] = [
                k["records_per_s"] / r["records_per_s"]
                for k, r in zip(paths["kafka_parsed"], paths["rate"], strict=True)]
    return out


def _path_summary(items: list[dict]) -> dict:
    kinds = sorted({k for r in items for k in r.get("cpu_s", {})})
    firsts = [r["to_first_trigger_s"] for r in items if r.get("to_first_trigger_s") is not None]
    return {
        "records_per_s": median([r["records_per_s"] for r in items]),
        "seconds": median([r["seconds"] for r in items]),
        "median_batch_rows_per_s": median([r["median_batch_rows_per_s"] for r in items]),
        "to_first_trigger_s": median(firsts),
        "first_batch_ms": median([r["first_batch_ms"].get("triggerExecution", 0)
                                  for r in items]),
        "warm_batch_ms": {phase: median([r["warm_batch_ms"][phase] for r in items])
                          for phase in PHASES},
        "cpu_s": {k: median([r.get("cpu_s", {}).get(k, 0.0) for r in items]) for k in kinds}}


def run(records: int = 200_000, batch: int = 50_000, repeats: int = 3,
        workdir: str | None = None, paths: tuple[str, ...] = PATHS) -> dict:
    """Run both paths in both variants, write and print the figures."""
    import statekit as sk

    started = Run("throughput")
    spark = session()
    work = Path(workdir or tempfile.mkdtemp(prefix="statekit-bench-throughput-"))
    try:
        with sk.EmbeddedBroker() as broker:
            measured = measure(spark, broker.bootstrap_servers, records, batch, repeats, work,
                               paths)
    finally:
        if workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    summary = summarise(measured["runs"])
    ratio = summary["plain"]["ratio"]
    result = {"records": records, "batch": batch, "repeats": repeats, "players": PLAYERS,
              "window": WINDOW, "watermark": WATERMARK, "trigger": TRIGGER,
              "ratio_kafka_over_rate": ratio,
              "ratio_with_changelog": summary["changelog"]["ratio"],
              "ratio_parsed_in_source": summary["plain"].get("ratio_parsed"),
              "target": ">= 0.5", "target_met": ratio >= 0.5, "summary": summary, **measured,
              "note": "the Kafka path parses JSON and counts malformed rows in the same query"}
    write_result(started, figures_of(result), result)
    report(result)
    return result


def figures_of(r: dict) -> list[Figure]:
    """The results file's figures: each path's records/s (end to end, medians) against rate."""
    out = []
    for variant, label in (("plain", ""), ("changelog", ", with changelogs")):
        s = r["summary"][variant]
        rate = f"rate-micro-batch (baseline){label}"
        out += [Figure(rate, s["rate"]["records_per_s"], "records/s"),
                Figure(f"Kafka{label}", s["kafka"]["records_per_s"], "records/s",
                       baseline=rate, ratio=s["ratio"],
                       target="ratio >= 0.5" if variant == "plain" else None),
                Figure(f"Kafka{label}: median of per-repetition ratios",
                       median(s["paired_ratios"]), "")]
        if "kafka_parsed" in s:
            out += [Figure(f"Kafka, JSON parsed in the source{label}",
                           s["kafka_parsed"]["records_per_s"], "records/s", baseline=rate,
                           ratio=s["ratio_parsed"]),
                    Figure(f"Kafka, JSON parsed in the source{label}: median of "
                           "per-repetition ratios", median(s["paired_ratios_parsed"]), "")]
    return out


def _path_line(p: dict) -> str:
    return (f"{p['records_per_s']:,.0f} rec/s end to end ({p['seconds']:.1f} s); "
            f"per batch {p['median_batch_rows_per_s']:,.0f} rows/s")


def _paired(ratios: list[float]) -> str:
    return (" ".join(f"{x:.2f}" for x in ratios)
            + f"  (median {median(ratios):.2f}; kafka and rate of one repetition run back to back)")


def _batch_line(p: dict) -> str:
    w = p["warm_batch_ms"]
    cpu = " ".join(f"{k} {v:.2f}" for k, v in p["cpu_s"].items() if v >= 0.005)
    first = p["to_first_trigger_s"]
    return (f"warm batch {w['triggerExecution']:.0f} ms = latestOffset {w['latestOffset']:.0f}"
            f" + planning {w['queryPlanning']:.0f} + addBatch {w['addBatch']:.0f} + wal "
            f"{w['walCommit']:.0f} + commit {w['commitOffsets']:.0f}; first trigger "
            f"{'?' if first is None else f'{first:.2f}'} s after start, first batch "
            f"{p['first_batch_ms']:.0f} ms; CPU s: {cpu or 'n/a'}")


def report(r: dict) -> None:
    s = r["summary"]
    plain, logged = s["plain"], s["changelog"]
    first_k = r["runs"]["plain"]["kafka"][0]
    rows = [
        ("ratio kafka / rate", verdict(r["ratio_kafka_over_rate"], ">= 0.5", r["target_met"])),
        ("  each repetition", _paired(plain["paired_ratios"])),
        ("kafka (statekit source)", _path_line(plain["kafka"])),
        ("  where the time goes", _batch_line(plain["kafka"])),
    ]
    if "kafka_parsed" in plain:
        rows += [
            ("ratio, JSON parsed in source", f"{plain['ratio_parsed']:.2f} (prototype of the "
                                             "proposed stateful.py change)"),
            ("  each repetition", _paired(plain["paired_ratios_parsed"])),
            ("kafka, parsed in source", _path_line(plain["kafka_parsed"])),
            ("  where the time goes", _batch_line(plain["kafka_parsed"])),
        ]
    rows += [
        ("rate-micro-batch", _path_line(plain["rate"])),
        ("  where the time goes", _batch_line(plain["rate"])),
        ("with changelogs: ratio", f"{logged['ratio']:.2f} (both queries ship their changelog)"
                                   + (f"; parsed in source {logged['ratio_parsed']:.2f}"
                                      if "ratio_parsed" in logged else "")),
        ("  kafka", _path_line(logged["kafka"])),
    ]
    if "kafka_parsed" in logged:
        rows.append(("  kafka, parsed in source", _path_line(logged["kafka_parsed"])))
    rows += [
        ("  rate", _path_line(logged["rate"])),
        ("kafka rows read / malformed", f"{first_k['input_rows']:,} / {first_k['malformed']}"),
        ("producing the topic", f"{r['produce_s']:.1f} s"),
        ("note", "timed from start_query until progress reports all records in; the Kafka "
                 "paths also parse JSON and count malformed rows (observe)"),
    ]
    print_table(f"throughput, {r['records']:,} records, batches of {r['batch']:,} "
                f"(median of {r['repeats']})", rows)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m bench.throughput", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=200_000, help="events to process")
    parser.add_argument("--batch", type=int, default=50_000,
                        help="records per micro-batch (maxOffsetsPerTrigger / rowsPerBatch)")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs of each path")
    parser.add_argument("--workdir", help="keep checkpoints here (default: temp)")
    parser.add_argument("--paths", default=",".join(PATHS),
                        help=f"comma-separated, of {', '.join(PATHS)} (rate and kafka required)")
    args = parser.parse_args(argv)
    paths = tuple(p.strip() for p in args.paths.split(",") if p.strip())
    if not {"kafka", "rate"} <= set(paths) or not set(paths) <= set(PATHS):
        parser.error(f"--paths: {args.paths!r}; accepted: kafka,rate[,kafka_parsed]")
    return run(args.records, args.batch, args.repeats, args.workdir, paths)


if __name__ == "__main__":
    main()
