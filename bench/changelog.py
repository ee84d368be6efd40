"""A 1,000,000-record changelog: read into pandas, compact, chart — against a raw consume.

Produces N records in statekit's changelog format (JSON keys and values, batch
headers; ``--keys`` distinct windows per partition updated over ``--batches``
batches, each window ending with a tombstone as the watermark evicts it) to a
3-partition topic on the embedded broker. Then, after one warm-up round, times:

- **baseline**: a bare confluent-kafka consume of the whole topic (every
  record's key, value and headers touched, nothing decoded);
- **read**: ``read_changelog`` into pandas (headers checked, JSON decoded by Arrow);
- **compact**: ``compact()`` (what log compaction keeps) and ``compaction_stats()``;
- **chart (a)**: ``log_vs_compacted_chart(raw, compacted)`` built and turned into
  its Vega-Lite spec (``to_dict()``); target under 2 s.

``--ship N`` times only the writer's Kafka side instead: N records (the same keys
and values, taken from the topic) shipped to a fresh topic in rounds of
``--ship-batches`` batches by ``statekit.changelog.rounds.ship_round`` with the
writer's own producer (``changelog_producer``), against a bare idempotent
producer of the same records with the same headers (baseline), in turns.

    python -m bench.changelog --records 1000000 --repeats 3
    python -m bench.changelog --ship 200000 --repeats 3
"""

from __future__ import annotations

import argparse
import json

from bench.common import embedded_kafka, median, print_table, timed, write_result
from bench.results import Figure, Run

PARTITIONS = 3


def create_changelog_topic(bootstrap: str, topic: str) -> None:
    """A windowed changelog topic of ``PARTITIONS`` partitions with the broker's cleaner held:
    the whole log is what the benchmarks measure (the broker would compact it under them)."""
    from statekit.changelog import naming
    from statekit.kafka.topics import create_topic

    create_topic(bootstrap, topic, PARTITIONS, naming.topic_config(
        True, 7 * 24 * 3600 * 1000, naming.HOLD_COMPACTION))


