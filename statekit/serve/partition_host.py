"""The partitions a serving instance holds: kept current, checked, and reported per answer.

A ``PartitionHost`` holds what the ``Assignment`` gives it — as active owner or standby —
each partition in a local store a ``ChangelogTail`` restores and keeps current, plus the
global stores every instance holds whole. Before a partition is read it is checked: held
here (else ``PartitionNotHeld``), restored (else ``PartitionUnavailable``), at ``min_batch``
(waited for, else ``PositionNotReached``); every answer reports per partition the batch it
reflects. ``ServingInstance`` (``statekit.serve.instance``) adds the queries.

Example:
    >>> host = ServingInstance("i0", broker, "board-counts-changelog")  # doctest: +SKIP
    >>> host.start().wait_ready().roles                                  # doctest: +SKIP
    {0: 'active', 1: 'active'}
"""

from __future__ import annotations

import datetime as dt
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Self

from statekit.changelog.reader import read_meta
from statekit.errors import (
    BadArgument,
    PartitionNotHeld,
    PartitionUnavailable,
    PositionNotReached,
    StatekitError,
)
from statekit.model.connection import Kafka, connect
from statekit.model.store_schema import StoreSchema
from statekit.options.serve import GlobalTable
from statekit.restore.partition_status import RUNNING, PartitionStatus
from statekit.restore.tail import ChangelogTail
from statekit.serve.global_store import GlobalStore
from statekit.serve.part_keys import key_codec
from statekit.serve.results import PartitionAnswer, QueryResult
from statekit.serve.routing.assignment import Assignment, assign
from statekit.validate import optional_batch_id, whole_number


def wait_for_schema(kafka: Kafka, topic: str, timeout: float) -> StoreSchema:
    """The store schema from ``topic``'s metadata topic, waiting for the writer to publish it."""
    deadline = time.monotonic() + timeout
    while True:
        schema, _ = read_meta(kafka, topic)
        if schema is not None:
            return schema
        if time.monotonic() > deadline:
            raise StatekitError(f"no store schema in the metadata topic of {topic!r} after "
                                f"{timeout:.0f} s: is a statekit query shipping this changelog?")
        time.sleep(0.2)


