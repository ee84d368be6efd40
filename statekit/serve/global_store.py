"""A global store: every serving instance holds all of a topic, restored from the topic itself.

Kafka Streams' ``GlobalKTable`` / global store: each instance consumes *every*
partition of a (compacted) topic into a local store, so any key is answered
locally, with no routing — at the price of every instance holding, and
restoring, everything. It has no changelog of its own: the topic is its own
changelog (records are written as they come; a tombstone deletes).

Typical use is a small reference table beside a partitioned aggregate: player
profiles for the leaderboard, airline names for the flights, used to enrich
answers (``top_k(..., enrich=...)``). Pointed at a statekit changelog topic, it
is the whole aggregate on every instance: the other side of the seeds'
trade-off, against a partitioned store with scatter-gather.

Keys: record keys that are compact JSON objects of ``key_columns`` (a statekit
changelog: ``changelog_key_columns(spec.key_columns)``) are stored as they are;
plain keys (``p07``, ``plain_keys=True``) are stored as the value of the one key
column; rows read back as dicts either way.

Example:
    >>> profiles = GlobalStore(broker, "player-profiles", "/tmp/global",  # doctest: +SKIP
    ...                        key_columns=["player"], plain_keys=True).start()
    >>> profiles.wait_running(); profiles.get("p07")                     # doctest: +SKIP
    {'player': 'p07', 'name': 'Ada', 'team': 'red'}
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd
from confluent_kafka import TopicPartition

from statekit.errors import BadArgument
from statekit.kafka.background import BackgroundLoop, consume_records
from statekit.kafka.clients import plain_consumer
from statekit.kafka.offsets import end_offsets
from statekit.kafka.topics import partition_count
from statekit.model.changelog_record import encode_json
from statekit.model.connection import Kafka, connect
from statekit.options.serve import GlobalTable
from statekit.restore.partition_status import RESTORING, RUNNING
from statekit.stores import StateStore, open_store
from statekit.validate import kafka_name


class GlobalStore(BackgroundLoop):
    """All partitions of ``topic`` in one local key-value store, kept current.

    Args:
        kafka: the cluster (a ``KafkaConnection``, ``"host:port"`` or an EmbeddedBroker).
        topic: the topic to hold whole (compacted: the latest record per key counts).
        directory: where the RocksDB store lives; None keeps it in memory.
        key_columns: the key's columns, in the order the record keys write them.
        plain_keys: record keys are plain text, the value of the one key column.
        name: the store's name (default: the topic).
    """

    def __init__(self, kafka: Kafka, topic: str, directory: str | os.PathLike | None = None, *,
                 key_columns: Sequence[str], plain_keys: bool = False,
                 name: str | None = None, checkpoint_every: float = 1.0):
        self.kafka, self.topic = connect(kafka), kafka_name(topic, "topic")
        self.name = kafka_name(name or topic, "global store name")
        super().__init__(f"global-{self.name}")
        self.key_columns = [key_columns] if isinstance(key_columns, str) else list(key_columns)
        if plain_keys and len(self.key_columns) != 1:
            raise BadArgument("key_columns of plain keys", key_columns, "exactly one column")
        self.plain_keys = plain_keys
        self.partitions = partition_count(self.kafka, topic)
        path = None if directory is None else Path(directory) / "global" / self.name
        self.store: StateStore = open_store("key-value", self.name, 0, path,
                                            key_columns=self.key_columns, changelog_topic=topic)
        self.checkpoint_every = checkpoint_every
        checkpoint = self.store.read_checkpoint()
        consumer = plain_consumer(self.kafka)
        try:
            ends = end_offsets(consumer, topic, list(range(self.partitions)))
        finally:
            consumer.close()
        self._next = {p: checkpoint.get(p, low) for p, (low, _) in ends.items()}
        self._restore_to = {p: end for p, (_, end) in ends.items()}
        self._start = dict(self._next)
        self._lock = threading.Lock()

    @classmethod
    def for_table(cls, table: GlobalTable, kafka: Kafka,
                  directory: str | os.PathLike | None) -> GlobalStore:
        """The global store ``table`` describes (not started), under ``directory``."""
        return cls(kafka, table.topic, directory, key_columns=table.key_columns,
                   plain_keys=table.plain_keys, name=table.name)

    # --- state ------------------------------------------------------------------------------
    @property
    def state(self) -> str:
        """``restoring`` until every partition has been read to where it ended at start."""
        with self._lock:
            done = all(self._next[p] >= self._restore_to[p] for p in self._next)
        return RUNNING if done else RESTORING

    @property
    def restored(self) -> int:
        with self._lock:
            return sum(self._next[p] - self._start[p] for p in self._next)

    @property
    def to_restore(self) -> int:
        return sum(max(0, self._restore_to[p] - self._start[p]) for p in self._next)

    def wait_running(self, timeout: float = 120.0) -> GlobalStore:
        """Block until restored; TimeoutError says how far it got."""
        deadline = time.monotonic() + timeout
        while self.state != RUNNING:
            self.raise_if_failed()
            if time.monotonic() > deadline:
                raise TimeoutError(f"global store {self.name!r} still restoring after "
                                   f"{timeout:.0f} s: {self.restored:,} of "
                                   f"{self.to_restore:,} records")
            time.sleep(0.02)
        return self

    # --- reading ----------------------------------------------------------------------------
    def _store_key(self, key: object) -> bytes:
        if self.plain_keys and not isinstance(key, Mapping):
            key = {self.key_columns[0]: key}
        if isinstance(key, str | bytes):
            try:
                key = json.loads(key)
            except ValueError:
                raise BadArgument("key", key, f"a JSON object of {self.key_columns}") from None
        if not isinstance(key, Mapping) or any(key.get(c) is None for c in self.key_columns):
            raise BadArgument("key", key, f"a value for each key column {self.key_columns}")
        return encode_json(key, self.key_columns)

    def get(self, key: object) -> dict | None:
        """The row of ``key`` (key columns and value), or None."""
        self.raise_if_failed()
        data = self._store_key(key)
        value = self.store.get_raw(data)
        if value is None:
            return None
        row = json.loads(value)
        return {**json.loads(data), **row} if isinstance(row, dict) else {
            **json.loads(data), "value": row}

    def to_pandas(self) -> pd.DataFrame:
        """Every row held."""
        self.raise_if_failed()
        return self.store.to_pandas()

    def approximate_num_entries(self) -> int:
        return self.store.approximate_num_entries()

    # --- following the topic (``start()``, ``stop()``; ``close()`` closes the store too) ------
    def _record_key(self, raw: bytes | None) -> bytes | None:
        if raw is None or not self.plain_keys:
            return raw
        return encode_json({self.key_columns[0]: raw.decode("utf-8", "replace")},
                           self.key_columns)

    def _loop(self) -> None:
        consumer = plain_consumer(self.kafka, **{"enable.partition.eof": False})
        with contextlib.closing(consumer):
            consumer.assign([TopicPartition(self.topic, p, o) for p, o in self._next.items()])
            next_checkpoint = time.monotonic() + self.checkpoint_every
            while not self.stop_requested:
                records, last = [], {}
                for msg in consume_records(consumer, timeout=0.05):
                    key = self._record_key(msg.key())
                    if key is not None:  # a record without a key cannot be looked up
                        records.append((key, msg.value()))
                    last[msg.partition()] = msg.offset() + 1
                if records:
                    self.store.write_raw(records)
                with self._lock:
                    self._next.update(last)
                if time.monotonic() >= next_checkpoint:
                    self.store.write_checkpoint(dict(self._next))
                    next_checkpoint = time.monotonic() + self.checkpoint_every
            self.store.write_checkpoint(dict(self._next))  # its error: by get() / stop()

    def _close_resources(self) -> None:
        self.store.close()

    def __repr__(self) -> str:
        return f"GlobalStore({self.name!r}, topic={self.topic!r}, {self.state})"
