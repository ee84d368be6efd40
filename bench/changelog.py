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

    python -m bench.changelog --records 1000000 --repeats 3
"""

from __future__ import annotations

import argparse
import json

from bench.common import median, print_table, timed, write_result

PARTITIONS = 3


def produce(bootstrap: str, topic: str, records: int, keys: int, batches: int) -> int:
    """Produce ``records`` changelog records; returns how many were written."""
    from confluent_kafka import Producer

    from statekit.changelog import format as fmt
    from statekit.kafka.topics import create_topic

    create_topic(bootstrap, topic, PARTITIONS, fmt.topic_config(True, 7 * 24 * 3600 * 1000))
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
                                 headers=fmt.headers(batch, seq, count, prev[part]))
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
    from statekit.kafka.topics import consume_ranges, end_offsets, plain_consumer

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


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m bench.changelog", description=__doc__)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=200_000, help="distinct windows")
    parser.add_argument("--batches", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)

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
    write_result("changelog", result)
    return result


if __name__ == "__main__":
    main()
