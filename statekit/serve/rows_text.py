"""``/all``'s rows as JSON text, kept per partition while its store has not moved.

A dashboard or leaderboard polls ``/all`` again and again, while the store moves only
when a batch's changelog arrives (every few seconds at most). What one partition
answers is a function of its store's contents, and those are the changelog records
applied so far: the partition's ``next_offset`` in the topic. So the text of a
partition's rows is made once per position (the store read and the JSON encoding: 9–33 ms
for 2,000 rows, by machine) and reused until a record arrives. An answer whose partitions are all
made is put together on the event loop (a join of bytes and a small report) with no
thread hop, as cheap as ``/health``; one that is not is made in a query thread, as
any scan is.

The answer is the one the general path gives, byte for byte in its rows (the same
read, ``local_calls.call_local``, and the same JSON as Starlette's ``JSONResponse``); each
partition's report (batch, lag, state, role) is read anew for every answer. Only the
plain case is taken here: every partition asked is held here and running (and, for a
routed ``/all``, active here, so routing would ask only this instance), and
``min_batch`` is absent or already reached. Anything else (a wait, a partition
restoring or elsewhere) returns None and the request goes the general way, whose
errors are the documented ones.

Memory: at most ``budget`` bytes of text in all (default 32 MiB); a partition whose
text does not fit is read each time, as before.

Example:
    >>> text = RowsText(instance)                                        # doctest: +SKIP
    >>> text.body([0, 1, 2, 3], limit=1000, made_only=False)             # doctest: +SKIP
    b'{"kind":"all","rows":[{"player":"p1",...}],"partitions":[...],"missing":[]}'
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from statekit.errors import ResultTooLarge
from statekit.restore.partition_status import RUNNING, PartitionStatus
from statekit.serve.instance import ServingInstance
from statekit.serve.local_calls import call_local
from statekit.serve.results import MAX_LIMIT

#: most bytes of rows text kept, all partitions together
BUDGET = 32 * 1024 * 1024


def encode(value: object) -> bytes:
    """JSON as Starlette's ``JSONResponse`` writes it (so both paths answer the same)."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, indent=None,
                      separators=(",", ":")).encode("utf-8")


@dataclass(frozen=True)
class _Made:
    """One partition's rows as text: valid while ``store`` is the partition's store, at
    ``next_offset``, read with the same ``limit``."""

    store: object
    next_offset: int
    limit: int
    text: bytes  # the rows' JSON objects, comma separated, without the brackets
    count: int


class RowsText:
    """The text of ``all``'s rows per partition of ``instance``, kept while it holds."""

    def __init__(self, instance: ServingInstance, budget: int = BUDGET):
        self.instance, self.budget = instance, budget
        self._made: dict[int, _Made] = {}
        self._lock = threading.Lock()  # held only to keep the byte count honest

    def plain(self, partitions: Sequence[int] | None, routed: bool, min_batch: int | None
              ) -> list[int] | None:
        """The partitions to answer when this is the plain case (see the module), else
        None. ``partitions``: those asked (None: the instance's own, or all when
        ``routed``)."""
        instance = self.instance
        if partitions is None:
            partitions = (range(instance.schema.partitions) if routed
                          else instance.active_partitions())
        wanted = list(partitions)
        for p in wanted:
            held = self._running(p)
            if held is None or (routed and held[0] != "active") or (
                    min_batch is not None and held[1].batch < min_batch):
                return None
        return wanted

    def _running(self, partition: int) -> tuple[str, PartitionStatus, object] | None:
        """``partition``'s role here, status and store when it is held here and running."""
        role = self.instance.role(partition)
        if role is None:
            return None
        try:
            status = self.instance.tail.status(partition)
            store = self.instance.tail.store(partition)
        except KeyError:  # being handed over: the general path says what it is
            return None
        return (role, status, store) if status.state == RUNNING else None

    def body(self, partitions: Sequence[int], limit: int, *, made_only: bool
             ) -> bytes | None:
        """The whole JSON answer of ``all`` over ``partitions``; None when ``made_only``
        and some partition's text is not made (or not current), or when a partition
        stopped being plainly answerable meanwhile. Raises ``ResultTooLarge`` beyond
        ``limit`` rows in all."""
        texts, report, count = [], [], 0
        for p in partitions:
            started = time.perf_counter()
            held = self._running(p)
            if held is None:
                return None
            _, status, store = held
            made = self._made.get(p)
            if made is None or made.store is not store or made.next_offset != \
                    status.next_offset or made.limit != limit:
                if made_only:
                    return None
                made = self._make(p, store, status.next_offset, limit)
            count += made.count
            if count > limit:
                raise ResultTooLarge("all", limit, MAX_LIMIT)
            if made.count:
                texts.append(made.text)
            report.append(self.instance.answer_of(p, status, started).to_dict())
        return b"".join((b'{"kind":"all","rows":[', b",".join(texts), b'],"partitions":',
                         encode(report), b',"missing":[]}'))

    def _make(self, partition: int, store: object, next_offset: int, limit: int) -> _Made:
        """Read and encode ``partition``'s rows; kept when the store did not move during
        the read and the text fits the budget."""
        rows = call_local(self.instance, "all", {"limit": limit, "timeout": 0.0},
                          [partition]).rows
        made = _Made(store, next_offset, limit, encode(rows)[1:-1], len(rows))
        after = self._running(partition)
        if after is not None and after[1].next_offset == next_offset and after[2] is store:
            self._keep(partition, made)
        return made

    def _keep(self, partition: int, made: _Made) -> None:
        with self._lock:
            self._made.pop(partition, None)  # stale: its store moved, or another limit
            used = sum(len(m.text) for m in self._made.values())
            if used + len(made.text) <= self.budget:
                self._made[partition] = made
