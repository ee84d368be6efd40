"""One writer per changelog topic: taking the topic over, saying who, and being fenced.

A writer takes a topic over by opening its transactional producer
(``statekit.changelog.rounds.changelog_producer``): from then on no older writer of the
topic can write. It then says who it is in the metadata topic (``meta.WriterInfo``), so
that a writer it fenced can name it. A round that fails purges, aborts and closes the
producer, and its error says why: ``ChangelogFenced`` naming the writer that took over,
or ``ChangelogError`` naming what the Kafka cluster could not do (brokers down, too few
replicas in sync).

``Fencing`` is a part of ``ChangelogWriter`` (``statekit.changelog.writer``), which holds
what these methods read: ``kafka``, ``topic``, ``meta_topic``, ``transactional_id``,
``flush_timeout``, ``identity``, ``_producer``, ``_previous``, ``_committed``,
``_own_ids``, ``_checkpoint_path`` and ``store_schema``.

Example:
    >>> a = ChangelogWriter(query.reader, broker, "board-counts-changelog")  # doctest: +SKIP
    >>> b = ChangelogWriter(query.reader, broker, "board-counts-changelog")  # doctest: +SKIP
    >>> a.ship(); b.ship()   # b takes the topic over             # doctest: +SKIP
    >>> a.ship()             # doctest: +SKIP
    Traceback (most recent call last):
    ChangelogFenced: changelog topic 'board-counts-changelog': the writer of checkpoint ...
"""

from __future__ import annotations

import os
import time
from dataclasses import replace

from confluent_kafka import KafkaError, KafkaException

from statekit.changelog import meta
from statekit.changelog.rounds import changelog_producer
from statekit.errors import ChangelogError, ChangelogFenced
from statekit.kafka.availability import UNAVAILABLE, why_unavailable
from statekit.kafka.transactions import discard, is_fenced

#: seconds a fenced writer waits for the writer that fenced it to say who it is
_NAMING_WAIT = 5.0


class Fencing:
    """Taking the topic over and failing rounds (a part of ``ChangelogWriter``)."""

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

    # --- failures -------------------------------------------------------------------
    def _drop_producer(self) -> None:
        """Purge, abort and close the producer: nothing it was sending can land later."""
        if self._producer is not None:
            discard(self._producer)
        self._release_producer()

    def _release_producer(self) -> None:
        """Forget the producer and what it stood for (every round it opened is committed or
        discarded already): the next round takes the topic over anew."""
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
