"""The Kafka source at the log end: what a live micro-batch brings, read against a bare consumer.

A live query reads at the end of its topic: each batch's range starts where the last one
ended, which was the log end. Between batches the source's read consumers rest there, paused
(``statekit.spark.kafka_source.consumers``: a consumer kept at the end would ask the broker
for more every ``fetch.wait.max.ms``). One process, one EmbeddedBroker, one 4-partition topic.
Each round: ``--per-partition`` records are produced to each partition, then read; the two
sides run one after the other, each on a topic of its own:

- ``plain``: one confluent-kafka consumer with the source's own settings (``READ_SETTINGS``:
  ``fetch.wait.max.ms`` 10 ms, where librdkafka's default 500 ms made a bare consumer take
  ~50 ms a round on this broker) assigned to all 4 partitions and never paused,
  ``consume()`` until it holds the round's records;
- ``source``: what one read task of the source runs (``read_ranges``) for the round's 4
  offset ranges, its consumers kept between rounds as a Python worker keeps them.

Figures: the median seconds a round's read takes on each side (the first round, which
connects, left out) and their ratio source / plain, and the broker's CPU seconds over all
rounds on each side and their ratio: the plain consumer keeps fetching at the log end, the
source's consumers rest there, so the source trades a few milliseconds a batch (it positions
each partition's consumer in turn) for less of the broker's work. No target: issue 21 sets
none for a live batch's read; the figure to watch is the ratio against the round's ~1 s
before the resting readers were resumed before being assigned (``bench/README.md``).
Every record is checked to arrive exactly once.

    python -m bench.tail --rounds 20 --per-partition 50
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from bench.common import cpu_by_kind, cpu_snapshot, median, print_table, write_result
from bench.results import Figure, Run

PARTITIONS = 4


def _produce(producer, topic: str, per_partition: int) -> None:
    for partition in range(PARTITIONS):
        for i in range(per_partition):
            producer.produce(topic, value=f"{i}".encode(), partition=partition)
    producer.flush(30)


def _rounds(bootstrap: str, topic: str, rounds: int, per_partition: int, gap_s: float,
            read_round: Callable[[int, dict[int, list[int]]], None]) -> dict:
    """Produce a round, then time ``read_round(first offset of the round, seen)``, which adds
    the (partition → offsets) it read to ``seen``; ``rounds`` times, ``gap_s`` apart."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap})
    seen: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
    before, seconds = cpu_snapshot(), []
    for rnd in range(rounds):
        time.sleep(gap_s)   # the live query's trigger interval: the reader idles at the end
        _produce(producer, topic, per_partition)
        start = time.perf_counter()
        read_round(rnd * per_partition, seen)
        seconds.append(time.perf_counter() - start)
    return {"seconds": seconds, "cpu_s": cpu_by_kind(before, cpu_snapshot()), "offsets": seen}


def tail_plain(bootstrap: str, topic: str, rounds: int, per_partition: int,
               gap_s: float) -> dict:
    """A bare consumer kept assigned, and fetching, at the log end: seconds per round's read."""
    from confluent_kafka import Consumer, TopicPartition

    from statekit.spark.kafka_source.consumers import READ_SETTINGS

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-tail",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         **READ_SETTINGS})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])

    def read_round(first: int, seen: dict[int, list[int]]) -> None:
        want = PARTITIONS * (first + per_partition)
        while (have := sum(map(len, seen.values()))) < want:
            for msg in consumer.consume(want - have, 0.1):  # returns once it holds that many
                if msg.error() is None:
                    seen[msg.partition()].append(msg.offset())

    try:
        return _rounds(bootstrap, topic, rounds, per_partition, gap_s, read_round)
    finally:
        consumer.close()


def tail_source(bootstrap: str, topic: str, rounds: int, per_partition: int,
                gap_s: float) -> dict:
    """The source's read path at the log end: seconds per round's ``read_ranges``."""
    from statekit.spark.kafka_source.consumers import close_pooled_consumers
    from statekit.spark.kafka_source.offsets import KafkaInputPartition
    from statekit.spark.kafka_source.reading import read_ranges

    def read_round(first: int, seen: dict[int, list[int]]) -> None:
        ranges = [KafkaInputPartition(topic, p, first, first + per_partition, bootstrap, (),
                                      True) for p in range(PARTITIONS)]
        for batch in read_ranges(ranges):
            for partition, offset in zip(batch.column("partition").to_pylist(),
                                         batch.column("offset").to_pylist(), strict=True):
                seen[partition].append(offset)

    try:
        return _rounds(bootstrap, topic, rounds, per_partition, gap_s, read_round)
    finally:
        close_pooled_consumers()


