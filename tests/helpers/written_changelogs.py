"""A statekit changelog written straight to the broker (no Spark): the restore tests' input.

``write_changelog`` writes a 3-partition windowed count/sum changelog with updates and
tombstones, and returns what a store restored from it holds; ``store_values`` reads the same
from a restored store's table.
"""

from __future__ import annotations

import json
import random

import pandas as pd

from statekit.kafka.topics import create_topic


def write_changelog(bootstrap: str, topic: str, per_batch: int, batches: int = 4,
                     keyless: tuple[int, int] | None = None) -> dict:
    """A 3-partition changelog: ``batches`` batches of ``per_batch`` records a partition
    (updates and tombstones); the latest (count, sum_score) per (player, window start)
    a store holds after it. ``keyless`` (partition, offset): that record has no key."""
    from confluent_kafka import Producer

    from statekit.changelog import naming
    from statekit.model import changelog_record as codec

    # Apache Kafka refuses a record without a key on a compacted topic: one that holds such a
    # record is a time-retained topic (not a changelog, restored from by mistake)
    create_topic(bootstrap, topic, 3, {"cleanup.policy": "delete", "retention.ms": "-1"}
                 if keyless else naming.topic_config(True, 7 * 86_400_000))
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    rng = random.Random(11)
    latest: dict = {}
    prev = dict.fromkeys(range(3), -1)
    for batch in range(batches):
        for part in range(3):
            for seq in range(per_batch):
                player, hour = f"p{part}-{rng.randrange(300)}", rng.randrange(3)
                start = f"2026-01-05T{hour:02d}:00:00.000Z"
                key = json.dumps({"player": player, "window_start": start,
                                  "window_end": f"2026-01-05T{hour + 1:02d}:00:00.000Z"},
                                 separators=(",", ":"))
                if rng.random() < 0.1:
                    value, latest[(player, start)] = None, None
                else:
                    count, total = rng.randrange(1, 50), rng.randrange(1000)
                    value = json.dumps({"count": count, "sum_score": total}).encode()
                    latest[(player, start)] = (count, total)
                no_key = keyless == (part, batch * per_batch + seq)
                producer.produce(topic, key=None if no_key else key.encode(), value=value,
                                 partition=part, headers=codec.RecordHeaders(
                                     batch, seq, per_batch, prev[part]).encode())
            prev[part] = batch
            producer.poll(0)
    producer.flush(60)
    return {k: v for k, v in latest.items() if v is not None}


def store_values(table: pd.DataFrame) -> dict:
    """(player, window start) → (count, sum_score) of a restored store's table."""
    starts = pd.to_datetime(table["window_start"]).dt.strftime("%Y-%m-%dT%H:%M:%S.000Z")
    return {(player, start): (int(count), int(total)) for player, start, count, total in
            zip(table["player"], starts, table["count"], table["sum_score"], strict=True)}
