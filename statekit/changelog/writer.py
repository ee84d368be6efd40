"""Ship every committed batch's state changes of a query to its changelog topic, once.

``ChangelogWriter`` follows a query's commit log. For each new committed batch
it reads the batch's exact state changes with Spark's change-feed reader
(``StateReader.changes_frame``), encodes key and value as JSON inside Spark,
and produces one record per change to the Kafka partition of the state
partition holding the key (format: ``statekit.model.changelog_record``). Spark writes
no Kafka changelog itself: this writer does, after each batch commits.

Exactly once, across crashes and broker faults:

* **One writer per topic.** A writer ships through a transactional producer whose
  ``transactional.id`` is ``transactional_id(topic)``. Opening it fences every older
  writer of the topic, in this process or any other: the broker refuses their writes
  from then on, and their open transaction is aborted. The fenced writer's next round
  fails with ``ChangelogFenced``, naming the writer that took over (each writer says
  who it is in the metadata topic, ``meta.WriterInfo``).
* **A round is one transaction**: the records of batches ``first..last``, then the
  positions in the metadata topic (``statekit.changelog.meta``), committed together.
  A round that fails (a stalled broker, a timeout) purges and aborts what it sent
  and closes its producer, so nothing of it can still be written later.
* **A ledger** beside the checkpoint (``_statekit/changelog/<topic>.json``) records,
  after each committed round, the last shipped batch, each partition's next offset
  and its last batch. Once a writer has fenced the others, it reads what lies past
  the ledger's offsets (a round a crash cut short or did not record) with a
  ``read_committed`` consumer and skips those (batch, seq) pairs: no batch repeated,
  none missing, for every ``read_committed`` reader — on a Kafka broker, which hides
  aborted records, and on the embedded broker, which shows them (both to the writer
  and to the readers, so they agree).

Example:
    >>> writer = ChangelogWriter(query.reader, broker,                     # doctest: +SKIP
    ...                          "leaderboard-counts-changelog")
    >>> writer.ship()           # ships every committed batch not shipped yet  # doctest: +SKIP
    3
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import KafkaError, KafkaException, Producer
from pyspark.sql import functions as F

from statekit.changelog import meta
from statekit.changelog.ledger import Ledger, LedgerState
from statekit.changelog.sources import ChangeSource, QueryChanges, change_source
from statekit.errors import (
    BatchNotRetained,
    ChangelogError,
    ChangelogFenced,
    CheckpointError,
    DataLoss,
)
from statekit.kafka.background import BackgroundLoop
from statekit.kafka.topics import (
    UNAVAILABLE,
    consume_ranges,
    create_topic,
    describe_topic_config,
    end_offsets,
    list_topics,
    offset_bounds,
    plain_consumer,
    why_unavailable,
)
from statekit.kafka.transactions import discard, is_fenced, transactional_producer
from statekit.model import changelog_record as codec
from statekit.model.connection import Kafka, connect
from statekit.spark_state.read_errors import reading
from statekit.spark_state.state_reader import StateReader
from statekit.validate import batch_id, whole_number

LOG = logging.getLogger("statekit.changelog")
#: Spark's JSON of a key or value: times in UTC whatever the session's time zone (a person's
#: own session may have another), nulls kept
_JSON_OPTIONS = {"timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'", "timeZone": "UTC",
                 "ignoreNullFields": "false"}
#: rounds a writer remembers (``ChangelogWriter.rounds``): a long-running writer keeps no more
ROUNDS_KEPT = 1000
#: seconds a fenced writer waits for the writer that fenced it to say who it is
_NAMING_WAIT = 5.0


#: Why a writer that falls behind loses batches, and the setting that gives it more time.
_RETAIN = ("Spark keeps the state and logs of the last spark.sql.streaming.minBatchesToRetain "
           "batches, 100 by default: a writer further behind than that cannot ship the older "
           "ones; a larger value gives it more time")


def lower_priority(nice: int) -> bool:
    """Run the calling thread ``nice`` steps below the process on Linux (one thread's
    niceness: ``setpriority`` on its thread id); returns whether it did.

    A writer shipping an attached query's changelogs runs on the same cores as the query:
    lowered, its Python work (reading Arrow, producing) waits while the query's JVM threads
    want the CPU, which roughly halves what it costs the query's batches (``bench.attach``).
    Its Spark jobs run in the JVM's task threads and are not lowered.
    """
    if nice <= 0 or not sys.platform.startswith("linux"):
        return False
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(),
                       os.getpriority(os.PRIO_PROCESS, 0) + nice)
    except (OSError, AttributeError):
        return False
    return True


def changelog_retention_ms(state: StateReader) -> int:
    """How long a windowed changelog keeps records: window + watermark delay + 1 day
    (``QueryChanges.retention_ms``)."""
    return QueryChanges(state).retention_ms()


def transactional_id(topic: str) -> str:
    """The ``transactional.id`` of every writer of ``topic``: one writer at a time per topic.

    >>> transactional_id("board-counts-changelog")
    'statekit-changelog-board-counts-changelog'
    """
    return f"statekit-changelog-{topic}"


def changelog_producer(kafka: Kafka, topic: str, timeout: float = 60.0) -> Producer:
    """The producer a writer ships ``topic`` with, every older writer of the topic fenced.

    Transactional (``transactional_id(topic)``), idempotent, acks=all, never creating a
    topic; a transaction may stay open for ``2 * timeout + 30`` s (at most 15 min, Kafka's
    default ``transaction.max.timeout.ms``) before the broker aborts it.
    """
    open_ms = int(min(900.0, 2 * timeout + 30) * 1000)
    return transactional_producer(kafka, transactional_id(topic), timeout, **{
        "linger.ms": 5, "queue.buffering.max.messages": 1_000_000,
        "transaction.timeout.ms": open_ms})


@dataclass(frozen=True)
class Round:
    """What one shipping round did: each partition's last batch, records skipped as already
    there, and each partition's offset after its last record delivered in the round."""

    prev: dict[int, int]
    skipped: int
    ends: dict[int, int]