def _after_the_first(seconds: list[float]) -> list[float]:
    """The rounds a figure counts: all but the first, which connects (all, if only one)."""
    return seconds[1:] or seconds


def exactly_once(offsets: dict[int, list[int]], rounds: int, per_partition: int) -> bool:
    """Each partition's offsets read are 0, 1, … in order, each once, ``rounds`` rounds' worth.

    Example:
        >>> exactly_once({p: [0, 1] for p in range(4)}, 1, 2)
        True
        >>> exactly_once({p: [0, 0] for p in range(4)}, 1, 2)
        False
    """
    want = list(range(rounds * per_partition))
    return sorted(offsets) == list(range(PARTITIONS)) and all(
        got == want for got in offsets.values())


def run(rounds: int = 20, per_partition: int = 50, gap_s: float = 0.2) -> dict:
    """Both readers, each on a topic of its own; write and print the figures."""
    import statekit as sk
    from statekit.kafka.topics import create_topic

    started = Run("tail")
    sides = {"plain": tail_plain, "source": tail_source}
    runs = {}
    with sk.EmbeddedBroker() as broker:
        for name, side in sides.items():
            topic = f"bench-tail-{name}-{time.monotonic_ns()}"
            create_topic(broker.bootstrap_servers, topic, partitions=PARTITIONS)
            runs[name] = side(broker.bootstrap_servers, topic, rounds, per_partition, gap_s)
    for r in runs.values():
        r["exactly_once"] = exactly_once(r.pop("offsets"), rounds, per_partition)
        r["median_s"] = median(_after_the_first(r["seconds"]))
        r["broker_cpu_s"] = r["cpu_s"].get("broker", float("nan"))
    broker = {name: r["broker_cpu_s"] for name, r in runs.items()}
    result = {"rounds": rounds, "per_partition": per_partition, "gap_s": gap_s,
              "partitions": PARTITIONS,
              "ratio_source_over_plain": runs["source"]["median_s"] / runs["plain"]["median_s"],
              "ratio_broker_cpu_source_over_plain": broker["source"] / broker["plain"],
              "runs": runs}
    write_result(started, figures_of(result), result)
    report(result)
    return result


def figures_of(r: dict) -> list[Figure]:
    """The results file's figures: each side's median round, and the broker's CPU."""
    base = "plain consumer at the log end, a round's read"
    base_cpu = "broker CPU over the rounds, plain consumer"
    plain, source = r["runs"]["plain"], r["runs"]["source"]
    return [
        Figure(base, plain["median_s"] * 1000, "ms"),
        Figure("source at the log end (read_ranges), a round's read", source["median_s"] * 1000,
               "ms", baseline=base, ratio=r["ratio_source_over_plain"]),
        Figure(base_cpu, plain["broker_cpu_s"], "CPU-s"),
        Figure("broker CPU over the rounds, source", source["broker_cpu_s"], "CPU-s",
               baseline=base_cpu, ratio=r["ratio_broker_cpu_source_over_plain"]),
    ]


def report(r: dict) -> None:
    plain, source = r["runs"]["plain"], r["runs"]["source"]

    def ms(side: dict) -> str:
        s = _after_the_first(side["seconds"])
        return (f"{side['median_s'] * 1000:.1f} ms ({min(s) * 1000:.1f}–{max(s) * 1000:.1f}); "
                f"broker {side['broker_cpu_s']:.2f} CPU-s; every record once: "
                f"{side['exactly_once']}")

    print_table(f"the source at the log end, {r['rounds']} rounds of {r['per_partition']} "
                f"records in each of {r['partitions']} partitions, {r['gap_s']:g} s apart", [
        ("plain consumer, a round's read", ms(plain)),
        ("source (read_ranges), a round's read", ms(source)),
        ("ratio source / plain: a round's read", f"{r['ratio_source_over_plain']:.2f}"),
        ("ratio source / plain: the broker's CPU",
         f"{r['ratio_broker_cpu_source_over_plain']:.2f}"),
    ])


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m bench.tail", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--per-partition", type=int, default=50)
    parser.add_argument("--gap", type=float, default=0.2, help="seconds between rounds")
    args = parser.parse_args(argv)
    return run(args.rounds, args.per_partition, args.gap)


if __name__ == "__main__":
    main()
