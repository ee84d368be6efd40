"""Restore listeners: hear a store being rebuilt from its changelog, as Kafka Streams'
``StateRestoreListener`` does (start, each batch written, end).

Example:
    >>> recorder = RecordingListener()
    >>> recorder.on_restore_start(0, 0, 3); recorder.on_batch_restored(0, 2, 3)
    >>> recorder.on_restore_end(0, 3)
    >>> recorder.frame()[["partition", "event", "offset", "records", "total"]]
       partition  event  offset  records  total
    0          0  start       0        0      0
    1          0  batch       2        3      3
    2          0    end       3        0      3
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from contextlib import nullcontext

from statekit._lazy import pd


class RestoreListener:
    """Called while a store partition is restored; override the events you need."""

    def on_restore_start(self, partition: int, start_offset: int, end_offset: int) -> None:
        """Restoring ``partition`` from ``start_offset`` up to (not including) ``end_offset``."""

    def on_batch_restored(self, partition: int, batch_end_offset: int, n: int) -> None:
        """``n`` more records written, the last at ``batch_end_offset``."""

    def on_restore_end(self, partition: int, total: int) -> None:
        """``partition`` restored: ``total`` records written."""


class RecordingListener(RestoreListener):
    """Keeps every event with its wall-clock time; ``frame()`` gives them as pandas."""

    def __init__(self, label: str | None = None):
        self.label = label
        self.events: list[tuple] = []
        self._totals: dict[int, int] = {}
        self._next: dict[int, int] = {}

    def on_restore_start(self, partition: int, start_offset: int, end_offset: int) -> None:
        self._totals[partition], self._next[partition] = 0, start_offset
        self.events.append((time.time(), partition, "start", start_offset, 0, 0, end_offset))

    def on_batch_restored(self, partition: int, batch_end_offset: int, n: int) -> None:
        self._totals[partition] = self._totals.get(partition, 0) + n
        self._next[partition] = batch_end_offset + 1
        self.events.append((time.time(), partition, "batch", batch_end_offset, n,
                            self._totals[partition], None))

    def on_restore_end(self, partition: int, total: int) -> None:
        self.events.append((time.time(), partition, "end", self._next.get(partition, 0), 0,
                            total, None))

    def frame(self) -> pd.DataFrame:
        """time (naive UTC), partition, event (start/batch/end), offset, records, total."""
        frame = pd.DataFrame(self.events, columns=["time", "partition", "event", "offset",
                                                   "records", "total", "end_offset"])
        frame["time"] = pd.to_datetime(frame["time"], unit="s")
        if self.label is not None:
            frame["source"] = self.label
        return frame.drop(columns="end_offset")


class Listeners(RestoreListener):
    """Several listeners heard as one; with a ``lock``, one event at a time whichever
    thread reports it (so the listeners need not be thread-safe)."""

    def __init__(self, listeners: Iterable[RestoreListener],
                 lock: threading.Lock | None = None):
        self.listeners = list(listeners)
        self.lock = lock or nullcontext()

    def on_restore_start(self, partition: int, start_offset: int, end_offset: int) -> None:
        with self.lock:
            for listener in self.listeners:
                listener.on_restore_start(partition, start_offset, end_offset)

    def on_batch_restored(self, partition: int, batch_end_offset: int, n: int) -> None:
        with self.lock:
            for listener in self.listeners:
                listener.on_batch_restored(partition, batch_end_offset, n)

    def on_restore_end(self, partition: int, total: int) -> None:
        with self.lock:
            for listener in self.listeners:
                listener.on_restore_end(partition, total)


class RestoreProgress(RestoreListener):
    """How far each partition's restore is, its rate and when it will end, while it runs.

    ``frame()`` at any moment: ``partition``, ``start_offset``, ``end_offset``,
    ``next_offset``, ``records`` (written so far), ``seconds`` (since its start),
    ``records_per_s``, ``offsets_per_s`` (a compacted log has holes: offsets advance faster
    than records arrive) and ``eta_s`` (offsets left at that pace; 0 once done, None before
    the first write). ``restore_stores`` keeps one and shows ``eta_text()`` beside its bar.

    Example:
        >>> progress = RestoreProgress(clock=iter([0.0, 2.0, 2.0]).__next__)
        >>> progress.on_restore_start(0, 100, 1100)
        >>> progress.on_batch_restored(0, 299, 150)
        >>> progress.frame()[["partition", "records", "records_per_s", "offsets_per_s",
        ...                   "eta_s"]]
           partition  records  records_per_s  offsets_per_s  eta_s
        0          0      150           75.0          100.0    8.0
        >>> progress.eta_text()
        'p0 8 s'
    """

    COLUMNS = ["partition", "start_offset", "end_offset", "next_offset", "records", "seconds",
               "records_per_s", "offsets_per_s", "eta_s", "done"]

    def __init__(self, clock=time.monotonic):
        self._clock = clock
        self._parts: dict[int, dict] = {}

    def on_restore_start(self, partition: int, start_offset: int, end_offset: int) -> None:
        self._parts[partition] = {"start": start_offset, "end": end_offset,
                                  "next": start_offset, "records": 0, "began": self._clock(),
                                  "now": None, "done": False}

    def on_batch_restored(self, partition: int, batch_end_offset: int, n: int) -> None:
        part = self._parts.get(partition)
        if part is not None:
            part["next"], part["records"] = batch_end_offset + 1, part["records"] + n
            part["now"] = self._clock()

    def on_restore_end(self, partition: int, total: int) -> None:
        part = self._parts.get(partition)
        if part is not None:
            part["done"], part["next"] = True, max(part["next"], part["end"])
            part["now"] = part["now"] if part["now"] is not None else self._clock()

    def _row(self, partition: int, part: dict) -> list:
        seconds = (part["now"] - part["began"]) if part["now"] is not None else 0.0
        advanced = part["next"] - part["start"]
        per_s = part["records"] / seconds if seconds > 0 else None
        offsets_per_s = advanced / seconds if seconds > 0 else None
        left = max(part["end"] - part["next"], 0)
        eta = 0.0 if part["done"] or not left else (
            left / offsets_per_s if offsets_per_s else None)
        return [partition, part["start"], part["end"], part["next"], part["records"], seconds,
                per_s, offsets_per_s, eta, part["done"]]

    def frame(self) -> pd.DataFrame:
        rows = [self._row(p, part) for p, part in sorted(self._parts.items())]
        return pd.DataFrame(rows, columns=self.COLUMNS)

    def eta_text(self) -> str:
        """Each unfinished partition's time left, e.g. ``'p0 8 s · p2 3 s'`` (``'done'``)."""
        texts = []
        for p, part in sorted(self._parts.items()):
            row = self._row(p, part)
            if row[-1]:
                continue
            texts.append(f"p{p} {row[-2]:.0f} s" if row[-2] is not None else f"p{p} ?")
        return " · ".join(texts) if texts else "done"
