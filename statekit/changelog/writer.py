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
  who it is in the metadata topic, ``meta.WriterInfo``). Taking over and failing:
  ``statekit.changelog.fencing``.
* **A round is one transaction**: the records of batches ``first..last``, then the
  positions in the metadata topic (``statekit.changelog.meta``), committed together.
  A round that fails (a stalled broker, a timeout) purges and aborts what it sent
  and closes its producer, so nothing of it can still be written later. The round
  itself: ``statekit.changelog.rounds``.
* **A ledger** beside the checkpoint (``_statekit/changelog/<topic>.json``) records,
  after each committed round, the last shipped batch, each partition's next offset
  and its last batch. Once a writer has fenced the others, it reads what lies past
  the ledger's offsets (a round a crash cut short or did not record) with a
  ``read_committed`` consumer and skips those (batch, seq) pairs: no batch repeated,
  none missing, for every ``read_committed`` reader — on a Kafka broker, which hides
  aborted records, and on the embedded broker, which shows them (both to the writer
  and to the readers, so they agree). The topic against the ledger:
  ``statekit.changelog.topic_guard``.

The writer ships when asked (``ship()``) or in a background thread as batches commit
(``start()``: ``statekit.changelog.background``). Writers of one checkpoint (an attached
query's parts) can read their rounds together, one Spark job for all, each still shipping
its own share in its own transaction (``statekit.changelog.shared_rounds``).

Example:
    >>> writer = ChangelogWriter(query.reader, broker,                     # doctest: +SKIP
    ...                          "leaderboard-counts-changelog")
    >>> writer.ship()           # ships every committed batch not shipped yet  # doctest: +SKIP
    3
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
from confluent_kafka import KafkaException, Producer
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from statekit.changelog import list_records, meta
from statekit.changelog.background import BackgroundShipping
from statekit.changelog.fencing import Fencing
from statekit.changelog.ledger import Ledger, LedgerState
from statekit.changelog.rounds import (
    Round,
    ShippedRound,
    arrow_read_number,
    in_shipping_order,
    no_records,
    ship_round,
    transactional_id,
)
from statekit.changelog.sources import ChangeSource, change_source
from statekit.changelog.topic_guard import TopicGuard
from statekit.errors import BatchNotRetained, CheckpointError, DataLoss
from statekit.model.connection import Kafka, connect
from statekit.spark_state.read_errors import reading
from statekit.spark_state.spark_files import batches_changed_nothing
from statekit.spark_state.state_reader import StateReader
from statekit.validate import batch_id, whole_number

if TYPE_CHECKING:
    from statekit.changelog.shared_rounds import SharedRounds

#: Spark's JSON of a key or value: times in UTC whatever the session's time zone (a person's
#: own session may have another), nulls kept
_JSON_OPTIONS = {"timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'", "timeZone": "UTC",
                 "ignoreNullFields": "false"}


def _json_bytes(columns: Sequence[str]) -> Column:
    """``columns`` as one JSON object, in bytes (Spark's JSON, ``_JSON_OPTIONS``)."""
    return F.to_json(F.struct(*[F.col(f"`{c}`") for c in columns]),
                     _JSON_OPTIONS).cast("binary")


#: rounds a writer remembers (``ChangelogWriter.rounds``): a long-running writer keeps no more
ROUNDS_KEPT = 1000


#: Why a writer that falls behind loses batches, and the setting that gives it more time.
_RETAIN = ("Spark keeps the state and logs of the last spark.sql.streaming.minBatchesToRetain "
           "batches, 100 by default: a writer further behind than that cannot ship the older "
           "ones; a larger value gives it more time")


@dataclass(frozen=True)
class PlannedRound:
    """A round about to ship batches ``first..last`` (``ChangelogWriter.plan_round``): the
    ledger it starts from, the records already in the topic past it (``done``, ``ends``),
    the batches' trigger times, when it started (``time.perf_counter``) and the query's
    state partitions."""

    first: int
    last: int
    ledger: LedgerState
    done: set[tuple[int, int, int]]
    ends: dict[int, int]
    stamps: dict[int, int]
    started: float
    partitions: int


class ChangelogWriter(TopicGuard, Fencing, BackgroundShipping):
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

    Its parts, a module each: the topic against the ledger (``TopicGuard``), taking the
    topic over and failing rounds (``Fencing``), the background thread
    (``BackgroundShipping``); a round's transaction is ``rounds.ship_round``.
    """

    def __init__(self, state: StateReader | ChangeSource, kafka: Kafka, topic: str, *,
                 poll_interval: float = 0.2, flush_timeout: float = 60.0, nice: int = 0,
                 topic_config: Mapping[str, object] | None = None,
                 lock: threading.Lock | None = None):
        super().__init__(f"ship-{topic}")
        #: settings over the source's own for a topic this writer creates
        self.topic_overrides = {k: str(v) for k, v in (topic_config or {}).items()}
        self.state, self.topic = state, topic
        #: how much lower the background thread's CPU priority is (``background.lower_priority``)
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
        #: the latest committed rounds (``ROUNDS_KEPT``): first batch, last batch, records,
        #: seconds from reading the changes to the transaction's commit, and the number of
        #: the Arrow read (one Spark job) that brought them (``rounds.ShippedRound``)
        self.rounds: deque[ShippedRound] = deque(maxlen=ROUNDS_KEPT)
        self._producer: Producer | None = None
        self._previous: meta.WriterInfo | None = None  # the writer before this one
        #: the ledger after the last round this writer's open producer committed: while the
        #: ledger still says so, no record lies past it (no other writer could write, and
        #: one that fences this producer makes its next round fail)
        self._committed: LedgerState | None = None
        self._own_ids: set[str] = set()
        self._lock = threading.Lock() if lock is None else lock
        #: the rounds this writer's changes are read in with other writers' (one Spark job
        #: a round for all: ``statekit.changelog.shared_rounds``); None: its own
        self.shared: SharedRounds | None = None

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

    def store_schema(self, batch: int) -> meta.StoreSchema:
        """What the store holds: the spec (or part), the key columns' Spark types, the
        partitions."""
        return self.source.store_schema(batch)

    # --- shipping -------------------------------------------------------------------
    def encoded_frame(self, first: int, last: int) -> DataFrame:
        """The changes of batches ``first..last`` as Spark will read them (not read yet):
        batch, partition, key (JSON bytes), value (JSON bytes, null for deletes); a list
        part's elements and touched keys instead (``list_records.elements_frame``), which
        ``shipping_records`` assembles once read."""
        source = self.source
        if getattr(source, "assembles_lists", False):
            return list_records.elements_frame(source.view, source.touched_by, first, last,
                                               _json_bytes)
        frame = source.changes_frame(first, last)
        return frame.select(
            F.col("batch").cast("long").alias("batch"),
            F.col("partition").cast("int").alias("partition"),
            _json_bytes(source.key_columns).alias("key"),
            F.when(F.col("change") == "put", _json_bytes(source.value_columns)).alias("value"))

    def shipping_records(self, read: pa.Table) -> pa.Table:
        """What ``encoded_frame`` read, as the records to ship in shipping order (batch,
        partition, key, value; a list part's lists assembled)."""
        if getattr(self.source, "assembles_lists", False):
            read = list_records.assemble(read)
        return in_shipping_order(read.select(["batch", "partition", "key", "value"]))

    def _encoded_changes(self, first: int, last: int) -> pa.Table:
        """batch, partition, key (JSON bytes), value (JSON bytes, null for deletes), in order."""
        encoded = self.encoded_frame(first, last)
        # the frame was built from the files there then; the read may find one gone since
        # (a live query's cleanup): a CheckpointError naming it, which ship() explains
        with reading(f"the changes of batches {first}..{last} for {self.topic!r}"):
            table = encoded.toArrow()
        return self.shipping_records(table)

    def ship(self, through: int | None = None) -> int:
        """Ship the committed batches not shipped yet (up to ``through``); returns the last shipped.

        Nothing to ship: returns once the topic is found where the ledger says, without
        taking the topic over from anyone.
        Raises ``ChangelogFenced`` when another writer took the topic over, and
        ChangelogError (the round not committed) when a round fails.
        """
        if through is not None:
            through = batch_id(through, "through")
        if self.shared is not None:  # its rounds are read with the others'
            return self.shared.ship_for(self, through)
        with self._lock:
            return self._ship_committed(through)

    def _ship_committed(self, through: int | None) -> int:
        plan = self.plan_round(through)
        if isinstance(plan, int):
            return plan
        return self.finish_round(plan, self.read_alone(plan), arrow_read_number())

    def read_alone(self, plan: PlannedRound) -> pa.Table:
        """``plan``'s records to ship, read with a Spark job of their own (none when its
        batches changed nothing: ``changed_nothing``); a batch Spark removed meanwhile is
        DataLoss."""
        if self.changed_nothing(plan):
            return no_records()
        with self._losing(plan.first, plan.last):
            return self._encoded_changes(plan.first, plan.last)

    def changed_nothing(self, plan: PlannedRound) -> bool:
        """True when ``plan``'s batches changed nothing in the source's operator (every delta
        file of theirs holds no row: ``spark_files.batches_changed_nothing``): the round
        ships no record and reads nothing in Spark (a processing-time trigger's batches)."""
        source = self.source
        return batches_changed_nothing(source.checkpoint, source.operator_id, plan.first,
                                       plan.last, plan.partitions)

    def plan_round(self, through: int | None) -> int | PlannedRound:
        """What the next round ships: the committed batches not shipped yet (up to
        ``through``), the topic taken over and what lies past the ledger known; or, with
        nothing to ship, the last batch shipped. The caller holds the writer's lock, reads
        the round's changes (``encoded_frame``) and ships them with ``finish_round``."""
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
        ledger = self._own_topic(ledger, partitions)
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
        with self._losing(first, last):
            # the batches' times first: their offset logs go with the oldest state files
            stamps = {b: checkpoint.batch_timestamp_ms(b) for b in range(first, last + 1)}
        return PlannedRound(first, last, ledger, done, ends, stamps, started, partitions)

    @contextlib.contextmanager
    def _losing(self, first: int, last: int) -> Iterator[None]:
        """A batch of ``first..last`` gone while read, because Spark removed it meanwhile:
        DataLoss, saying why and how to start over."""
        try:
            yield
        except (BatchNotRetained, CheckpointError) as exc:
            kept = self.source.checkpoint.committed_batches()
            if not kept or kept[0] <= first:   # Spark removed none of them: another cause
                raise
            raise DataLoss(f"cannot ship batches {first}..{last} to {self.topic!r}: Spark "
                           f"removed the oldest of them while they were read ({exc}; "
                           f"{_RETAIN}); {self._start_over()}") from None

    def finish_round(self, plan: PlannedRound, table: pa.Table, read: int) -> int:
        """Ship ``plan``'s changes (``table``, in shipping order) in one transaction; record
        the round, read by Arrow read number ``read``; returns the last batch shipped."""
        self._produce(table, plan.first, plan.last, plan.ledger, plan.done, plan.ends,
                      plan.stamps)
        self.rounds.append(ShippedRound(plan.first, plan.last, table.num_rows,
                                        time.perf_counter() - plan.started, read))
        return plan.last

    def _own_topic(self, ledger: LedgerState | None, partitions: int) -> LedgerState:
        """Take the topic over (when this writer's producer is not open) and return the
        ledger, now final: no older writer of this checkpoint can ship. The topics are
        checked already (``_check_topics``)."""
        if ledger is None:
            self._fresh_ledger(partitions)  # refused here, the writer shipping now is not fenced
            self._drop_producer()  # a fresh start takes the topic over anew
        if self._producer is None:
            self._take_over()
        ledger = self.ledger.read()
        if ledger is None:
            ledger = self._fresh_ledger(partitions)
            self.ledger.write(ledger)  # so a first round cut short is found past it
        return ledger

    def prepare(self) -> bool:
        """Take the topic over before the first batch to ship commits, so that the first
        round has only its batches to ship; returns whether this writer's producer is open.

        Does nothing (False) before the query has planned a batch (its offset log says the
        state partitions) and once a producer is open (True). The background thread calls it
        while the query runs its first batch: what the first round would do first (the
        topics checked or created, the ledger started, the transactional producer opened,
        fencing every older writer) is done beside that batch instead of after its commit.
        Errors as ``ship()``'s.
        """
        with self._lock:
            if self._producer is not None:
                return True
            checkpoint = self.source.checkpoint
            if not checkpoint.offset_batches():
                return False
            try:
                partitions = checkpoint.shuffle_partitions()
            except (CheckpointError, OSError):  # its offset log is not readable yet
                return False
            ledger = self.ledger.read()
            self._check_topics(ledger, partitions)
            self._own_topic(ledger, partitions)
            return True

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

    def __repr__(self) -> str:
        return f"ChangelogWriter({self.topic!r}, shipped_batch={self.shipped_batch})"
