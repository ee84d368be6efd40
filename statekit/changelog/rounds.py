"""A shipping round: one transaction of a changelog topic's one writer.

Every writer of a topic opens its transactional producer with the same
``transactional.id`` (``transactional_id(topic)``), so opening one fences every older
writer of the topic. A round produces the records of batches ``first..last`` (with
statekit's headers, ``statekit.model.changelog_record``), then whatever the caller adds
to the same transaction (the writer's positions in the metadata topic), then commits:
all of it or none. ``ChangelogWriter`` (``statekit.changelog.writer``) ships with these.

Example:
    >>> transactional_id("board-counts-changelog")
    'statekit-changelog-board-counts-changelog'
    >>> producer = changelog_producer(broker, "board-counts-changelog")  # doctest: +SKIP
    >>> ship_round(producer, "board-counts-changelog", table, stamps,     # doctest: +SKIP
    ...            prev={0: -1, 1: -1}, done=set(), timeout=60).ends
    {0: 12, 1: 9}
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import KafkaError, KafkaException, Producer

from statekit.errors import ChangelogError
from statekit.kafka.transactions import is_fenced, transactional_producer
from statekit.model import changelog_record as codec
from statekit.model.connection import Kafka


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


#: Numbers the Arrow reads of changes in this process (each one Spark job)
_ARROW_READS = itertools.count(1)


def arrow_read_number() -> int:
    """A new number for one Arrow read of changes (one Spark job), unique in the process:
    the rounds it brought record it (``ShippedRound.read``)."""
    return next(_ARROW_READS)


class ShippedRound(NamedTuple):
    """A committed round of a writer: batches ``first..last``, its ``records``, the
    ``seconds`` from the start of reading its changes to its commit, and ``read``, the
    number of the Arrow read (one Spark job) that brought its changes: rounds of several
    writers read together (``statekit.changelog.shared_rounds``) have the same."""

    first: int
    last: int
    records: int
    seconds: float
    read: int


#: The columns of a round's records, as the writer ships them (``in_shipping_order``)
RECORD_SCHEMA = pa.schema([("batch", pa.int64()), ("partition", pa.int32()),
                           ("key", pa.binary()), ("value", pa.binary())])


def no_records() -> pa.Table:
    """The records of a round whose batches changed nothing: none, with the columns shipped.

    >>> no_records().num_rows, no_records().column_names
    (0, ['batch', 'partition', 'key', 'value'])
    """
    return RECORD_SCHEMA.empty_table()


def in_shipping_order(table: pa.Table) -> pa.Table:
    """``table``'s rows grouped by batch, then partition, keeping Spark's order within
    each (Spark returns each state partition's rows in write order; Arrow's sort is
    stable).

    >>> t = pa.table({"batch": [1, 0, 1, 0], "partition": [0, 1, 0, 0], "key": list("abcd")})
    >>> in_shipping_order(t).column("key").to_pylist()
    ['d', 'b', 'a', 'c']
    """
    return table.take(pc.sort_indices(table, [("batch", "ascending"),
                                              ("partition", "ascending")]))


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
