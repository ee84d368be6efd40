"""A changelog written here batch by batch, as statekit's writer ships one (no Spark needed).

A real topic on the real broker, in the changelog's own format (key and value
JSON, the batch headers on every record), that a serving instance restores and
follows. A test moves it on one batch at a time (``ship()``), which is what
waits for ``min_batch`` need: a store that reaches the batch asked for while the
query waits.
"""

from __future__ import annotations

import json

from confluent_kafka import Producer

from statekit.changelog import naming
from statekit.kafka.topics import create_topic
from statekit.model import changelog_record as codec
from statekit.model.query_spec import QuerySpec, tumbling
from statekit.model.store_schema import StoreSchema
from statekit.serve.routing.key_codec import KeyCodec

SPEC = QuerySpec(keys=["player"], window=tumbling("10 minutes"), aggregates=["count"])
START = 1_767_607_200_000  # 2026-01-05T10:00:00Z: the one window every batch counts in


class HandLog:
    """A 10-minute count per player: one player per partition, one record each per batch."""

    def __init__(self, broker, topic: str, partitions: int = 3):
        create_topic(broker.bootstrap_servers, topic, partitions,
                     naming.topic_config(True, 7 * 86_400_000))
        self.topic = topic
        self.schema = StoreSchema(SPEC, {"player": "string"}, partitions)
        self.codec = KeyCodec(SPEC, {"player": "string"}, partitions)
        self.players: dict[int, str] = {}  # partition -> a player whose window lives there
        n = 0
        while len(self.players) < partitions:
            name = f"p{n:02d}"
            self.players.setdefault(self.codec.partition(self.key_of(name)), name)
            n += 1
        self.players = dict(sorted(self.players.items()))
        self.counts = dict.fromkeys(self.players, 0)
        self.batch = -1
        self._producer = Producer({"bootstrap.servers": broker.bootstrap_servers})

    @staticmethod
    def key_of(player: str) -> dict:
        return {"player": player, "window_start": START}

    def key(self, partition: int) -> dict:
        """The key of the row that lives in ``partition``."""
        return self.key_of(self.players[partition])

    def ship(self) -> int:
        """One batch more: every partition's player counts one more. Returns the batch."""
        self.batch += 1
        for p, player in self.players.items():
            self.counts[p] += 1
            key = self.codec.store_key(self.codec.key(self.key_of(player)))
            self._producer.produce(self.topic, key=key, partition=p,
                                   value=json.dumps({"count": self.counts[p]}).encode(),
                                   headers=codec.RecordHeaders(
                                       self.batch, 0, 1, self.batch - 1).encode())
        assert self._producer.flush(30) == 0
        return self.batch

    def close(self) -> None:
        self._producer.flush(10)
        self._producer = None  # destroyed now, not after the broker has stopped
