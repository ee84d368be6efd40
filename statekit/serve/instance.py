"""A serving instance: the stores of its partitions, kept current, answering queries in process.

An instance holds the partitions the ``Assignment`` gives it — as their active
owner or as a standby — each in a local RocksDB store that a ``ChangelogTail``
restores from the changelog and then keeps current. It reads what the store
holds (the spec, the key types, the partition count) from the changelog's
metadata topic, so it needs no Spark and no checkpoint: only Kafka.

It answers Kafka Streams' query shapes over the partitions it holds — ``get``,
``fetch``, ``fetch_all``, ``fetch_range``, ``all``, ``find_sessions``,
``approximate_num_entries`` and the leaderboard's ``top_k`` — each as a
``QueryResult`` saying, per partition, the batch it reflects. A query may ask
for ``min_batch``: it waits up to ``timeout`` for the store to reach it (woken by
the changelog's progress, no polling), else ``PositionNotReached`` names the
batch it has; ``position`` answers just the batch each partition reflects. A
partition still restoring is ``PartitionUnavailable`` (how far along it is), as a
store Kafka Streams is restoring refuses queries, unless the query asked for a
``min_batch`` with a ``timeout``: the restore is then part of the wait; one
it does not hold is ``PartitionNotHeld`` (naming its owners: ``statekit.serve.client``
routes).

Example:
    >>> instance = ServingInstance("i0", broker, "board-counts-changelog",  # doctest: +SKIP
    ...                            "/tmp/serving").start()
    >>> instance.get({"player": "p07", "window_start": "2026-01-05T10:00Z"}).value  # doctest: +SKIP
    {'player': 'p07', 'window_start': ..., 'count': 3, 'sum_score': 120, 'max_score': 80}
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from itertools import islice

import numpy as np
import pyarrow as pa

from statekit.errors import BadArgument
from statekit.model.changelog_record import decode_json
from statekit.serve.partition_host import PartitionHost
from statekit.serve.ranking import rank, top
from statekit.serve.results import QueryResult, TableResult
from statekit.serve.routing.key_times import time_ms
from statekit.stores.key_layout import ms_to_iso
from statekit.validate import optional_batch_id, whole_number

#: The queries each kind of store answers (its REST service lists these paths).
QUERIES = {
    "window": ("get", "fetch", "fetch_all", "fetch_range", "all", "top_k", "table",
               "approximate_num_entries", "position"),
    "session": ("get", "fetch", "find_sessions", "all", "table", "approximate_num_entries",
                "position"),
    "key-value": ("get", "range", "all", "top_k", "table", "approximate_num_entries",
                  "position"),
}
MAX_ROWS = 1_000_000  # a scan stops here unless the caller asks for less


class ServingInstance(PartitionHost):
    """Holds and serves the partitions ``assignment`` gives to instance ``name``.

    Args:
        name: this instance's name in the assignment.
        kafka: the cluster (a ``KafkaConnection``, ``"host:port"`` or an EmbeddedBroker).
        topic: the store's changelog topic.
        directory: where this instance keeps its stores (``<directory>/<name>/...``);
            None keeps them in memory.
        assignment: who owns what (default: this instance owns every partition).
        schema: what the store holds (default: read from the metadata topic, waiting up to
            ``SCHEMA_TIMEOUT`` seconds for it).
        store_name: the store's name (default: the topic's, without ``-changelog``).
        global_tables: tables every instance holds whole (``GlobalTable``).
    """

    # --- rows -------------------------------------------------------------------------------
    def _window_row(self, key: Mapping, start: int, value: Mapping) -> dict:
        iso = self.codec.iso  # window times repeat: their text is remembered
        return {**key, "window_start": iso(start), "window_end": iso(start + self.codec.size_ms),
                **value}

    @staticmethod
    def _session_row(session, value: Mapping) -> dict:
        return {**session.key, "window_start": ms_to_iso(session.start), **value}

    def _require(self, kind: str) -> None:
        if kind not in QUERIES[self.kind]:
            raise BadArgument("query", kind, f"the queries of a {self.kind} store: "
                                             f"{', '.join(QUERIES[self.kind])}")

    # --- the queries ------------------------------------------------------------------------
    def get(self, key: object, *, min_batch: int | None = None, timeout: float = 0.0
            ) -> QueryResult:
        """One state row by its full key: group keys and ``window_start``. For a part of an
        attached query that allows it (``PartKeyCodec.prefix``), the grouping key alone
        answers every entry under it: a map state's whole map of that key.

        The key's partition must be held here (``PartitionNotHeld`` otherwise).
        """
        started = time.perf_counter()
        return self.get_located(self.codec.locate(key), min_batch=min_batch, timeout=timeout,
                                started=started)

    def get_located(self, located: tuple[int, bytes, dict], *, min_batch: int | None = None,
                    timeout: float = 0.0, started: float | None = None) -> QueryResult:
        """``get`` of a key ``codec.locate`` has already placed: ``(partition, store key,
        key columns)``, for a caller that needed the partition first (to route it).

        Example:
            >>> where = instance.codec.locate({"player": "p7", "window_start": 0})  # doctest: +SKIP
            >>> instance.get_located(where).value  # doctest: +SKIP
        """
        started = time.perf_counter() if started is None else started
        partition, store_key, key_row = located
        min_batch = optional_batch_id(min_batch, "min_batch")
        # the partition is computed, not asked for: no need to check it as _over does
        store, status = self._ready(partition, min_batch, timeout)
        if self.codec.is_prefix(key_row):
            with store.prefix_scan(store_key) as found:  # every entry under the key
                rows = [{**k, **v} for k, v in islice(found, MAX_ROWS)]
        else:
            value = store.get_raw(store_key)
            rows = [] if value is None else [{**key_row, **decode_json(value)}]
        return QueryResult("get", rows, [self.answer_of(partition, status, started)])

    def fetch(self, key: object, time_from: object, time_to: object, *,
              partitions: Sequence[int] | None = None, min_batch: int | None = None,
              timeout: float = 0.0) -> QueryResult:
        """A key's windows starting in [time_from, time_to], in time order (sessions:
        overlapping it).

        Reads the partitions holding them (``partitions`` narrows it to those given).
        """
        self._require("fetch")
        group = self.codec.group(key)
        spread = self.codec.partitions_of_range(group, time_from, time_to)
        wanted = [p for p in spread if partitions is None or p in partitions]
        low, high = time_ms(time_from, "time_from"), time_ms(time_to, "time_to")
        if self.kind == "session":
            return self.find_sessions(group, low, high, partitions=wanted,
                                      min_batch=min_batch, timeout=timeout)

        def read(store, _p):
            with store.fetch(group, low, high) as found:
                return [self._window_row(group, start, value) for start, value in found]

        result = self._over("fetch", wanted, read, min_batch, timeout)
        result.rows.sort(key=lambda row: row["window_start"])  # in time order, as one store
        return result

    def fetch_all(self, time_from: object, time_to: object, *,
                  partitions: Sequence[int] | None = None, limit: int = MAX_ROWS,
                  min_batch: int | None = None, timeout: float = 0.0) -> QueryResult:
        """Every window starting in [time_from, time_to], of the partitions asked (default:
        those this instance is active for)."""
        self._require("fetch_all")
        low, high = time_ms(time_from, "time_from"), time_ms(time_to, "time_to")
        limit = whole_number(limit, "limit", minimum=1)

        def read(store, _p):
            with store.fetch_all(low, high) as found:
                return [self._window_row(w.key, w.start, v) for w, v in islice(found, limit)]

        return self._over("fetch_all", partitions, read, min_batch, timeout)

    def fetch_range(self, key_from: object | None, key_to: object | None, time_from: object,
                    time_to: object, *, partitions: Sequence[int] | None = None,
                    limit: int = MAX_ROWS, min_batch: int | None = None,
                    timeout: float = 0.0) -> QueryResult:
        """Windows of the keys from ``key_from`` to ``key_to`` (store byte order) in time."""
        self._require("fetch_range")
        low, high = time_ms(time_from, "time_from"), time_ms(time_to, "time_to")
        lo = None if key_from is None else self.codec.group(key_from)
        hi = None if key_to is None else self.codec.group(key_to)
        limit = whole_number(limit, "limit", minimum=1)

        def read(store, _p):
            with store.fetch_range(lo, hi, low, high) as found:
                return [self._window_row(w.key, w.start, v) for w, v in islice(found, limit)]

        return self._over("fetch_range", partitions, read, min_batch, timeout)

    def all(self, *, partitions: Sequence[int] | None = None, limit: int = MAX_ROWS,
            min_batch: int | None = None, timeout: float = 0.0) -> QueryResult:
        """Every state row of the partitions asked (default: those this instance is active
        for), at most ``limit`` per partition."""
        limit = whole_number(limit, "limit", minimum=1)

        def read(store, _p):
            with store.all() as found:
                if self.kind == "session":
                    return [self._session_row(s, v) for s, v in islice(found, limit)]
                if self.kind == "key-value":
                    return [{**k, **v} for k, v in islice(found, limit)]
                return [self._window_row(w.key, w.start, v) for w, v in islice(found, limit)]

        return self._over("all", partitions, read, min_batch, timeout)

    def table(self, *, partitions: Sequence[int] | None = None, min_batch: int | None = None,
              timeout: float = 0.0) -> TableResult:
        """The whole state of the partitions asked (default: those this instance is active
        for), columnar and without a row limit: one Arrow table, a ``partition`` column first,
        each store parsed in bulk (``StateStore.to_arrow``), in key byte order per partition.
        """
        wanted = self._wanted(partitions)
        min_batch = optional_batch_id(min_batch, "min_batch")

        def read(p: int) -> TableResult:
            started = time.perf_counter()
            store, status = self._ready(p, min_batch, timeout)
            table = store.to_arrow()
            table = table.add_column(0, "partition", pa.array(
                np.full(table.num_rows, p, dtype=np.int32)))
            return TableResult(table, [self.answer_of(p, status, started)])

        if len(wanted) < 2:
            return TableResult.merge([read(p) for p in wanted])
        # one thread a partition: one store's scan (which holds the GIL) overlaps another's
        # parse (pyarrow's, which does not)
        with ThreadPoolExecutor(len(wanted), thread_name_prefix=f"table-{self.name}") as pool:
            return TableResult.merge(list(pool.map(read, wanted)))

    def range(self, key_from: object | None, key_to: object | None, *,
              partitions: Sequence[int] | None = None, limit: int = MAX_ROWS,
              min_batch: int | None = None, timeout: float = 0.0) -> QueryResult:
        """The keys from ``key_from`` to ``key_to`` (inclusive, in the store's key byte order;
        None: unbounded) of a key-value store (a running aggregate): Kafka Streams' ``range``."""
        self._require("range")
        lo = None if key_from is None else self.codec.group(key_from)
        hi = None if key_to is None else self.codec.group(key_to)
        limit = whole_number(limit, "limit", minimum=1)

        def read(store, _p):
            with store.range(lo, hi) as found:
                return [{**k, **v} for k, v in islice(found, limit)]

        return self._over("range", partitions, read, min_batch, timeout)

    def find_sessions(self, key: object, earliest_end: object, latest_start: object, *,
                      partitions: Sequence[int] | None = None, min_batch: int | None = None,
                      timeout: float = 0.0) -> QueryResult:
        """A key's sessions that end at or after ``earliest_end`` and start at or before
        ``latest_start`` (Kafka Streams' ``findSessions``)."""
        self._require("find_sessions")
        group = self.codec.group(key)
        low = time_ms(earliest_end, "earliest_end")
        high = time_ms(latest_start, "latest_start")
        partition = self.codec.partition(group)
        wanted = [partition] if partitions is None or partition in partitions else []

        def read(store, _p):
            with store.find_sessions(group, low, high) as found:
                return [self._session_row(s, v) for s, v in found]

        return self._over("find_sessions", wanted, read, min_batch, timeout)

    def top_k(self, window_start: object, k: int, by: str, *,
              partitions: Sequence[int] | None = None, min_batch: int | None = None,
              timeout: float = 0.0, enrich: str | None = None) -> QueryResult:
        """The ``k`` rows of the window starting at ``window_start`` with the largest ``by``
        (the leaderboard), of the partitions asked; nulls rank last, ties by key.

        ``enrich`` names a global store: each row gains its columns (looked up by the
        row's values of the global store's key columns, locally). A key-value store (a
        running aggregate) has no windows: ``window_start`` is None and every key ranks."""
        self._require("top_k")
        if self.kind == "key-value" and window_start is not None:
            raise BadArgument("window_start", window_start, "None (a running aggregate has no "
                                                            "windows)")
        k = whole_number(k, "k", minimum=1, maximum=MAX_ROWS)
        values = list(self.schema.shape.value_columns)
        if by not in values:
            raise BadArgument("top_k by", by, values)
        keys = self.codec.keys

        if self.kind == "key-value":
            def read(store, _p):
                with store.all() as found:
                    best = heapq.nsmallest(k, found, key=lambda kv: rank(kv[1].get(by),
                                                                          kv[0], keys))
                    return [{**key, **value} for key, value in best]
        else:
            start = self.codec.window_start(window_start)

            def read(store, _p):
                with store.fetch_all(start, start) as found:  # ranked before rows are built
                    best = heapq.nsmallest(k, found, key=lambda wv: rank(wv[1].get(by),
                                                                          wv[0].key, keys))
                    return [self._window_row(w.key, w.start, v) for w, v in best]

        result = self._over("top_k", partitions, read, min_batch, timeout)
        result.rows = top(result.rows, k, by, keys)
        if enrich is not None:
            result.rows = self.enrich(result.rows, enrich)
        return result


    def approximate_num_entries(self, *, partitions: Sequence[int] | None = None
                                ) -> QueryResult:
        """About how many state rows each partition asked holds (RocksDB's estimate; a
        small store, or one whose estimate is below what it surely holds, is counted)."""
        return self._over("approximate_num_entries", partitions, lambda store, p: [
            {"partition": p, "entries": store.approximate_num_entries()}], None, 0.0)

    def position(self, *, partitions: Sequence[int] | None = None,
                 min_batch: int | None = None, timeout: float = 0.0) -> QueryResult:
        """The batch each partition asked reflects (Kafka Streams IQv2's position), once it
        reaches ``min_batch``: a wait for the store to catch up, without reading it.

        Example:
            >>> instance.position(min_batch=12, timeout=10).batch               # doctest: +SKIP
            12
        """
        return self._over("position", partitions, lambda store, p: [
            {"partition": p, "batch": self.tail.status(p).batch}], min_batch, timeout)


    def __repr__(self) -> str:
        return f"ServingInstance({self.name!r}, {self.topic!r}, roles={self.roles})"

