"""The changelog topic against the writer's ledger: created, checked, read past the ledger.

Before a writer fences anyone it checks that the topic is where its ledger says
(created, with the store's partitions and a changelog's ``cleanup.policy``, when there
is no ledger yet; refused with a remedy that works when it was deleted or recreated).
Once it has fenced the others it reads the records past the ledger's offsets (a round
a crash cut short, or one committed but not recorded) so that no (batch, seq) is
shipped twice; after a round it waits until a ``read_committed`` reader sees it.

``TopicGuard`` is a part of ``ChangelogWriter`` (``statekit.changelog.writer``), which
holds what these methods read: ``kafka``, ``topic``, ``meta_topic``, ``source``,
``ledger``, ``topic_overrides``, ``flush_timeout``, ``_previous`` (the writer before
it) and ``_checkpoint_path``; ``_drop_producer`` is ``Fencing``'s.

Example:
    >>> writer = ChangelogWriter(query.reader, broker, "board-counts-changelog")  # doctest: +SKIP
    >>> writer.ship()   # the topic is created with the store's partitions   # doctest: +SKIP
    3
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from confluent_kafka import KafkaException

from statekit.changelog import meta
from statekit.changelog.ledger import LedgerState
from statekit.errors import ChangelogError
from statekit.kafka.clients import plain_consumer
from statekit.kafka.offsets import consume_ranges, end_offsets, offset_bounds
from statekit.kafka.topics import create_topic, describe_topic_config, list_topics
from statekit.model import changelog_record as codec


class TopicGuard:
    """What the changelog topic holds, against the ledger (a part of ``ChangelogWriter``)."""

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

    # --- what lies past the ledger, read once no other writer can write ---------------
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
