"""An external clean-up job: delete keys idle too long by writing tombstones to the source.

The other way to bound a store whose keys never say they are gone. A job outside the
stream processor looks at the store every so often (here: a snapshot of a processor's
store, as an interactive query would), picks the keys whose newest event is more than
``idle`` of **event time** behind the newest event in the store, and produces a tombstone
for each into a topic the processor reads as a table (``statekit.processor.table_stream``),
which deletes them a batch later.

Against a TTL (Spark's state TTL, ``ttl=``): the TTL runs inside the operator, on
processing time, renewed by every write; the job can use any rule and any clock (here
event time) and can delete keys of every state partition from one place, but it costs a
scan of the store and a round trip through Kafka per pass, and a key lives on until the
batch after the pass that found it.

Example:
    >>> job = IdleKeyCleanup(query, "totals", broker, "users-cleanup",   # doctest: +SKIP
    ...                      key="user", idle="1 minute")
    >>> job.follow(query, batches=10, every=2)                           # doctest: +SKIP
    >>> job.history()                                                    # doctest: +SKIP
"""

from __future__ import annotations

import time

import pandas as pd

from statekit.durations import to_millis
from statekit.errors import BadArgument
from statekit.validate import whole_number

HISTORY_COLUMNS = ["pass", "after_batch", "rows", "stale_keys", "tombstones_sent"]


class IdleKeyCleanup:
    """Find keys idle longer than ``idle`` (event time) in ``store`` of ``query`` and send
    a tombstone for each to ``topic`` on ``kafka`` (see the module doc).

    Args:
        query: the ``ProcessorQuery`` whose store is scanned.
        store: the store's name; its snapshot has the ``key`` column and ``time_column``.
        key: the key column (the Kafka key of a tombstone).
        idle: how long a key may go without an event, as a duration (``"1 minute"``).
        time_column: the store's column with a key's newest event time.
    """

    def __init__(self, query, store: str, kafka, topic: str, *, key: str, idle: str,
                 time_column: str = "last_seen"):
        if not isinstance(key, str) or not key:
            raise BadArgument("key", key, "the key column of the store's snapshot")
        self.query, self.store, self.kafka, self.topic = query, store, kafka, topic
        self.key, self.time_column = key, time_column
        self.idle = pd.Timedelta(milliseconds=to_millis(idle, "idle"))
        self._sent: set[str] = set()
        self._history: list[dict] = []

    def stale(self, snapshot: pd.DataFrame) -> list[str]:
        """The keys of ``snapshot`` whose newest event is more than ``idle`` behind the
        newest event of the whole snapshot, not sent before, sorted."""
        if snapshot.empty:
            return []
        newest = snapshot.groupby(self.key)[self.time_column].max()
        cutoff = newest.max() - self.idle
        return sorted(k for k in newest[newest < cutoff].index if k not in self._sent)

    def run_once(self) -> int:
        """One pass: snapshot, pick the stale keys, send their tombstones; how many sent."""
        from statekit.kafka.dataset_replay import replay

        snapshot = self.query.snapshot(self.store)
        keys = self.stale(snapshot)
        if keys:
            now = int(time.time() * 1000)
            tombstones = pd.DataFrame({"key": keys, "value": [None] * len(keys),
                                       "timestamp": [now] * len(keys)})
            replay(tombstones, self.kafka, self.topic, partitions=1, progress=False)
            self._sent.update(keys)
        self._history.append({"pass": len(self._history) + 1,
                              "after_batch": self.query.last_batch,
                              "rows": len(snapshot), "stale_keys": len(keys),
                              "tombstones_sent": len(keys)})
        return len(keys)

    def follow(self, query, batches: int, every: int = 2, timeout: float = 300.0) -> None:
        """Run a pass after every ``every`` batches of ``query`` up to ``batches``, then
        wait until it has read everything (the last tombstones included)."""
        batches = whole_number(batches, "batches", minimum=1)
        every = whole_number(every, "every", minimum=1)
        for n in range(every, batches + 1, every):
            query.wait_for_batches(n, timeout=timeout)
            self.run_once()
        query.wait_until_drained(timeout=timeout)

    def history(self) -> pd.DataFrame:
        """One row per pass: ``pass``, ``after_batch``, ``rows`` (store entries seen),
        ``stale_keys``, ``tombstones_sent``."""
        return pd.DataFrame(self._history, columns=HISTORY_COLUMNS)