def produce(bootstrap: str, topic: str, records: int, keys: int, batches: int) -> int:
    """Produce ``records`` changelog records; returns how many were written."""
    from confluent_kafka import Producer

    from statekit.model import changelog_record as codec

    create_changelog_topic(bootstrap, topic)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20,
                         "queue.buffering.max.messages": 2_000_000, "batch.size": 1_000_000})
    per_batch = max(1, records // batches)
    written, batch = 0, 0
    prev = dict.fromkeys(range(PARTITIONS), -1)
    while written < records:
        rows = min(per_batch, records - written)
        counts = [rows // PARTITIONS + (p < rows % PARTITIONS) for p in range(PARTITIONS)]
        for part, count in enumerate(counts):
            for seq in range(count):
                n = written + seq * PARTITIONS + part
                window = n % keys
                key = (f'{{"player":"p{window % 997:03d}","window_start":"2026-01-05T'
                       f'{window // 997 % 24:02d}:{window // 23928 % 60:02d}:00.000Z",'
                       f'"window_end":"2026-01-05T{window // 997 % 24:02d}:59:00.000Z"}}')
                last_touch = n + keys >= records
                value = None if last_touch and n % 5 == 0 else json.dumps(
                    {"count": n // keys + 1, "sum_score": n % 1000, "max_score": n % 100},
                    separators=(",", ":")).encode()
                producer.produce(topic, key=key.encode(), value=value, partition=part,
                                 headers=codec.RecordHeaders(
                                     batch, seq, count, prev[part]).encode())
                if seq % 50_000 == 49_999:
                    producer.poll(0)
            if count:
                prev[part] = batch
        written += rows
        batch += 1
    producer.flush(120)
    return written


def raw_consume(bootstrap: str, topic: str) -> int:
    """Consume everything, touching key, value and headers: the speed of light here."""
    from statekit.kafka.clients import plain_consumer
    from statekit.kafka.offsets import consume_ranges, end_offsets

    consumer = plain_consumer(bootstrap)
    try:
        ranges = end_offsets(consumer, topic, list(range(PARTITIONS)))
        n = 0
        for chunk in consume_ranges(consumer, topic, ranges):
            for msg in chunk:
                msg.key(), msg.value(), msg.headers(), msg.offset(), msg.timestamp()
            n += len(chunk)
        return n
    finally:
        consumer.close()


def ship_table(bootstrap: str, topic: str, records: int):
    """``records`` rows (batch, partition, key, value) read back from the produced topic."""
    import pyarrow as pa

    from statekit.kafka.clients import plain_consumer
    from statekit.kafka.offsets import consume_ranges, end_offsets
    from statekit.model import changelog_record as codec

    rows: dict[str, list] = {"batch": [], "partition": [], "key": [], "value": []}
    consumer = plain_consumer(bootstrap)
    try:
        ranges = end_offsets(consumer, topic, list(range(PARTITIONS)))
        for chunk in consume_ranges(consumer, topic, ranges):
            for msg in chunk:
                rows["batch"].append(codec.RecordHeaders.parse(msg.headers()).batch)
                rows["partition"].append(msg.partition())
                rows["key"].append(msg.key())
                rows["value"].append(msg.value())
    finally:
        consumer.close()
    table = pa.table({"batch": pa.array(rows["batch"], pa.int64()),
                      "partition": pa.array(rows["partition"], pa.int32()),
                      "key": pa.array(rows["key"], pa.binary()),
                      "value": pa.array(rows["value"], pa.binary())}).slice(0, records)
    return table.sort_by([("batch", "ascending"), ("partition", "ascending")])


def ship_rounds(bootstrap: str, topic: str, table, per_round: int, statekit: bool) -> int:
    """Ship ``table`` in rounds of ``per_round`` batches; returns records delivered.

    ``statekit``: through the writer's ``ship_round`` and producer; else a bare idempotent
    producer of the same records and headers, flushed once per round.
    """
    import pyarrow.compute as pc
    from confluent_kafka import Producer

    from statekit.changelog.rounds import changelog_producer, ship_round
    from statekit.model import changelog_record as codec

    create_changelog_topic(bootstrap, topic)
    producer = (changelog_producer(bootstrap, topic) if statekit else
                Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                          "acks": "all", "linger.ms": 5,
                          "queue.buffering.max.messages": 1_000_000}))
    batches = sorted(set(table.column("batch").to_pylist()))
    prev = dict.fromkeys(range(PARTITIONS), -1)
    sent = 0
    for start in range(0, len(batches), per_round):
        chosen = batches[start:start + per_round]
        part = table.filter(pc.is_in(table["batch"], value_set=pc.cast(chosen, "int64")))
        if statekit:
            done = ship_round(producer, topic, part, dict.fromkeys(chosen, 0), prev, set(), 120)
            prev = done.prev
        else:
            cols = part.to_pydict()
            for b, p, k, v in zip(cols["batch"], cols["partition"], cols["key"],
                                  cols["value"], strict=True):
                producer.produce(topic, key=k, value=v, partition=p, timestamp=0,
                                 headers=codec.RecordHeaders(b, 0, 1, prev[p]).encode())
            assert producer.flush(120) == 0
        sent += part.num_rows
    return sent


def ship_main(args) -> dict:
    from statekit.kafka import EmbeddedBroker

    started = Run("changelog_ship")
    with EmbeddedBroker() as broker:
        bootstrap = broker.bootstrap_servers
        produce(bootstrap, "bench-source", args.ship, args.keys, args.batches)
        table = ship_table(bootstrap, "bench-source", args.ship)
        runs: dict[str, list[float]] = {"baseline": [], "ship": []}
        for round_ in range(args.repeats + 1):  # round 0 warms up
            for kind in ("baseline", "ship"):
                seconds, sent = timed(lambda kind=kind, round_=round_: ship_rounds(
                    bootstrap, f"bench-{kind}-{round_}", table, args.ship_batches,
                    kind == "ship"))
                assert sent == table.num_rows
                if round_:
                    runs[kind].append(seconds)
    figures = {k: median(v) for k, v in runs.items()}
    rounds = -(-args.batches // args.ship_batches)
    result = {"records": table.num_rows, "batches": args.batches, "rounds": rounds,
              "repeats": args.repeats, "seconds": figures, "runs": runs,
              "ship_vs_baseline": figures["ship"] / figures["baseline"]}
    print_table(f"shipping {table.num_rows:,} changelog records in {rounds} rounds", [
        ("bare idempotent producer (baseline)", f"{figures['baseline']:.2f} s  "
         f"({table.num_rows / figures['baseline']:,.0f} rec/s)"),
        ("ship_round (the writer's Kafka side)", f"{figures['ship']:.2f} s  "
         f"({table.num_rows / figures['ship']:,.0f} rec/s)"),
        ("ship time / baseline time", f"{result['ship_vs_baseline']:.2f}"),
    ])
    base = "bare idempotent producer, flushed per round (baseline)"
    write_result(started, [
        Figure(base, figures["baseline"], "s"),
        Figure("ship_round (the writer's Kafka side)", figures["ship"], "s", baseline=base,
               ratio=result["ship_vs_baseline"]),
        Figure("records shipped", table.num_rows, "records"),
    ], result, broker=embedded_kafka())
    return result


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m bench.changelog", description=__doc__)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=200_000, help="distinct windows")
    parser.add_argument("--batches", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--ship", type=int, default=0,
                        help="time shipping this many records instead (see above)")
    parser.add_argument("--ship-batches", type=int, default=5, help="batches per round")
    args = parser.parse_args(argv)
    if args.ship:
        return ship_main(args)
    started = Run("changelog")

    from statekit.changelog.compaction import compact, compaction_stats
    from statekit.changelog.reader import read_changelog
    from statekit.charts.changelog import log_vs_compacted_chart
    from statekit.kafka import EmbeddedBroker

    with EmbeddedBroker() as broker:
        bootstrap, topic = broker.bootstrap_servers, "bench-changelog"
        produce_s, written = timed(lambda: produce(bootstrap, topic, args.records, args.keys,
                                                   args.batches))
        runs: dict[str, list[float]] = {"baseline": [], "read": [], "compact": [], "chart": []}
        for round_ in range(args.repeats + 1):  # round 0 warms up
            base_s, n = timed(lambda: raw_consume(bootstrap, topic))
            read_s, raw = timed(lambda: read_changelog(bootstrap, topic, progress=False))
            compact_s, compacted = timed(lambda raw=raw: compact(raw))
            stats_s, stats = timed(lambda raw=raw, kept=compacted: compaction_stats(raw, kept))
            chart_s, spec = timed(
                lambda raw=raw, kept=compacted: log_vs_compacted_chart(raw, kept).to_dict())
            assert n == len(raw) == written, (n, len(raw), written)
            if round_:
                runs["baseline"].append(base_s)
                runs["read"].append(read_s)
                runs["compact"].append(compact_s + stats_s)
                runs["chart"].append(chart_s)
    figures = {k: median(v) for k, v in runs.items()}
    read_ratio = figures["baseline"] / figures["read"]
    result = {
        "records": written, "keys": args.keys, "repeats": args.repeats,
        "produce_s": produce_s, "seconds": figures, "runs": runs,
        "raw_consume_rec_per_s": written / figures["baseline"],
        "read_rec_per_s": written / figures["read"],
        "read_vs_raw_consume": read_ratio,
        "compacted_records": len(compacted), "tombstones": int(raw.records["tombstone"].sum()),
        "chart_under_2s": figures["chart"] < 2.0,
    }
    print_table(f"changelog of {written:,} records ({len(compacted):,} after compaction)", [
        ("raw consume (baseline)", f"{figures['baseline']:.2f} s  "
                                   f"({result['raw_consume_rec_per_s']:,.0f} rec/s)"),
        ("read_changelog → pandas", f"{figures['read']:.2f} s  "
                                    f"({result['read_rec_per_s']:,.0f} rec/s)"),
        ("read speed / raw consume", f"{read_ratio:.2f}"),
        ("compact + stats", f"{figures['compact']:.2f} s"),
        ("chart (a) build + to_dict", f"{figures['chart']:.2f} s  (target < 2 s: "
                                      f"{'met' if result['chart_under_2s'] else 'NOT met'})"),
        ("chart data rows", f"{sum(len(d) for d in spec.get('datasets', {}).values()):,}"),
    ])
    base = f"bare consume of {written:,} records (baseline)"
    write_result(started, [
        Figure(base, result["raw_consume_rec_per_s"], "records/s"),
        Figure("read_changelog into pandas", result["read_rec_per_s"], "records/s",
               baseline=base, ratio=read_ratio),
        Figure("compact + compaction_stats", figures["compact"], "s"),
        Figure("chart (a) build + to_dict", figures["chart"], "s", target="value < 2"),
    ], result, broker=embedded_kafka())
    return result


if __name__ == "__main__":
    main()
