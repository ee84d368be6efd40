"""A loop in a background thread: started once, stopped on request, its failure surfaced.

statekit follows Kafka topics and commit logs in background threads: the changelog
writer, a serving instance's changelog tail and global stores, a standby replica.
Each is a ``BackgroundLoop``: ``start()`` runs ``_loop()`` (or the ``target`` given) in a
daemon thread named after the loop; the loop checks ``stop_requested`` (or sleeps with
``wait_stop``) and ends once ``stop()`` asks. An exception that ends the loop is kept:
``raise_if_failed()``, ``stop()`` and ``close()`` raise it in the caller's thread — the
original exception (its type and message, which callers test), with a note naming the
loop. ``consume_records`` reads a consumer's records, reporting ends of partitions to a
callback instead of as errors.

Example:
    >>> ticks = []
    >>> def tick(loop):
    ...     while not loop.wait_stop(0.01):
    ...         ticks.append(1)
    >>> with BackgroundLoop("ticker", tick) as loop:
    ...     while not ticks:
    ...         loop.raise_if_failed()
    >>> loop.running, len(ticks) > 0
    (False, True)
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Self

from confluent_kafka import Consumer, KafkaError, KafkaException, Message

from statekit.errors import BadArgument


class BackgroundLoop:
    """A loop run in a daemon thread named ``loop_name``.

    Subclasses write the loop in ``_loop()``; else ``target(loop)`` is the loop. Either
    runs until ``stop_requested`` (checked by the loop) or until it raises: the error is
    kept for ``raise_if_failed()``, ``stop()`` and ``close()``, and ``_loop_failed(exc)``
    is called in the loop's thread (to wake whoever waits on the loop).

    Args:
        loop_name: the thread's name, also named by the errors the loop raises.
        target: the loop body (called with this loop), when not a subclass's ``_loop``.
    """

    def __init__(self, loop_name: str, target: Callable[[BackgroundLoop], None] | None = None):
        if target is None and type(self)._loop is BackgroundLoop._loop:
            raise BadArgument(f"body of background loop {loop_name!r}", target,
                              "a target(loop) callable, or a subclass's _loop()")
        self.loop_name = loop_name
        self._target = target
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._failure: BaseException | None = None
        self._starting = threading.Lock()

    # --- the loop -------------------------------------------------------------------------
    def _loop(self) -> None:
        """The loop body; runs until ``stop_requested`` (the default calls ``target``)."""
        self._target(self)

    def _loop_failed(self, exc: BaseException) -> None:
        """Called in the loop's thread once ``exc`` ended the loop (kept already)."""

    def _close_resources(self) -> None:
        """What ``close()`` releases after stopping the loop (stores, files)."""

    @property
    def stop_requested(self) -> bool:
        """Whether ``stop()`` asked the loop to end."""
        return self._stopping.is_set()

    def wait_stop(self, timeout: float) -> bool:
        """Sleep up to ``timeout`` seconds, less when ``stop()`` is called; whether it was."""
        return self._stopping.wait(timeout)

    @property
    def running(self) -> bool:
        """Whether the loop's thread is running."""
        return self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        try:
            self._loop()
        except BaseException as exc:  # surfaced in the caller's thread by raise_if_failed()
            with contextlib.suppress(AttributeError, TypeError):
                exc.add_note(f"(raised in the background loop {self.loop_name!r})")
            self._failure = exc
            self._loop_failed(exc)

    # --- lifecycle ------------------------------------------------------------------------
    def start(self) -> Self:
        """Run the loop in a new daemon thread; returns self. A loop already running goes on
        (starting it again does nothing, as re-running a notebook cell expects); a loop that
        failed raises its error instead."""
        with self._starting:
            self.raise_if_failed()
            if self.running:
                return self
            self._stopping.clear()
            self._thread = threading.Thread(target=self._run, name=self.loop_name,
                                            daemon=True)
            self._thread.start()
        return self

    def raise_if_failed(self) -> None:
        """Raise the error that ended the loop, if any (every time it is asked)."""
        if self._failure is not None:
            raise self._failure

    def stop(self, timeout: float | None = None) -> None:
        """Ask the loop to end and wait for it (at most ``timeout`` seconds, None: as long as
        its current step takes); raise its error. Stopping a loop not running does nothing
        but that. TimeoutError, naming the loop, when it is still running after ``timeout``
        (a later ``stop()`` waits for it again)."""
        thread = self._thread
        if thread is not None:
            self._stopping.set()
            if thread is threading.current_thread():  # asked by the loop itself: it ends next
                return
            thread.join(timeout)
            if thread.is_alive():
                raise TimeoutError(f"background loop {self.loop_name!r} did not stop within "
                                   f"{timeout:g} s: its current step is still running")
            if self._thread is thread:
                self._thread = None
        self.raise_if_failed()

    def close(self) -> None:
        """``stop()``, then release what the loop worked on (``_close_resources``)."""
        try:
            self.stop()
        finally:
            self._close_resources()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()


def consume_records(consumer: Consumer, *, max_records: int = 10_000, timeout: float = 0.05,
                    on_end: Callable[[str, int, int], None] | None = None) -> list[Message]:
    """The records of one ``consumer.consume(max_records, timeout)``, errors taken out: an end
    of partition (``enable.partition.eof``) calls ``on_end(topic, partition, end_offset)``,
    any other error raises ``KafkaException``.

    Example:
        >>> reached = set()
        >>> def ended(topic, partition, end_offset):
        ...     reached.add(partition)
        >>> records = consume_records(consumer, on_end=ended)           # doctest: +SKIP
    """
    records = []
    for msg in consumer.consume(max_records, timeout=timeout):
        err = msg.error()
        if err is None:
            records.append(msg)
        elif err.code() == KafkaError._PARTITION_EOF:
            if on_end is not None:
                on_end(msg.topic(), msg.partition(), msg.offset())
        else:
            raise KafkaException(err)
    return records