def ship_round(producer: Producer, topic: str, table: pa.Table, stamps: Mapping[int, int],
               prev: Mapping[int, int], done: set[tuple[int, int, int]], timeout: float,
               then: Callable[[Round], None] | None = None) -> Round:
    """One transaction: ``table``'s rows (batch, partition, key, value; grouped by batch,
    then partition) produced to ``topic`` with statekit's headers, skipping the (partition,
    batch, seq) in ``done``; then ``then(round)`` (more records for the same transaction);
    then the commit. KafkaException, or ChangelogError when records are still queued after
    ``timeout`` seconds: the transaction is then not committed (``discard`` the producer).

    ``stamps``: batch → its trigger time (ms); ``prev``: partition → the last batch that
    wrote there before this round.
    """
    failures: list[KafkaError] = []
    ends: dict[int, int] = {}
    deadline = time.monotonic() + timeout

    def delivered(err, msg):
        if err is not None:
            failures.append(err)
        elif msg.offset() >= ends.get(msg.partition(), 0):
            ends[msg.partition()] = msg.offset() + 1

    def produce(**record) -> None:
        while True:
            try:
                return producer.produce(topic, on_delivery=delivered, **record)
            except BufferError:  # the local queue is full: let the broker catch up
                if time.monotonic() > deadline:
                    raise ChangelogError(f"the producer's queue stayed full for {timeout:g} s"
                                         ) from None
                producer.poll(0.1)

    producer.begin_transaction()
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
            produce(key=keys[i + seq], value=values[i + seq], partition=part, timestamp=stamp,
                    headers=codec.RecordHeaders(batch, seq, count, prev[part]).encode())
            if seq % 10_000 == 9_999:
                producer.poll(0)
        prev[part] = batch
        i = j
    left = producer.flush(max(0.0, deadline - time.monotonic()))
    if failures:  # say it was fenced, when it was, rather than what that purged
        raise KafkaException(next((f for f in failures if is_fenced(f)), failures[0]))
    if left:
        raise ChangelogError(f"{left} records still queued after {timeout:g} s")
    shipped = Round(prev, skipped, ends)
    if then is not None:
        then(shipped)
    producer.commit_transaction(timeout)
    return shipped


