"""Watching a running query cheaply: what a live dashboard reads, and what each read costs.

A dashboard refreshing every second cannot re-read everything each time: a
changelog of a million records takes seconds to read into pandas, a state
snapshot is a Spark job that competes with the query for the same cores. So:

- **progress** (``ProgressTail``): the per-batch reports under the checkpoint,
  re-parsed only when a file is new or changed (a ``stat`` per file otherwise), and,
  for a committed batch whose report the listener has not delivered yet (its events
  are asynchronous: late under load), the query's ``recentProgress``
  (``StatefulQuery.progress_reports``); the frame equals ``query.progress()``.
- **changelog** (``ChangelogCounts``): the changelog topic consumed from where the last
  read stopped, keeping only counts per batch — records, tombstones — and the set
  of keys seen, so ``compacted`` (what log compaction keeps: the latest record of
  each key) is the number of distinct keys. It equals
  ``len(query.read_changelog().compact())`` while tombstones are younger than
  ``delete.retention.ms`` (a day by default), as they are in a live run.
- **top rows** (``top_rows``): ``query.snapshot()`` ranked in pandas; the dashboard
  takes it less often (``Monitor(snapshot_every=...)``) and only when a new batch
  has committed.

``Monitor(query).poll()`` does one round and returns a ``Reading``; ``Monitor.costs``
keeps the seconds each part took the last time it ran.

Example:
    >>> monitor = Monitor(query, top=10)                          # doctest: +SKIP
    >>> reading = monitor.poll(snapshot=True)                     # doctest: +SKIP
    >>> reading.progress.equals(query.progress())                 # doctest: +SKIP
    True
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pandas as pd

from statekit.errors import BadArgument, TopicNotFound
from statekit.kafka.clients import plain_consumer
from statekit.kafka.offsets import consume_ranges, end_offsets
from statekit.kafka.topics import partition_count
from statekit.model import changelog_record as codec
from statekit.model.connection import Kafka, connect
from statekit.monitor.rocksdb_stats import rocksdb_metrics
from statekit.spark_state.checkpoint import Checkpoint
from statekit.spark_state.progress import progress_frame
from statekit.validate import non_negative_number, whole_number

if TYPE_CHECKING:
    from statekit.query.stateful import StatefulQuery

CHANGELOG_COLUMNS = ["batch", "records", "tombstones", "log_records", "compacted"]


class ProgressTail:
    """The progress reports of a checkpoint, parsed once each (re-read only when changed)."""

    def __init__(self, checkpoint: Checkpoint | str | os.PathLike):
        self.checkpoint = Checkpoint(checkpoint)
        self._seen: dict[str, tuple[int, int, dict]] = {}

    def reports(self) -> list[dict]:
        out = []
        for path in self.checkpoint.progress_files():
            try:
                stat = path.stat()
            except FileNotFoundError:
                continue
            mark = (stat.st_mtime_ns, stat.st_size)
            known = self._seen.get(path.name)
            if known is None or known[:2] != mark:
                try:
                    report = json.loads(path.read_text(encoding="utf-8"))
                except (FileNotFoundError, ValueError):
                    continue   # being replaced right now: next round
                known = (*mark, report)
                self._seen[path.name] = known
            out.append(known[2])
        return out

    def frame(self) -> pd.DataFrame:
        """One row per batch of the reports kept (a running query's reports not kept yet
        come from its ``recentProgress``: ``StatefulQuery.progress_reports``, as ``Monitor``)."""
        return progress_frame(self.reports())


@dataclass
class _Counts:
    records: int = 0
    tombstones: int = 0


class ChangelogCounts:
    """Counts of a changelog topic per batch, read incrementally (only new records travel).

    ``frame()``: one row per batch: ``records`` and ``tombstones`` it shipped,
    ``log_records`` (the whole log so far) and ``compacted`` (distinct keys so far:
    what compaction keeps). A topic that does not exist yet counts as empty.
    """

    def __init__(self, kafka: Kafka, topic: str):
        self.kafka, self.topic = connect(kafka), topic
        self._next: dict[int, int] = {}
        self._keys: set[tuple[int, bytes]] = set()
        self._batches: dict[int, _Counts] = {}
        #: batch → keys first written in it (a key lives in one partition, whose records
        #: come in batch order: its first record read is its first batch)
        self._new_keys: dict[int, int] = {}
        self._lock = threading.Lock()
        self.records_read = 0

    def _partitions(self) -> list[int] | None:
        try:
            return list(range(partition_count(self.kafka, self.topic)))
        except TopicNotFound:
            return None

    def poll(self) -> int:
        """Read what was appended since the last poll; returns how many records."""
        with self._lock:
            parts = self._partitions()
            if parts is None:
                return 0
            consumer = plain_consumer(self.kafka)
            try:
                ends = end_offsets(consumer, self.topic, parts)
                ranges = {p: (max(self._next.get(p, lo), lo), hi) for p, (lo, hi) in ends.items()}
                got = 0
                for chunk in consume_ranges(consumer, self.topic, ranges):
                    for msg in chunk:
                        head = codec.RecordHeaders.parse(msg.headers())
                        batch = -1 if head is None else head.batch
                        counts = self._batches.setdefault(batch, _Counts())
                        counts.records += 1
                        counts.tombstones += msg.value() is None
                        key = (msg.partition(), msg.key())
                        if key not in self._keys:
                            self._keys.add(key)
                            self._new_keys[batch] = self._new_keys.get(batch, 0) + 1
                        self._next[msg.partition()] = msg.offset() + 1
                    got += len(chunk)
            finally:
                consumer.close()
            for p, (_, hi) in ranges.items():
                self._next[p] = max(self._next.get(p, 0), hi)
            self.records_read += got
            return got

    def frame(self) -> pd.DataFrame:
        with self._lock:
            batches = sorted(self._batches)
            if not batches:
                return pd.DataFrame({c: pd.Series(dtype="int64") for c in CHANGELOG_COLUMNS})
            records = [self._batches[b].records for b in batches]
            frame = pd.DataFrame({
                "batch": batches, "records": records,
                "tombstones": [self._batches[b].tombstones for b in batches],
                "log_records": pd.Series(records).cumsum().to_numpy(),
            })
            frame["compacted"] = pd.Series(
                [self._new_keys.get(b, 0) for b in batches]).cumsum().to_numpy()
            return frame.astype("int64")

    @property
    def keys(self) -> int:
        """Distinct keys seen so far: the compacted log's size."""
        return len(self._keys)


