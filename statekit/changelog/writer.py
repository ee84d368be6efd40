"""Ship every committed batch's state changes of a query to its changelog topic, once.

``ChangelogWriter`` follows a query's commit log. For each new committed batch
it reads the batch's exact state changes with Spark's change-feed reader
(``StateReader.changes_frame``), encodes key and value as JSON inside Spark,
and produces one record per change to the Kafka partition of the state
partition holding the key (format: ``statekit.changelog.format``).

Exactly once across crashes: after each shipping round is flushed, a ledger
beside the checkpoint (``_statekit/changelog/<topic>.json``) records the last
shipped batch, each partition's next offset and its last batch. A restart
reads the few records written after the ledger's offsets (a round cut short
by a crash) and skips those (batch, seq) pairs when it ships the round again:
no batch is repeated, none is missing. Then it publishes the round's positions to
the metadata topic (``statekit.changelog.meta``) so readers know which batch they hold.

Example:
    >>> writer = ChangelogWriter(query.state, broker,                     # doctest: +SKIP
    ...                          "leaderboard-counts-changelog")
    >>> writer.ship()           # ships every committed batch not shipped yet  # doctest: +SKIP
    3
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import KafkaError, Producer
from pyspark.sql import functions as F

from statekit.changelog import format as fmt
from statekit.changelog import meta
from statekit.changelog.ledger import Ledger, LedgerState
from statekit.durations import to_millis
from statekit.errors import BatchNotRetained, ChangelogError, DataLoss
from statekit.kafka.connection import Kafka, connect
from statekit.kafka.topics import (
    consume_ranges,
    create_topic,
    describe_topic_config,
    end_offsets,
    list_topics,
    plain_consumer,
)
from statekit.state.reader import StateReader
from statekit.validate import batch_id

LOG = logging.getLogger("statekit.changelog")
_JSON_OPTIONS = {"timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'", "ignoreNullFields": "false"}


def changelog_retention_ms(state: StateReader) -> int:
    """How long a windowed changelog keeps records: window + watermark delay + 1 day.

    Kafka Streams keeps a window store's changelog for the store's retention
    plus ``windowstore.changelog.additional.retention.ms`` (1 day by default).
    """
    spec = state.spec
    return spec.window.size_ms + to_millis(spec.watermark) + fmt.ADDITIONAL_RETENTION_MS


def changelog_producer(kafka: Kafka, topic: str) -> Producer:
    """The producer a writer ships ``topic`` with: idempotent, acks=all."""
    conn = connect(kafka)
    return Producer(conn.client_config(**{
        "enable.idempotence": True, "acks": "all", "linger.ms": 5,
        "queue.buffering.max.messages": 1_000_000, **conn.config}))


@dataclass(frozen=True)
class Round:
    """What one shipping round did: each partition's last batch, records skipped as already
    there, and each partition's offset after its last record delivered in the round."""

    prev: dict[int, int]
    skipped: int
    ends: dict[int, int]


def ship_round(producer: Producer, topic: str, table: pa.Table, stamps: Mapping[int, int],
               prev: Mapping[int, int], done: set[tuple[int, int, int]], timeout: float
               ) -> Round:
    """Produce ``table``'s rows (batch, partition, key, value; grouped by batch, then
    partition) to ``topic`` with statekit's headers, skipping the (partition, batch, seq)
    in ``done``; ChangelogError when not all are delivered within ``timeout`` seconds.

    ``stamps``: batch → its trigger time (ms); ``prev``: partition → the last batch that
    wrote there before this round.
    """
    failures: list[KafkaError] = []
    ends: dict[int, int] = {}

    def delivered(err, msg):
        if err is not None:
            failures.append(err)
        elif msg.offset() >= ends.get(msg.partition(), 0):
            ends[msg.partition()] = msg.offset() + 1

    cols = table.to_pydict()
    batch_col, part_col, keys, values = (cols["batch"], cols["partition"], cols["key"],
                                         cols["value"])
    n, i, skipped = len(batch_col), 0, 0
    prev = dict(prev)
    while i < n:  # one run of rows per (batch, partition)
        batch, part = batch_col[i], part_col[i]
        j = i
        while j < n and batch_col[j] == batch and part_col[j] == part:
            j += 1
        count, stamp = j - i, stamps[batch]
        for seq in range(count):
            if (part, batch, seq) in done:
                skipped += 1
                continue
            producer.produce(topic, key=keys[i + seq], value=values[i + seq],
                             partition=part, timestamp=stamp,
                             headers=fmt.headers(batch, seq, count, prev[part]),
                             on_delivery=delivered)
            if seq % 10_000 == 9_999:
                producer.poll(0)
        prev[part] = batch
        i = j
    left = producer.flush(timeout)
    if left or failures:
        raise ChangelogError(str(failures[0]) if failures else
                             f"{left} records still queued after {timeout:g} s")
    return Round(prev, skipped, ends)


