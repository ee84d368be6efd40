"""The embedded Apache Kafka broker: how long until it answers, and how much memory it holds.

``python -m bench.broker [--repeats N]``: each repetition starts an ``EmbeddedBroker`` on a
new folder (formatting it is part of the start: a second JVM runs Kafka's storage tool) and
times it until it answers a metadata request; then stops it and starts it again from its own
log, and kills it (``kill -9``) and starts it again. The baseline, measured in the same run: a
bare JVM of the same Java with the same flags and class path, running nothing (``-version``)
— what any Java broker pays before its first line of its own. Target: ready in ≤ 8 s here.
Memory: the broker's resident set (RSS) once ready, and after 10,000 records written and read.
"""

from __future__ import annotations

import argparse
import subprocess
import time

from bench.common import embedded_kafka, median, print_table, write_result
from bench.results import Figure, Run

RECORDS = 10_000


def _rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def bare_jvm_s() -> float:
    """A JVM of the broker's own command, running nothing but ``-version``."""
    from statekit.kafka import EmbeddedBroker

    probe = EmbeddedBroker()
    probe._prepare_dir()
    java = probe._java()
    started = time.perf_counter()
    subprocess.run([*java, "-version"], capture_output=True, check=True)
    took = time.perf_counter() - started
    probe.close()
    return took


def one_round() -> dict:
    """One broker: fresh start, a little traffic, restart, kill -9 and start."""
    from confluent_kafka import Producer

    from statekit.kafka import EmbeddedBroker, create_topic
    from statekit.kafka.clients import plain_consumer
    from statekit.kafka.offsets import consume_ranges

    broker = EmbeddedBroker()
    try:
        started = time.perf_counter()
        broker.start()
        fresh = time.perf_counter() - started
        rss_ready = _rss_mib(broker.pid)
        create_topic(broker.bootstrap_servers, "bench-broker", partitions=4)
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers,
                             "linger.ms": 5, "partitioner": "murmur2_random"})
        for i in range(RECORDS):
            producer.produce("bench-broker", key=str(i % 500).encode(), value=b"x" * 100)
            if i % 1000 == 0:
                producer.poll(0)
        assert producer.flush(30) == 0
        del producer  # no client left to reconnect while the broker restarts below
        consumer = plain_consumer(broker.bootstrap_servers)
        read = sum(len(chunk) for chunk in consume_ranges(
            consumer, "bench-broker", {p: (0, RECORDS) for p in range(4)}))
        consumer.close()
        rss_used = _rss_mib(broker.pid)
        broker.stop()
        started = time.perf_counter()
        broker.start()
        restart = time.perf_counter() - started
        broker.kill()
        started = time.perf_counter()
        broker.start()
        after_kill = time.perf_counter() - started
    finally:
        broker.close()
    return {"fresh_s": fresh, "restart_s": restart, "after_kill_s": after_kill,
            "rss_ready_mib": rss_ready, "rss_after_traffic_mib": rss_used, "read": read}


def run(repeats: int = 3) -> dict:
    started = Run("broker")
    bare = [bare_jvm_s() for _ in range(repeats)]
    rounds = [one_round() for _ in range(repeats)]
    result = {"repeats": repeats, "records": RECORDS, "bare_jvm_s": bare, "rounds": rounds}
    for key in ("fresh_s", "restart_s", "after_kill_s", "rss_ready_mib",
                "rss_after_traffic_mib"):
        result[key] = median(r[key] for r in rounds)
    result["bare_jvm_median_s"] = median(bare)
    result["ratio_fresh_over_bare_jvm"] = result["fresh_s"] / result["bare_jvm_median_s"]
    write_result(started, figures_of(result), result, broker=embedded_kafka())
    report(result)
    return result


def figures_of(r: dict) -> list[Figure]:
    base = "a bare JVM of the broker's command (-version)"
    return [
        Figure(base, r["bare_jvm_median_s"], "s"),
        Figure("embedded Apache Kafka broker ready, new folder (format + start)", r["fresh_s"],
               "s", baseline=base, ratio=r["ratio_fresh_over_bare_jvm"],
               target="value <= 8"),
        Figure("ready again from its own log after stop()", r["restart_s"], "s"),
        Figure("ready again from its own log after kill -9", r["after_kill_s"], "s"),
        Figure("broker RSS once ready", r["rss_ready_mib"], "MiB"),
        Figure(f"broker RSS after {RECORDS:,} records written and read",
               r["rss_after_traffic_mib"], "MiB"),
    ]


def report(r: dict) -> None:
    print_table(f"the embedded Apache Kafka broker, {r['repeats']} repetitions (medians)", [
        ("bare JVM (-version)", f"{r['bare_jvm_median_s']:.2f} s"),
        ("ready, new folder (format + start)",
         f"{r['fresh_s']:.2f} s  ({r['ratio_fresh_over_bare_jvm']:.1f}x the bare JVM; "
         f"target <= 8 s: {'met' if r['fresh_s'] <= 8 else 'NOT met'})"),
        ("ready again after stop()", f"{r['restart_s']:.2f} s"),
        ("ready again after kill -9", f"{r['after_kill_s']:.2f} s"),
        ("RSS once ready", f"{r['rss_ready_mib']:.0f} MiB"),
        (f"RSS after {r['records']:,} records", f"{r['rss_after_traffic_mib']:.0f} MiB"),
    ])


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m bench.broker", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    return run(args.repeats)


if __name__ == "__main__":
    main()