def top_rows(snapshot: pd.DataFrame, by: str, n: int = 10) -> pd.DataFrame:
    """The ``n`` rows of a store snapshot with the largest ``by`` (ties: store order).

    Example:
        >>> snap = pd.DataFrame({"player": ["a", "b", "c"], "count": [3, 9, 5]})
        >>> top_rows(snap, "count", 2)["player"].tolist()
        ['b', 'c']
    """
    n = whole_number(n, "top", minimum=1)
    if by not in snapshot.columns:
        raise BadArgument("top rows by", by, [str(c) for c in snapshot.columns])
    return snapshot.nlargest(n, by, keep="first").reset_index(drop=True)


@dataclass
class Reading:
    """One round of a ``Monitor``: frames as of ``at`` (``time.time()``)."""

    at: float
    last_batch: int
    active: bool
    progress: pd.DataFrame
    metrics: pd.DataFrame
    changelog: pd.DataFrame | None
    top: pd.DataFrame | None
    top_batch: int | None
    costs: dict[str, float] = field(default_factory=dict)


class Monitor:
    """Reads a ``StatefulQuery`` for a dashboard: progress, RocksDB metrics, changelog
    counts, and the top rows of its store, each as cheaply as it can be read.

    Args:
        query: the running query (or a stopped one: its checkpoint stays readable).
        top: rows in the top-N view.
        by: the value column ranked (default: the query's first aggregate).
        snapshot_every: seconds between two snapshots when ``poll(snapshot=None)``.
    """

    def __init__(self, query: StatefulQuery, top: int = 10, by: str | None = None,
                 snapshot_every: float = 10.0):
        self.query = query
        self.top = whole_number(top, "top", minimum=1)
        values = [a.name for a in query.spec.aggregates]
        self.by = values[0] if by is None else by
        if self.by not in values:
            raise BadArgument("top rows by", self.by, values)
        self.snapshot_every = float(non_negative_number(snapshot_every, "snapshot_every",
                                                        unit="seconds"))
        self.progress_tail = ProgressTail(query.checkpoint)
        topic = query.changelog_topic
        self.changelog_tail = (ChangelogCounts(query.changelog.kafka, topic)
                               if topic is not None else None)
        self.costs: dict[str, float] = {}
        self._top: pd.DataFrame | None = None
        self._top_batch: int | None = None
        self._top_at = float("-inf")

    def _timed(self, name: str, fn):
        start = time.perf_counter()
        try:
            return fn()
        finally:
            self.costs[name] = time.perf_counter() - start

    def snapshot_due(self) -> bool:
        """A new batch committed since the last snapshot, and ``snapshot_every`` has passed."""
        return (self.query.last_batch >= 0 and self.query.last_batch != self._top_batch
                and time.monotonic() - self._top_at >= self.snapshot_every)

    def poll(self, snapshot: bool | None = None) -> Reading:
        """One round. ``snapshot``: True takes one now, False never, None when due.

        ``Reading.costs`` (and ``costs``) hold the seconds each part of this round took;
        ``snapshot`` only when one was taken.
        """
        self.costs = {}
        active = self.query.is_active
        last = self.query.last_batch
        progress = self._timed("progress", lambda: progress_frame(
            self.query.progress_reports(self.progress_tail.reports(), last=last)))
        metrics = self._timed("metrics", lambda: rocksdb_metrics(progress))
        changelog = None
        if self.changelog_tail is not None:
            self._timed("changelog", self.changelog_tail.poll)
            changelog = self.changelog_tail.frame()
        if last >= 0 and (snapshot or (snapshot is None and self.snapshot_due())):
            snap = self._timed("snapshot", lambda: self.query.snapshot(batch=last))
            self._top = top_rows(snap, self.by, self.top)
            self._top_batch, self._top_at = last, time.monotonic()
        return Reading(at=time.time(), last_batch=last, active=active, progress=progress,
                       metrics=metrics, changelog=changelog, top=self._top,
                       top_batch=self._top_batch, costs=dict(self.costs))

    @property
    def key_columns(self) -> Sequence[str]:
        return list(self.query.spec.keys)
