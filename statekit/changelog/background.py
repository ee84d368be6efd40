"""Shipping in a background thread as batches commit, at a lower CPU priority if asked.

``ChangelogWriter.start()`` runs ``_loop`` in a daemon thread (``BackgroundLoop``): it
takes the topic over while the query runs its first batch (``prepare``), ships each batch
once it is committed and, when idle, looks at the commit log every ``poll_interval``
seconds (two local reads, no call to the broker) or as soon as ``wake()`` says a batch
committed (a statekit query's progress reports call it). ``wait_shipped`` waits for a
batch; ``stop()`` ships what is committed, then closes. A writer of an attached query runs
its thread ``nice`` steps below the query (``lower_priority``).

``BackgroundShipping`` is a part of ``ChangelogWriter`` (``statekit.changelog.writer``),
which holds what these methods read: ``ship``, ``prepare``, ``shipped_batch``, ``source``,
``topic``, ``nice``, ``poll_interval``, ``shared`` and the producer's fields. A writer whose
rounds are shared with others (``shared``: ``statekit.changelog.shared_rounds``) has no
thread of its own: waking, waiting, stopping and its errors go through the shared rounds.

Example:
    >>> lower_priority(0)      # nothing to lower
    False
    >>> with ChangelogWriter(query.reader, broker,                    # doctest: +SKIP
    ...                      "board-counts-changelog") as writer:
    ...     writer.wait_shipped(3)
    3
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time

from statekit.kafka.background import BackgroundLoop
from statekit.validate import batch_id

LOG = logging.getLogger("statekit.changelog")


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


class BackgroundShipping(BackgroundLoop):
    """``start()``: ship in a background thread as batches commit (a part of
    ``ChangelogWriter``)."""

    def __init__(self, loop_name: str):
        super().__init__(loop_name)
        self._wakened = threading.Event()  # set by wake(): a batch committed, look now

    def _loop(self) -> None:
        lower_priority(self.nice)
        prepared = False
        while not self.stop_requested:
            before = self.shipped_batch
            committed = self.source.checkpoint.last_batch
            if committed <= before and not prepared:
                prepared = self.prepare()  # beside the first batch, not after its commit
            # idle: two local reads (commit log, ledger), no round and no call to the broker
            if committed <= before or self.ship() == before:
                self._idle()

    def _idle(self) -> None:
        """Wait ``poll_interval`` seconds, less once ``wake()`` or ``stop()`` is called."""
        self._wakened.wait(self.poll_interval)
        self._wakened.clear()

    def wake(self) -> None:
        """Look at the commit log now rather than at the next ``poll_interval``: a batch has
        committed (a query's progress report calls it, ``statekit.query.start``; an
        attached query's, ``statekit.live.followed_progress``). With shared rounds: wakes
        them."""
        if self.shared is not None:
            self.shared.wake()
            return
        self._wakened.set()

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
        self.wake()  # the caller knows of a commit the thread may not have looked for yet
        shipper = self if self.shared is None else self.shared
        while True:
            self.raise_if_failed()
            if not shipper.running:
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

    def raise_if_failed(self) -> None:
        """Raise the error that stopped this writer's shipping, if any."""
        if self.shared is not None:
            self.shared.raise_for(self)
        super().raise_if_failed()

    def stop_background(self) -> None:
        """Stop the background thread once the round it is in has ended (nothing more is
        shipped); raise its error. ``ship()`` and ``stop()`` still ship what is committed."""
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            self._stopping.set()
            self._wakened.set()  # out of its idle wait at once
        super().stop()

    def stop(self) -> None:
        """Stop the background thread after shipping what is committed; raise its error
        (with shared rounds: stop them, for every writer of theirs)."""
        if self.shared is not None:
            self.shared.stop()
            return
        self.stop_background()
        self.ship()
        self._release_producer()  # every round is committed: nothing to purge