class ChangelogWriter(BackgroundLoop):
    """Ships a query's committed state changes to ``topic``; ``start()`` does it in the background
    (``stop()`` ships what is committed then; a ``with`` block starts and stops it).

    Args:
        state: the query's state reader (checkpoint and what the state holds), or any
            ``ChangeSource`` (``statekit.changelog.sources``: one part of an attached query).
        kafka: the Kafka cluster (a ``KafkaConnection``, ``"host:port"`` or an EmbeddedBroker).
        topic: the changelog topic (``changelog_topic(app, store)``); created when
            missing with ``compact,delete`` and ``retention.ms`` (windowed state).
        poll_interval: seconds between looks at the commit log when idle.
        flush_timeout: seconds each step of a shipping round (delivering its records,
            committing its transaction) may take before the round fails.
        lock: shared by writers whose rounds should run one at a time (an attached
            query's parts: one Spark job of theirs at a time beside the query's); by
            default each writer has its own.
    """

    def __init__(self, state: StateReader | ChangeSource, kafka: Kafka, topic: str, *,
                 poll_interval: float = 0.2, flush_timeout: float = 60.0, nice: int = 0,
                 topic_config: Mapping[str, object] | None = None,
                 lock: threading.Lock | None = None):
        super().__init__(f"ship-{topic}")
        #: settings over the source's own for a topic this writer creates
        self.topic_overrides = {k: str(v) for k, v in (topic_config or {}).items()}
        self.state, self.topic = state, topic
        #: how much lower the background thread's CPU priority is (``lower_priority``)
        self.nice = whole_number(nice, "nice", minimum=0, maximum=19,
                                 accepted="a niceness from 0 (as the process) to 19 (only "
                                          "what the rest leaves)")
        #: what is shipped: the changes, the ledger's place, the topic's config, the schema
        self.source = change_source(state)
        self.kafka = connect(kafka)
        self.poll_interval, self.flush_timeout = poll_interval, flush_timeout
        self.ledger = Ledger(self.source.ledger_path(topic), topic, remedy=self._start_over)
        #: where readers learn what the store holds and how far each partition is shipped
        self.meta_topic = meta.meta_topic(topic)
        self.transactional_id = transactional_id(topic)
        #: who this writer is, once it has taken the topic over (None before, and after a
        #: failed round closed its producer)
        self.identity: meta.WriterInfo | None = None
        self.skipped = 0  # records found already shipped by a round a crash cut short
        #: the latest committed rounds (``ROUNDS_KEPT``): (first batch, last batch, records,
        #: seconds from reading the changes to the transaction's commit)
        self.rounds: deque[tuple[int, int, int, float]] = deque(maxlen=ROUNDS_KEPT)
        self._producer: Producer | None = None
        self._previous: meta.WriterInfo | None = None  # the writer before this one
        #: the ledger after the last round this writer's open producer committed: while the
        #: ledger still says so, no record lies past it (no other writer could write, and
        #: one that fences this producer makes its next round fail)
        self._committed: LedgerState | None = None
        self._own_ids: set[str] = set()
        self._lock = threading.Lock() if lock is None else lock

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

    @property
    def _checkpoint_path(self) -> str:
        return os.path.realpath(str(self.source.checkpoint))

    def _start_over(self) -> str:
        """How to ship this checkpoint's changelog again from the start, where it can be."""
        batches = self.source.checkpoint.committed_batches()
        if not batches or batches[0] == 0:
            return (f"delete the ledger {self.ledger_path!r} and the topic {self.topic!r} "
                    f"(statekit.kafka.delete_topic) if it is there: the next ship() creates the "
                    f"topic and ships every batch again from batch 0")
        return (f"this checkpoint no longer keeps batches 0..{batches[0] - 1}, so its "
                f"changelog cannot be shipped again from the start: delete the topic "
                f"{self.topic!r} and run the query from a new checkpoint")

    def _shipped_to(self, ledger: LedgerState) -> str:
        what = (f"says batches up to {ledger.last_batch} were shipped" if ledger.last_batch >= 0
                else "was started for shipping")
        return f"the ledger {self.ledger_path!r} {what} to topic {self.topic!r}"

    # --- the topics, checked before this writer fences anyone -------------------------
    def _check_topics(self, ledger: LedgerState | None, partitions: int) -> None:
        """The changelog topic is as the ledger says (created when there is no ledger), and
        the metadata topic exists; ChangelogError with a remedy that works otherwise."""
        existing = list_topics(self.kafka)
        if ledger is None:
            self._ensure_topic(existing, partitions)
        elif self.topic not in existing:
            self._drop_producer()  # its transactions may have died with the broker's topics
            raise ChangelogError(
                f"{self._shipped_to(ledger)}, but the broker has no topic {self.topic!r} "
                f"(another broker, a broker restarted without its topics, or the topic was "
                f"deleted): {self._start_over()}")
        elif existing[self.topic] != ledger.partitions:
            raise ChangelogError(
                f"{self._shipped_to(ledger)} with {ledger.partitions} partitions, but the "
                f"topic now has {existing[self.topic]}: was it recreated? {self._start_over()}")
        if self.meta_topic not in existing:
            create_topic(self.kafka, self.meta_topic, 1, meta.TOPIC_CONFIG)

    def _ensure_topic(self, existing: Mapping[str, int], partitions: int) -> None:
        if self.topic not in existing:
            create_topic(self.kafka, self.topic, partitions,
                         {**self.source.topic_config(), **self.topic_overrides})
            return
        if existing[self.topic] != partitions:
            raise ChangelogError(
                f"changelog topic {self.topic!r} has {existing[self.topic]} partitions but the "
                f"state store has {partitions}: delete the topic (statekit.kafka.delete_topic) "
                f"or name another store")
        policy = describe_topic_config(self.kafka, self.topic).get("cleanup.policy", "")
        if "compact" not in policy:
            raise ChangelogError(
                f"topic {self.topic!r} has cleanup.policy={policy!r}, not a changelog's "
                f"'compact' or 'compact,delete': is it another application's topic? Name "
                f"another store, or delete the topic if it is yours")

    def _ends(self, partitions: list[int]) -> dict[int, tuple[int, int]]:
        consumer = plain_consumer(self.kafka)
        try:
            return end_offsets(consumer, self.topic, partitions)
        finally:
            consumer.close()

    def _fresh_ledger(self, partitions: int) -> LedgerState:
        """A ledger for a topic statekit has not shipped to from this checkpoint."""
        ends = self._ends(list(range(partitions)))
        holding = {p: hi - lo for p, (lo, hi) in ends.items() if hi > lo}
        if holding:
            raise ChangelogError(
                f"changelog topic {self.topic!r} already holds records (offsets {holding} per "
                f"partition) that this checkpoint ({self.source.checkpoint!r}) did not write: "
                f"delete the topic (statekit.kafka.delete_topic) or name another store")
        return LedgerState.fresh(self.topic, {p: hi for p, (_, hi) in ends.items()})

    # --- taking the topic over --------------------------------------------------------
    def _take_over(self) -> None:
        """Open the transactional producer: from here on no older writer of the topic can
        write. Remember the writer before this one (for records found past the ledger)."""
        self._producer = changelog_producer(self.kafka, self.topic, self.flush_timeout)
        try:
            self._previous = self._latest_writer()
        except BaseException:
            self._drop_producer()
            raise

    def _latest_writer(self) -> meta.WriterInfo | None:
        from statekit.changelog.reader import read_meta

        schema, _ = read_meta(self.kafka, self.topic)
        return schema.writer if schema is not None else None

    def _announce(self, committed: int) -> None:
        """Say in the metadata topic who ships the topic now (and what the store holds)."""
        identity = meta.WriterInfo.here(self._checkpoint_path)
        key, value = meta.encode_schema(replace(self.store_schema(committed), writer=identity))
        try:
            self._producer.begin_transaction()
            self._producer.produce(self.meta_topic, key=key, value=value, partition=0)
            self._producer.commit_transaction(self.flush_timeout)
        except BaseException as exc:
            raise self._failed(exc, f"publishing this writer to {self.meta_topic!r}") from None
        self.identity = identity
        self._own_ids.add(identity.id)

    def _already_shipped(self, ledger: LedgerState
                         ) -> tuple[set[tuple[int, int, int]], dict[int, int]]:
        """(partition, batch, seq) of the records past the ledger (a round a crash cut short,
        or one not recorded), and one past each partition's last record. Called once no other
        writer can write, so nothing lands past the ledger later."""
        ends = self._settled_bounds(ledger.next_offset)
        consumer = plain_consumer(self.kafka)
        found: set[tuple[int, int, int]] = set()
        try:
            for p, (lo, hi) in ends.items():
                if hi < ledger.next_offset[p] or lo > ledger.next_offset[p]:
                    raise ChangelogError(
                        f"changelog topic {self.topic!r} partition {p} now spans offsets "
                        f"{lo}..{hi}, but {self._shipped_to(ledger)} up to offset "
                        f"{ledger.next_offset[p]}: was the topic deleted or recreated? "
                        f"{self._start_over()}")
            ranges = {p: (ledger.next_offset[p], hi) for p, (_, hi) in ends.items()}
            # one past each partition's last record (the ledger's, or of a round it missed):
            # not the log end, which counts commit markers a reader never reaches
            after = dict(ledger.next_offset)
            for chunk in consume_ranges(consumer, self.topic, ranges):
                for msg in chunk:
                    after[msg.partition()] = max(after[msg.partition()], msg.offset() + 1)
                    head = codec.RecordHeaders.parse(msg.headers())
                    if head is None:
                        raise ChangelogError(
                            f"topic {self.topic!r} partition {msg.partition()} offset "
                            f"{msg.offset()} has no statekit headers: another producer "
                            f"writes to this changelog; {self._start_over()}")
                    found.add((msg.partition(), head.batch, head.seq))
        finally:
            consumer.close()
        other = self._previous
        if found and other is not None and other.checkpoint != self._checkpoint_path:
            raise ChangelogError(
                f"changelog topic {self.topic!r} holds {len(found)} records past "
                f"{self._shipped_to(ledger)}, and the last writer of the topic was "
                f"{other.describe()}, not this checkpoint's: two checkpoints cannot share one "
                f"changelog topic; name another store, or {self._start_over()}")
        return found, after

    def _topic_as_left(self, ledger: LedgerState) -> bool:
        """Whether every partition still spans the ledger's offsets (one offsets request; a
        topic deleted or recreated since does not: ``_already_shipped`` then says so)."""
        try:
            bounds = offset_bounds(self.kafka, self.topic, list(ledger.next_offset),
                                   committed=False)
        except (KafkaException, TimeoutError):
            return False
        return all(lo <= ledger.next_offset[p] <= hi for p, (lo, hi) in bounds.items())

    def _settled_bounds(self, expected: Mapping[int, int]) -> dict[int, tuple[int, int]]:
        """Partition → (log start, log end) once no transaction is open and every commit
        marker is written (the last stable offset has reached the log end), or at once when a
        log ends before ``expected`` (records gone: the caller says so), or after
        ``flush_timeout``. The log end counts commit markers and does not move back when the
        log cleaner removes the last records, which a "last readable record" end would."""
        parts = list(expected)
        deadline = time.monotonic() + self.flush_timeout
        while True:
            bounds = offset_bounds(self.kafka, self.topic, parts, committed=False)
            if any(hi < expected[p] for p, (_, hi) in bounds.items()):
                # a broker whose watermark is not the log end (Tansu reports the first offset
                # of the last record batch + 1): the last record it holds decides
                consumer = plain_consumer(self.kafka)
                try:
                    read = end_offsets(consumer, self.topic, parts,
                                       timeout=self.flush_timeout)
                finally:
                    consumer.close()
                return {p: (lo, max(hi, read[p][1])) for p, (lo, hi) in bounds.items()}
            stable = offset_bounds(self.kafka, self.topic, parts, committed=True)
            if (all(stable[p][1] >= hi for p, (_, hi) in bounds.items())
                    or time.monotonic() > deadline):
                return bounds
            time.sleep(0.02)

    def _wait_readable(self, expected: Mapping[int, int]) -> None:
        """Return once a ``read_committed`` reader sees the round just committed (its commit
        markers written), so that what ``ship()`` returned is what ``read_changelog`` reads."""
        deadline = time.monotonic() + self.flush_timeout
        parts = list(expected)
        while time.monotonic() < deadline:
            stable = offset_bounds(self.kafka, self.topic, parts, committed=True)
            if all(stable[p][1] >= expected[p] for p in parts):
                return
            time.sleep(0.02)

    # --- shipping -------------------------------------------------------------------
    def _encoded_changes(self, first: int, last: int) -> pa.Table:
        """batch, partition, key (JSON bytes), value (JSON bytes, null for deletes), in order."""
        source = self.source
        frame = source.changes_frame(first, last)
        key = F.to_json(F.struct(*[F.col(f"`{c}`") for c in source.key_columns]),
                        _JSON_OPTIONS)
        value = F.to_json(F.struct(*[F.col(f"`{c}`") for c in source.value_columns]),
                          _JSON_OPTIONS)
        encoded = frame.select(
            "batch", "partition", key.cast("binary").alias("key"),
            F.when(F.col("change") == "put", value).cast("binary").alias("value"))
        # the frame was built from the files there then; the read may find one gone since
        # (a live query's cleanup): a CheckpointError naming it, which ship() explains
        with reading(f"the changes of batches {first}..{last} for {self.topic!r}"):
            table = encoded.toArrow()
        # Spark returns each state partition's rows in write order; keep it within a
        # batch and partition while grouping by batch, then partition.
        # (Arrow's sort is stable.)
        return table.take(pc.sort_indices(table, [("batch", "ascending"),
                                                  ("partition", "ascending")]))

    def ship(self, through: int | None = None) -> int:
        """Ship the committed batches not shipped yet (up to ``through``); returns the last shipped.

        Nothing to ship: returns once the topic is found where the ledger says, without
        taking the topic over from anyone.
        Raises ``ChangelogFenced`` when another writer took the topic over, and
        ChangelogError (the round not committed) when a round fails.
        """
        if through is not None:
            through = batch_id(through, "through")
        with self._lock:
            return self._ship_committed(through)

    def _ship_committed(self, through: int | None) -> int:
        checkpoint = self.source.checkpoint
        batches = checkpoint.committed_batches()
        if through is not None:
            batches = [b for b in batches if b <= through]
        if not batches:
            return self.shipped_batch
        last = batches[-1]
        ledger = self.ledger.read()
        partitions = checkpoint.shuffle_partitions()
        self._check_topics(ledger, partitions)
        if ledger is not None and ledger.last_batch >= last:
            return ledger.last_batch
        if ledger is None:
            self._fresh_ledger(partitions)  # refused here, the writer shipping now is not fenced
            self._drop_producer()  # a fresh start takes the topic over anew
        if self._producer is None:
            self._take_over()
        ledger = self.ledger.read()  # now final: no older writer of this checkpoint can ship
        if ledger is None:
            ledger = self._fresh_ledger(partitions)
            self.ledger.write(ledger)  # so a first round cut short is found past it
        if ledger == self._committed and self._topic_as_left(ledger):
            done, ends = set(), dict(ledger.next_offset)  # this producer's own round: no more
        else:
            try:
                done, ends = self._already_shipped(ledger)
            except (KafkaException, TimeoutError) as exc:  # the cluster did not serve it
                raise self._failed(exc, f"reading {self.topic!r} past the ledger") from None
        if self.identity is None:
            self._announce(last)
        first = ledger.last_batch + 1
        if first > last:  # the writer before this one shipped them meanwhile
            return ledger.last_batch
        if first < batches[0]:
            raise DataLoss(
                f"changelog {self.topic!r} was shipped up to batch {first - 1}, but the "
                f"checkpoint {str(checkpoint)!r} now keeps batches {batches[0]}..{last}: "
                f"the changes of batches {first}..{batches[0] - 1} are gone ({_RETAIN}); "
                f"{self._start_over()}")
        started = time.perf_counter()
        try:
            # the batches' times first: their offset logs go with the oldest state files
            stamps = {b: checkpoint.batch_timestamp_ms(b) for b in range(first, last + 1)}
            table = self._encoded_changes(first, last)
        except (BatchNotRetained, CheckpointError) as exc:
            kept = checkpoint.committed_batches()
            if not kept or kept[0] <= first:   # Spark removed none of them: another cause
                raise
            raise DataLoss(f"cannot ship batches {first}..{last} to {self.topic!r}: Spark "
                           f"removed the oldest of them while they were read ({exc}; "
                           f"{_RETAIN}); {self._start_over()}") from None
        self._produce(table, first, last, ledger, done, ends, stamps)
        self.rounds.append((first, last, table.num_rows, time.perf_counter() - started))
        return last

    def _produce(self, table: pa.Table, first: int, last: int, ledger: LedgerState,
                 done: set[tuple[int, int, int]], ends: Mapping[int, int],
                 stamps: Mapping[int, int]) -> None:
        after: list[LedgerState] = []
        self._committed = None  # set again only once the round's ledger is written

        def positions(shipped: Round) -> None:  # in the round's transaction
            state = ledger.after_round(last, shipped.prev, {
                p: max(ends[p], shipped.ends.get(p, 0)) for p in ledger.next_offset})
            for key, value in self._position_records(state):
                self._producer.produce(self.meta_topic, key=key, value=value, partition=0)
            after.append(state)

        try:
            shipped = ship_round(self._producer, self.topic, table, stamps, ledger.prev, done,
                                 self.flush_timeout, then=positions)
        except BaseException as exc:
            raise self._failed(exc, f"shipping batches {first}..{last} to {self.topic!r}"
                               ) from None
        self.skipped += shipped.skipped
        self.ledger.write(after[0])
        self._committed = after[0]
        self._wait_readable(after[0].next_offset)

    @staticmethod
    def _position_records(ledger: LedgerState) -> list[tuple[bytes, bytes]]:
        return [meta.encode_position(p, batch=ledger.last_batch, next_offset=offset,
                                     prev=ledger.prev[p])
                for p, offset in sorted(ledger.next_offset.items())]

    # --- failures -------------------------------------------------------------------
    def _drop_producer(self) -> None:
        """Purge, abort and close the producer: nothing it was sending can land later."""
        if self._producer is not None:
            discard(self._producer)
        self._producer, self.identity, self._committed = None, None, None

    def _failed(self, exc: BaseException, what: str) -> BaseException:
        """The error to raise for a round that failed with ``exc``, its producer discarded:
        ChangelogFenced, ChangelogError (Kafka failed), or ``exc`` itself (anything else)."""
        self._drop_producer()
        if is_fenced(exc):
            return self._fenced(self._newer_writer())
        if not isinstance(exc, (KafkaException, ChangelogError, TimeoutError)):
            return exc
        if isinstance(exc, KafkaException) and exc.args[0].code() == KafkaError._FATAL:
            # librdkafka makes fencing a fatal error, and may report only "fatal": fenced if
            # a newer writer has said so in the metadata topic
            other = self._newer_writer()
            if other is not None:
                return self._fenced(other)
        detail = exc.args[0].str() if isinstance(exc, KafkaException) else str(exc)
        return ChangelogError(
            f"{what} failed: {detail}. The round's transaction is not committed and this "
            f"writer's producer is closed, so nothing more of it can be written; the next "
            f"ship() takes the topic over again and ships the round (records already in the "
            f"topic are not repeated){self._unavailable(exc)}")

    def _unavailable(self, exc: BaseException) -> str:
        """Why the cluster did not take the round, when it did not serve it (no leader, too
        few replicas in sync, brokers down): a sentence for its error, or ""."""
        if isinstance(exc, KafkaException) and exc.args[0].code() not in UNAVAILABLE:
            return ""
        try:
            found = why_unavailable(self.kafka, self.topic)
        except Exception:  # noqa: BLE001 - the diagnosis is best effort
            return ""
        if not found:
            return ""
        return (f". The Kafka cluster cannot take it now: {found}. Every changelog record is "
                f"written with acks=all: each partition needs its leader and "
                f"min.insync.replicas in-sync replicas on brokers that answer (and a KRaft "
                f"cluster a majority of its controllers): start the brokers that are down, "
                f"then ship() again")

    def _fenced(self, other: meta.WriterInfo | None) -> ChangelogFenced:
        mine = f"the writer of checkpoint {self._checkpoint_path!r} (pid {os.getpid()})"
        if other is None:
            who = (f"another producer with transactional.id {self.transactional_id!r} (it has "
                   f"not said who it is)")
        else:
            who = other.describe()
        if other is not None and other.checkpoint != self._checkpoint_path:
            remedy = ("two checkpoints cannot share one changelog topic: stop one of those "
                      "queries, or give one of them another store name")
        else:
            remedy = ("stop one of the two; calling ship() here again (or restarting this "
                      "query) takes the topic back")
        return ChangelogFenced(
            f"changelog topic {self.topic!r}: {mine} was fenced by {who}, which took the "
            f"topic over. One writer ships to a changelog at a time: each opens a "
            f"transactional producer with transactional.id {self.transactional_id!r}, which "
            f"fences the one before; {remedy}", other)

    def _newer_writer(self) -> meta.WriterInfo | None:
        """The writer that fenced this one, once it has said who it is (None if it does not
        within a few seconds)."""
        deadline = time.monotonic() + _NAMING_WAIT
        while True:
            try:
                latest = self._latest_writer()
            except Exception:  # noqa: BLE001 - naming the other writer is best effort
                latest = None
            if latest is not None and latest.id not in self._own_ids:
                return latest
            if time.monotonic() > deadline:
                return None
            time.sleep(0.2)

    def store_schema(self, batch: int) -> meta.StoreSchema:
        """What the store holds: the spec (or part), the key columns' Spark types, the
        partitions."""
        return self.source.store_schema(batch)

    # --- background (``start()``: ship in a background thread as batches commit) -----
    def _loop(self) -> None:
        lower_priority(self.nice)
        while not self.stop_requested:
            before = self.shipped_batch
            # idle: two local reads (commit log, ledger), no round and no call to the broker
            if self.source.checkpoint.last_batch <= before or self.ship() == before:
                self.wait_stop(self.poll_interval)

    def _loop_failed(self, exc: BaseException) -> None:  # surfaced by wait_shipped() / stop()
        LOG.error("changelog %s: %s", self.topic, exc)

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
            if not self.running:
                self.ship()  # nobody ships in the background: ship what is committed now
            shipped = self.shipped_batch
            if shipped >= batch:
                return shipped
            if time.monotonic() >= deadline:
                committed = self.source.checkpoint.last_batch
                why = (" (it is not committed: the last committed batch is "
                       f"{committed})" if committed < batch else "")
                raise TimeoutError(f"batch {batch} was not shipped to {self.topic!r} in "
                                   f"{timeout:.1f} s{why}; the last batch shipped is {shipped}")
            time.sleep(0.05)

    def stop_background(self) -> None:
        """Stop the background thread once the round it is in has ended (nothing more is
        shipped); raise its error. ``ship()`` and ``stop()`` still ship what is committed."""
        super().stop()

    def stop(self) -> None:
        """Stop the background thread after shipping what is committed; raise its error."""
        self.stop_background()
        self.ship()
        # every round is committed: just close
        self._producer, self.identity, self._committed = None, None, None

    def __repr__(self) -> str:
        return f"ChangelogWriter({self.topic!r}, shipped_batch={self.shipped_batch})"