class PartitionHost:
    """The partitions and global stores instance ``name`` holds (see ``ServingInstance``)."""

    #: seconds to wait for the metadata topic to describe the store (``schema`` not given)
    SCHEMA_TIMEOUT = 60.0

    def __init__(self, name: str, kafka: Kafka, topic: str,
                 directory: str | os.PathLike | None = None,
                 assignment: Assignment | None = None, *, schema: StoreSchema | None = None,
                 store_name: str | None = None, global_tables: Sequence[GlobalTable] = ()):
        self.name, self.kafka, self.topic = name, connect(kafka), topic
        self.pid, self.started = os.getpid(), None  # started: when start() was called (UTC)
        self.schema = schema or wait_for_schema(self.kafka, topic, self.SCHEMA_TIMEOUT)
        shape = self.schema.shape  # a statekit query's QuerySpec, or an attached part's shape
        self.codec = key_codec(self.schema)
        self.kind = shape.store_kind  # window, session or key-value
        folder = None if directory is None else Path(directory) / name
        self.tail = ChangelogTail(self.kafka, topic, shape, folder, store_name=store_name)
        self.assignment = assignment or assign(self.schema.partitions, [name], 0)
        self.set_assignment(self.assignment)
        #: global stores (every instance holds all of their topics), by name
        self.globals: dict[str, GlobalStore] = {
            table.name: GlobalStore.for_table(table, self.kafka, folder) for table in global_tables}

    # --- assignment -----------------------------------------------------------------------
    def set_assignment(self, assignment: Assignment) -> dict[int, str]:
        """Hold what ``assignment`` gives this instance (new partitions restore); its roles."""
        held = assignment.held_by(self.name)
        self.tail.remove([p for p in self.tail.partitions if p not in held])
        self.tail.add(held)
        self.assignment, self._roles = assignment, held  # roles: read on every query
        return dict(held)

    @property
    def roles(self) -> dict[int, str]:
        """partition → ``active`` or ``standby``, for the partitions held here."""
        return dict(self._roles)

    def role(self, partition: int) -> str | None:
        """``active``, ``standby`` or None (not held here) for one partition."""
        return self._roles.get(partition)

    def active_partitions(self) -> list[int]:
        return [p for p, role in self.roles.items() if role == "active"]

    # --- lifecycle ------------------------------------------------------------------------
    def start(self) -> Self:
        if self.started is None:
            self.started = dt.datetime.now(dt.UTC)
        self.tail.start()
        for store in self.globals.values():
            store.start()
        return self

    def wait_ready(self, timeout: float = 120.0) -> Self:
        """Block until every held partition and every global store has restored."""
        self.tail.wait_running(timeout=timeout)
        for store in self.globals.values():
            store.wait_running(timeout)
        return self

    def close(self) -> None:
        try:
            self.tail.close()
        finally:
            for store in self.globals.values():
                store.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    # --- one partition ----------------------------------------------------------------------
    def _ready(self, partition: int, min_batch: int | None, timeout: float
               ) -> tuple[object, PartitionStatus]:
        role = self._roles.get(partition)
        if role is None:
            raise PartitionNotHeld(self.name, partition, self.assignment.owners(partition))
        status = self.tail.status(partition)
        if min_batch is not None and timeout > 0 and (
                status.state != RUNNING or status.batch < min_batch):
            # a position asked: a restore is on the way there, so it is waited for too
            status = self.tail.wait_for_batch(partition, min_batch, timeout)
            if status is None:  # reassigned away while it waited
                raise PartitionNotHeld(self.name, partition, self.assignment.owners(partition))
        if status.state != RUNNING:
            raise PartitionUnavailable(partition, f"instance {self.name!r} holds it but is "
                                                  f"{status.describe()}", retry_after=1.0)
        if min_batch is not None and status.batch < min_batch:
            raise PositionNotReached(partition, min_batch, status.batch, self.name)
        return self.tail.store(partition), status

    async def wait_for_batch_async(self, partition: int, batch: int, timeout: float) -> bool:
        """Wait (a coroutine, holding no thread) up to ``timeout`` seconds until the store of
        ``partition`` reflects ``batch``; then ask the query again (it says what it found).
        False when it could not wait: the partition is not held here."""
        if self._roles.get(partition) is None:
            return False
        return await self.tail.wait_for_batch_async(partition, batch, timeout) is not None

    def answer_of(self, partition: int, status: PartitionStatus, started: float
                  ) -> PartitionAnswer:
        """What an answer reports of ``partition``: this instance, its role, the batch and
        lag of ``status``, and the seconds since ``started`` (``time.perf_counter()``)."""
        return PartitionAnswer(partition, self.name, self._roles.get(partition, "standby"),
                               status.batch, status.lag_batches,
                               time.perf_counter() - started, status.state)

    def _over(self, kind: str, partitions: Iterable[int] | None, read: Callable,
              min_batch: int | None, timeout: float) -> QueryResult:
        """Run ``read(store, partition)`` on each partition; one answer per partition."""
        return self._read(kind, self._wanted(partitions), read,
                          optional_batch_id(min_batch, "min_batch"), timeout)

    def _wanted(self, partitions: Iterable[int] | None) -> list[int]:
        """The partitions asked, each checked (default: those this instance is active for)."""
        return self.active_partitions() if partitions is None else [
            whole_number(p, "partition", minimum=0, maximum=self.schema.partitions - 1)
            for p in partitions]

    def _read(self, kind: str, wanted: Sequence[int], read: Callable, min_batch: int | None,
              timeout: float) -> QueryResult:
        """``_over`` once the partitions and ``min_batch`` are checked."""
        rows, report = [], []
        for p in wanted:
            started = time.perf_counter()
            store, status = self._ready(p, min_batch, timeout)
            rows.extend(read(store, p))
            report.append(self.answer_of(p, status, started))
        return QueryResult(kind, rows, report)


    # --- global stores ------------------------------------------------------------------------
    def global_store(self, name: str) -> GlobalStore:
        """The global store ``name``; BadArgument naming the ones held."""
        if name not in self.globals:
            raise BadArgument("global store", name, sorted(self.globals) or "(none held)")
        return self.globals[name]

    def enrich(self, rows: Sequence[Mapping], name: str) -> list[dict]:
        """``rows`` with the columns of their entries in global store ``name`` added."""
        store = self.global_store(name)
        out = []
        for row in rows:
            found = store.get({c: row.get(c) for c in store.key_columns}) if all(
                row.get(c) is not None for c in store.key_columns) else None
            out.append({**(found or {}), **row})
        return out

    def global_get(self, name: str, key: object) -> QueryResult:
        """One row of global store ``name`` (answered here: every instance holds it all)."""
        started = time.perf_counter()
        store = self.global_store(name)
        row = store.get(key)
        answer = PartitionAnswer(-1, self.name, "global", -1, 0,
                                 time.perf_counter() - started, store.state)
        return QueryResult("global_get", [] if row is None else [row], [answer])

    # --- about itself -----------------------------------------------------------------------
    def metadata(self) -> dict:
        """This instance: its name, the assignment, and per held partition its role, state,
        batch, offsets and restore progress."""
        status = self.tail.status()
        return {
            "instance": self.name, "pid": self.pid,
            "started": None if self.started is None else self.started.isoformat(),
            "topic": self.topic, "store": self.tail.store_name,
            "kind": self.kind, "partitions": self.schema.partitions,
            "spec": None if self.schema.spec is None else self.schema.spec.to_dict(),
            "part": None if self.schema.part is None else self.schema.part.to_dict(),
            "key_types": dict(self.schema.key_types),
            "assignment": self.assignment.to_dict(),
            "globals": {name: {"topic": g.topic, "state": g.state, "restored": g.restored,
                               "entries": g.approximate_num_entries()}
                        for name, g in self.globals.items()},
            "held": {str(p): {"role": role, "state": status[p].state,
                              "batch": status[p].batch, "shipped_batch": status[p].shipped_batch,
                              "lag_batches": status[p].lag_batches,
                              "next_offset": status[p].next_offset,
                              "restored": status[p].restored,
                              "to_restore": status[p].to_restore}
                     for p, role in self.roles.items() if p in status},
        }