class ChangelogWriter:
    """Ships a query's committed state changes to ``topic``; ``start()`` does it in the background.

    Args:
        state: the query's state reader (checkpoint and what the state holds).
        kafka: the Kafka cluster (a ``KafkaConnection``, ``"host:port"`` or an EmbeddedBroker).
        topic: the changelog topic (``changelog_topic(app, store)``); created when
            missing with ``compact,delete`` and ``retention.ms`` (windowed state).
        poll_interval: seconds between looks at the commit log when idle.
        flush_timeout: seconds a shipping round may take to deliver its records.
    """

    def __init__(self, state: StateReader, kafka: Kafka, topic: str, *,
                 poll_interval: float = 0.2, flush_timeout: float = 60.0):
        self.state, self.topic = state, topic
        self.kafka = connect(kafka)
        self.poll_interval, self.flush_timeout = poll_interval, flush_timeout
        self.ledger = Ledger(state.checkpoint.ledger_path(topic), topic)
        #: where readers learn what the store holds and how far each partition is shipped
        self.meta_topic = meta.meta_topic(topic)
        self._published = False
        self.skipped = 0  # records found already shipped by a round a crash cut short
        self._producer: Producer | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._error: BaseException | None = None

    @property
    def bootstrap_servers(self) -> str:
        return self.kafka.bootstrap_servers

    @property
    def ledger_path(self) -> str:
        return self.ledger.path

    @property
    def shipped_batch(self) -> int:
        """The last batch whose changes are all in the topic (-1 before the first)."""
        ledger = self.ledger.read()
        return ledger.last_batch if ledger else -1

    # --- topic ----------------------------------------------------------------------
    def _ensure_topic(self, partitions: int) -> None:
        existing = list_topics(self.kafka)
        if self.topic not in existing:
            windowed = self.state.spec.window is not None  # a key-value store keeps every key
            create_topic(self.kafka, self.topic, partitions, fmt.topic_config(
                windowed, changelog_retention_ms(self.state) if windowed else None))
            return
        if existing[self.topic] != partitions:
            raise ChangelogError(
                f"changelog topic {self.topic!r} has {existing[self.topic]} partitions but the "
                f"state store has {partitions}: delete the topic or name another store")
        policy = describe_topic_config(self.kafka, self.topic).get("cleanup.policy", "")
        if "compact" not in policy:
            raise ChangelogError(
                f"topic {self.topic!r} has cleanup.policy={policy!r}, not a changelog's "
                f"'compact' or 'compact,delete': is it another application's topic?")

    def _fresh_ledger(self, partitions: int) -> LedgerState:
        """A ledger for a topic statekit has not shipped to from this checkpoint."""
        consumer = plain_consumer(self.kafka)
        try:
            ends = end_offsets(consumer, self.topic, list(range(partitions)))
        finally:
            consumer.close()
        holding = {p: hi - lo for p, (lo, hi) in ends.items() if hi > lo}
        if holding:
            raise ChangelogError(
                f"changelog topic {self.topic!r} already holds records ({holding} per partition) "
                f"that this checkpoint ({self.state.checkpoint!r}) did not write: delete the "
                f"topic (statekit.kafka.delete_topic) or name another store")
        return LedgerState.fresh(self.topic, {p: hi for p, (_, hi) in ends.items()})

    def _already_shipped(self, ledger: LedgerState) -> set[tuple[int, int, int]]:
        """(partition, batch, seq) of records written after the ledger: a cut-short round."""
        if self.topic not in list_topics(self.kafka):
            raise ChangelogError(
                f"the ledger {self.ledger_path!r} says batches up to {ledger.last_batch} were "
                f"shipped to topic {self.topic!r}, but the broker has no topic {self.topic!r} "
                f"(another broker, or the topic was deleted): delete {self.ledger_path!r} to "
                f"ship the checkpoint's batches again from the start")
        consumer = plain_consumer(self.kafka)
        found: set[tuple[int, int, int]] = set()
        try:
            ends = end_offsets(consumer, self.topic, list(ledger.next_offset))
            for p, (lo, hi) in ends.items():
                if hi < ledger.next_offset[p] or lo > ledger.next_offset[p]:
                    raise ChangelogError(
                        f"changelog topic {self.topic!r} partition {p} now spans offsets "
                        f"{lo}..{hi}, but batches up to {ledger.last_batch} were shipped up "
                        f"to offset {ledger.next_offset[p]}: was the topic deleted or "
                        f"recreated? Delete {self.ledger_path!r} and the topic to ship again")
            ranges = {p: (ledger.next_offset[p], hi) for p, (_, hi) in ends.items()}
            for chunk in consume_ranges(consumer, self.topic, ranges):
                for msg in chunk:
                    head = fmt.parse_headers(msg.headers())
                    if head is None:
                        raise ChangelogError(
                            f"topic {self.topic!r} partition {msg.partition()} offset "
                            f"{msg.offset()} has no statekit headers: another producer "
                            f"writes to this changelog")
                    found.add((msg.partition(), head[fmt.H_BATCH], head[fmt.H_SEQ]))
        finally:
            consumer.close()
        return found

    # --- shipping -------------------------------------------------------------------
    def _encoded_changes(self, first: int, last: int) -> pa.Table:
        """batch, partition, key (JSON bytes), value (JSON bytes, null for deletes), in order."""
        spec = self.state.spec
        frame = self.state.changes_frame(first, last)
        key = F.to_json(F.struct(*fmt.changelog_key_columns(spec.key_columns)), _JSON_OPTIONS)
        value = F.to_json(F.struct(*spec.value_columns), _JSON_OPTIONS)
        encoded = frame.select(
            "batch", "partition", key.cast("binary").alias("key"),
            F.when(F.col("change") == "put", value).cast("binary").alias("value"))
        table = encoded.toArrow()
        # Spark returns each state partition's rows in write order; keep it within a
        # batch and partition while grouping by batch, then partition.
        # (Arrow's sort is stable.)
        return table.take(pc.sort_indices(table, [("batch", "ascending"),
                                                  ("partition", "ascending")]))

    def ship(self, through: int | None = None) -> int:
        """Ship the committed batches not shipped yet (up to ``through``); returns the last shipped.
        """
        if through is not None:
            through = batch_id(through, "through")
        with self._lock:
            return self._ship_committed(through)

    def _ship_committed(self, through: int | None) -> int:
        checkpoint = self.state.checkpoint
        batches = checkpoint.committed_batches()
        if through is not None:
            batches = [b for b in batches if b <= through]
        if not batches:
            return self.shipped_batch
        ledger = self.ledger.read()
        if ledger is None:
            partitions = checkpoint.shuffle_partitions()
            self._ensure_topic(partitions)
            ledger = self._fresh_ledger(partitions)
            done = set()
        else:
            done = self._already_shipped(ledger)
        if not self._published:  # a crash may have come between a ledger and its positions
            self._publish_positions(ledger, batches[-1])
        first, last = ledger.last_batch + 1, batches[-1]
        if first > last:
            return ledger.last_batch
        if first < batches[0]:
            raise DataLoss(
                f"changelog {self.topic!r} was shipped up to batch {first - 1}, but the "
                f"checkpoint {str(checkpoint)!r} now keeps batches {batches[0]}..{last}: "
                f"the changes of batches {first}..{batches[0] - 1} are gone")
        try:
            table = self._encoded_changes(first, last)
        except BatchNotRetained as exc:
            raise DataLoss(f"cannot ship batches {first}..{last} to {self.topic!r}: {exc}"
                           ) from None
        self._produce(table, first, last, ledger, done)
        return last

    def _produce(self, table: pa.Table, first: int, last: int, ledger: LedgerState,
                 done: set[tuple[int, int, int]]) -> None:
        stamps = {b: self.state.checkpoint.batch_timestamp_ms(b)
                  for b in set(table.column("batch").to_pylist())}
        try:
            shipped = ship_round(self._producer_once(), self.topic, table, stamps, ledger.prev,
                                 done, self.flush_timeout)
        except ChangelogError as exc:
            raise ChangelogError(f"shipping batches {first}..{last} to {self.topic!r} failed: "
                                 f"{exc}; the next ship() resumes where this one stopped"
                                 ) from None
        self.skipped += shipped.skipped
        consumer = plain_consumer(self.kafka)
        try:
            ends = end_offsets(consumer, self.topic, list(ledger.next_offset))
        finally:
            consumer.close()
        after = ledger.after_round(last, shipped.prev, {p: hi for p, (_, hi) in ends.items()})
        self.ledger.write(after)
        self._publish_positions(after, last)

    def store_schema(self, batch: int) -> meta.StoreSchema:
        """What the store holds: the spec, the key columns' Spark types, the partitions."""
        fields = self.state.snapshot_frame(batch).schema
        keys = self.state.spec.keys
        types = {f.name: f.dataType.simpleString() for f in fields if f.name in keys}
        return meta.StoreSchema(self.state.spec, types, self.state.checkpoint.shuffle_partitions())

    def _publish_positions(self, ledger: LedgerState, committed: int) -> None:
        """Tell readers what the store holds (once) and how far each partition is shipped."""
        producer = self._producer_once()
        if not self._published:
            create_topic(self.kafka, self.meta_topic, 1, meta.TOPIC_CONFIG)
            key, value = meta.encode_schema(self.store_schema(committed))
            producer.produce(self.meta_topic, key=key, value=value, partition=0)
        for partition, offset in sorted(ledger.next_offset.items()):
            key, value = meta.encode_position(
                partition, batch=ledger.last_batch, next_offset=offset,
                prev=ledger.prev[partition])
            producer.produce(self.meta_topic, key=key, value=value, partition=0)
        left = producer.flush(30)
        if left:
            raise ChangelogError(f"publishing positions to {self.meta_topic!r} failed: "
                                 f"{left} records still queued after 30 s")
        self._published = True

    def _producer_once(self) -> Producer:
        if self._producer is None:
            self._producer = changelog_producer(self.kafka, self.topic)
        return self._producer

    # --- background -----------------------------------------------------------------
    def start(self) -> ChangelogWriter:
        """Ship in a background thread as batches commit, until ``stop()``."""
        if self._thread is None or not self._thread.is_alive():
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name=f"ship-{self.topic}",
                                            daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                before = self.shipped_batch
                if self.ship() == before:
                    self._stop.wait(self.poll_interval)
            except BaseException as exc:  # surfaced by wait_shipped() / stop()
                LOG.error("changelog %s: %s", self.topic, exc)
                self._error = exc
                return

    def raise_if_failed(self) -> None:
        """Raise the error that stopped the background thread, if any."""
        if self._error is not None:
            raise self._error

    def wait_shipped(self, batch: int, timeout: float = 120.0) -> int:
        """Block until ``batch`` is shipped (by the background thread, or right here when it
        is not running); returns the last batch shipped.

        Raises TimeoutError after ``timeout`` seconds, on every path — also when the
        batch never commits (the query stopped before it) — naming the batch awaited,
        the last one shipped and the last one committed.
        """
        batch = batch_id(batch)
        deadline = time.monotonic() + timeout
        while True:
            self.raise_if_failed()
            if self._thread is None or not self._thread.is_alive():
                self.ship()  # nobody ships in the background: ship what is committed now
            shipped = self.shipped_batch
            if shipped >= batch:
                return shipped
            if time.monotonic() >= deadline:
                committed = self.state.checkpoint.last_batch
                why = (" (it is not committed: the last committed batch is "
                       f"{committed})" if committed < batch else "")
                raise TimeoutError(f"batch {batch} was not shipped to {self.topic!r} in "
                                   f"{timeout:.1f} s{why}; the last batch shipped is {shipped}")
            time.sleep(0.05)

    def stop(self) -> None:
        """Stop the background thread after shipping what is committed; raise its error."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        self.raise_if_failed()
        self.ship()
        if self._producer is not None:
            self._producer.flush(30)

    def __repr__(self) -> str:
        return f"ChangelogWriter({self.topic!r}, shipped_batch={self.shipped_batch})"
