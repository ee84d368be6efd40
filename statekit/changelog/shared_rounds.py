"""Rounds of many changelog writers of one checkpoint, read with one Spark job.

An attached query ships each of its parts (a store, a join side, a deduplication's keys)
to a topic of its own, with a ``ChangelogWriter`` each. Read one by one, a round of every
part is a Spark job of its own, and a Spark job costs seconds however few changes it reads
(``bench.attach``). ``SharedRounds`` reads the new committed batches of all its writers
in **one** Spark job: the union of each writer's encoded change frame
(``ChangelogWriter.encoded_frame``), tagged with the writer's number, collected to Arrow
once and split by writer here (``split_by_writer``). Then each writer ships its own share
in its own transaction, exactly as alone (``ChangelogWriter.finish_round``): each topic
keeps its own transactional producer, ledger and fencing, so exactly-once is the
writer's, unchanged. A writer's rounds record the read that brought them
(``ShippedRound.read``): the same number for every writer of a shared round.

A writer whose round's batches changed nothing in its operator (every delta file Spark
wrote for them holds no row: ``ChangelogWriter.changed_nothing``) ships its round without
being read: an attached query on a processing-time trigger runs such a batch every trigger.
A shared read that fails is read again writer by writer, as alone (each writer then says
what went wrong for its part: a batch Spark removed meanwhile is its ``DataLoss``). A
writer whose round fails stops shipping (its error is its own, as a writer's background
thread's is); the others go on.

Example:
    >>> rounds = SharedRounds([counts_writer, side_writer], nice=15).start()  # doctest: +SKIP
    >>> counts_writer.wait_shipped(3)     # a writer's own calls go through  # doctest: +SKIP
    3
    >>> rounds.stop()                     # ships what is committed, then stops  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import functions as F

from statekit.changelog.background import lower_priority
from statekit.changelog.rounds import arrow_read_number, no_records
from statekit.changelog.writer import ChangelogWriter, PlannedRound
from statekit.errors import BadArgument
from statekit.kafka.background import BackgroundLoop
from statekit.spark_state.read_errors import reading
from statekit.validate import batch_id

LOG = logging.getLogger("statekit.changelog")

#: The column naming which writer a row of a shared read is for (its place in the list)
WRITER = "__statekit_writer"


def split_by_writer(table: pa.Table, writers: int) -> list[pa.Table]:
    """``table``'s rows (column ``WRITER``: the writer's number) as one table per writer,
    ``WRITER`` dropped, each in the order read (Spark's; each writer puts its own in
    shipping order: ``ChangelogWriter.shipping_records``). A writer without rows gets an
    empty table.

    >>> t = pa.table({WRITER: [1, 0, 1, 0], "batch": [4, 4, 3, 4], "partition": [0, 1, 0, 0],
    ...               "key": list("abcd")})
    >>> [s.column("key").to_pylist() for s in split_by_writer(t, 3)]
    [['b', 'd'], ['a', 'c'], []]
    """
    if WRITER not in table.column_names:
        raise BadArgument("shared read", table.column_names, f"a table with a {WRITER!r} column")
    parts = []
    for number in range(writers):
        share = table.filter(pc.equal(table.column(WRITER), number))
        parts.append(share.drop_columns([WRITER]))
    return parts


class SharedRounds(BackgroundLoop):
    """Ships the rounds of ``writers`` (of one checkpoint) reading their changes together;
    ``start()`` does it in a background thread as batches commit (``stop()`` ships what is
    committed, then stops).

    The writers hand their own ``ship``, ``wait_shipped``, ``stop`` and errors to these
    rounds from then on (``ChangelogWriter.shared``), and share one lock with them, so a
    writer's ``ship()`` never runs beside a shared round.

    Args:
        writers: the writers, each of its own topic, all of one checkpoint.
        nice: how far below the process the background thread runs
            (``background.lower_priority``).
        poll_interval: seconds between looks at the commit log when idle.
    """

    def __init__(self, writers: Sequence[ChangelogWriter], *, nice: int = 0,
                 poll_interval: float = 0.2):
        writers = list(writers)
        if not writers or len({w.topic for w in writers}) != len(writers):
            raise BadArgument("writers", [w.topic for w in writers],
                              "one writer or more, each of its own topic")
        super().__init__("ship-" + "+".join(w.topic for w in writers[:2])
                         + ("+..." if len(writers) > 2 else ""))
        self.writers, self.nice, self.poll_interval = writers, nice, poll_interval
        self.checkpoint = writers[0].source.checkpoint
        self._lock = threading.Lock()
        for writer in writers:
            writer._lock, writer.shared = self._lock, self
        #: writers whose round failed in the background: they ship no more
        self.failed: dict[str, BaseException] = {}
        self._wakened = threading.Event()  # set by wake(): a batch committed, look now
        #: whether stop() has shipped its last round, and the error it raised then
        self._stopped, self._stop_failure = False, None

    # --- a round ------------------------------------------------------------------------
    def ship(self, through: int | None = None) -> int:
        """Ship every writer's committed batches not shipped yet (up to ``through``) with one
        read of their changes; returns the last batch all of them have shipped. Raises the
        first writer's error once every other writer has shipped."""
        if through is not None:
            through = batch_id(through, "through")
        errors = self._round(self._active(), through)
        if errors:
            raise next(iter(errors.values()))
        return self.shipped_batch

    def ship_for(self, writer: ChangelogWriter, through: int | None = None) -> int:
        """``ship`` for ``writer``'s sake: a round of every writer, raising ``writer``'s own
        error only (another's is raised to whoever asks for that one); returns the last batch
        ``writer`` shipped."""
        if through is not None:
            through = batch_id(through, "through")
        self.raise_for(writer)
        errors = self._round(self._active(), through)
        if writer.topic in errors:
            raise errors[writer.topic]
        return writer.shipped_batch

    @property
    def shipped_batch(self) -> int:
        """The last batch every writer has shipped (-1 before the first)."""
        return min(w.shipped_batch for w in self.writers)

    def _active(self) -> list[ChangelogWriter]:
        return [w for w in self.writers if w.topic not in self.failed]

    def _round(self, writers: list[ChangelogWriter], through: int | None
               ) -> dict[str, BaseException]:
        """One round of ``writers``: plan each, read all their changes at once, ship each
        share in the writer's own transaction; the errors by topic."""
        errors: dict[str, BaseException] = {}
        started = time.perf_counter()
        with self._lock:
            # one span for all: the batches committed now (the query goes on meanwhile)
            committed = self.checkpoint.last_batch
            through = committed if through is None else min(through, committed)
            plans: list[tuple[ChangelogWriter, PlannedRound]] = []
            for writer in writers:
                try:
                    plan = writer.plan_round(through)
                except Exception as exc:
                    errors[writer.topic] = exc
                    continue
                if isinstance(plan, PlannedRound):
                    plans.append((writer, plan))
            if not plans:
                return errors
            planned = time.perf_counter()
            # batches that changed nothing in a writer's operator need no read (its delta
            # files say so; looked at once per operator and span)
            nothing: dict[tuple[int, int, int], bool] = {}
            idle: set[str] = set()
            for w, plan in plans:
                span = (w.source.operator_id, plan.first, plan.last)
                if span not in nothing:
                    nothing[span] = w.changed_nothing(plan)
                if nothing[span]:
                    idle.add(w.topic)
            busy = [(w, plan) for w, plan in plans if w.topic not in idle]
            try:
                shares = dict(zip([w.topic for w, _ in busy], self._read_together(busy),
                                  strict=True)) if busy else {}
            except Exception as exc:  # each writer reads its own, and says what went wrong
                LOG.info("shared read of %d changelogs failed (%s): reading each alone",
                         len(busy), exc)
                shares = None
            read, read_done = arrow_read_number(), time.perf_counter()
            for writer, plan in plans:
                try:
                    number = read
                    if writer.topic in idle:
                        records = no_records()
                    elif shares is None:
                        records, number = writer.read_alone(plan), arrow_read_number()
                    else:
                        records = writer.shipping_records(shares[writer.topic])
                    writer.finish_round(plan, records, number)
                except Exception as exc:
                    errors[writer.topic] = exc
            LOG.debug("shared round of %d changelogs (%d idle), batches %d..%d: planned in "
                      "%.2f s, read in %.2f s, shipped in %.2f s", len(plans), len(idle),
                      min(p.first for _, p in plans), max(p.last for _, p in plans),
                      planned - started, read_done - planned, time.perf_counter() - read_done)
        return errors

    def _read_together(self, plans: list[tuple[ChangelogWriter, PlannedRound]]
                       ) -> list[pa.Table]:
        frames = [writer.encoded_frame(plan.first, plan.last).withColumn(WRITER, F.lit(i))
                  for i, (writer, plan) in enumerate(plans)]
        union = frames[0]
        for frame in frames[1:]:  # a list part's frame has one column more (list_records)
            union = union.unionByName(frame, allowMissingColumns=True)
        spans = sorted({(p.first, p.last) for _, p in plans})
        with reading(f"the changes of batches {spans[0][0]}..{spans[-1][1]} for "
                     f"{len(plans)} changelogs"):
            table = union.toArrow()
        return split_by_writer(table, len(plans))

    # --- in the background ----------------------------------------------------------------
    def start(self) -> SharedRounds:
        """Run the rounds in a background thread (see ``BackgroundLoop.start``); returns self."""
        self._stopped, self._stop_failure = False, None
        return super().start()

    def _loop(self) -> None:
        lower_priority(self.nice)
        prepared: set[str] = set()
        while not self.stop_requested:
            active = self._active()
            if not active:
                return
            before = {w.topic: w.shipped_batch for w in active}
            if self.checkpoint.last_batch > min(before.values()):
                for topic, exc in self._round(active, None).items():
                    self._writer_failed(topic, exc)
                if any(w.shipped_batch > before[w.topic] for w in self._active()):
                    continue
            elif len(prepared) < len(active):  # idle: take the topics over before a commit
                self._prepare(active, prepared)
                continue
            self._wakened.wait(self.poll_interval)
            self._wakened.clear()

    def _prepare(self, writers: list[ChangelogWriter], prepared: set[str]) -> None:
        """Take each writer's topic over (``ChangelogWriter.prepare``) while the query runs
        its next batch, so that a round has only its batches to ship."""
        for writer in writers:
            if writer.topic in prepared:
                continue
            try:  # under the writers' shared lock (prepare takes it)
                writer.prepare()
            except Exception as exc:  # the round would fail the same way: say it there
                LOG.info("changelog %s: not taken over before its round (%s)",
                         writer.topic, exc)
            prepared.add(writer.topic)

    def wake(self) -> None:
        """Look at the commit log now rather than at the next ``poll_interval``: a batch
        has committed (an attached query's progress reports call it through its writers'
        ``wake``)."""
        self._wakened.set()

    def _writer_failed(self, topic: str, exc: BaseException) -> None:
        with contextlib.suppress(AttributeError, TypeError):
            exc.add_note(f"(raised in the background loop {self.loop_name!r})")
        self.failed[topic] = exc
        LOG.error("changelog %s: %s", topic, exc)

    def raise_for(self, writer: ChangelogWriter) -> None:
        """Raise the error that stopped ``writer``'s shipping, or the rounds' own."""
        self.raise_if_failed()
        if writer.topic in self.failed:
            raise self.failed[writer.topic]

    def stop(self, timeout: float | None = None) -> None:
        """Stop the background thread, then ship what is committed (every writer not
        failed), then close the writers' producers; raise the first error. Once stopped,
        a later ``stop()`` (each writer's ``stop`` calls it) ships nothing more and raises
        that error again: a query that goes on committing is not chased writer by writer."""
        if self._stopped:
            if self._stop_failure is not None:
                raise self._stop_failure
            return
        self._wakened.set()  # out of its idle wait at once (stop_requested ends the loop)
        super().stop(timeout)
        try:
            errors = self._round(self._active(), None)
        finally:
            for writer in self.writers:
                writer._release_producer()
        failure = next(iter(errors.values()), None) or next(iter(self.failed.values()), None)
        self._stopped, self._stop_failure = True, failure
        if failure is not None:
            raise failure
