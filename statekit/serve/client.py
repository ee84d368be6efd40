"""Route interactive queries to the instances that own the partitions; fall back to standbys.

Like Kafka Streams' ``queryMetadataForKey`` plus a REST call, a ``ServingClient``
knows the assignment (partition → active instance and standbys) and where each
instance listens. A point query goes to the owner of the key's partition
(``statekit.serve.routing.placement``: exactly where Spark keeps the row); a key's
time range is split into the partitions holding its windows; ``all``,
``fetch_all``, ``fetch_range``, ``top_k`` and ``approximate_num_entries`` are
scattered to every partition's owner and gathered, with one report row per
partition (who answered, at which batch, how long it took). The instances are
asked in parallel (one thread per instance). Row-shaped scans carry at most
``limit`` rows (``MAX_LIMIT`` at most) and raise ``ResultTooLarge`` rather than
cut an answer short; ``table()`` / ``to_pandas()`` gather the whole state
columnar (Arrow IPC over REST), without a limit.

When an owner does not answer, the partition is asked of its standbys, and the
answer says so (``role="standby"``, the lag in batches). When no holder can
answer, ``PartitionUnavailable`` names the partition and what each holder said —
never a hang (every call has a timeout) and never a silently partial answer:
a scatter-gather with a missing partition raises unless ``partial=True``, and
then the result lists ``missing``. Every query takes ``min_batch`` and a
``timeout`` to wait for it; an HTTP call's deadline is the client's ``timeout``
plus that wait, so a long wait is never taken for a dead instance.

The client speaks the REST API of ``statekit.serve.rest``; given the ``local``
instance (inside a serving process) it answers that instance's partitions
without HTTP.

Example:
    >>> client = cluster.client()                                        # doctest: +SKIP
    >>> key = {"player": "p07", "window_start": "2026-01-05T10:00Z"}     # doctest: +SKIP
    >>> client.metadata_for_key(key)                                     # doctest: +SKIP
    KeyMetadata(partition=2, active='i2', standbys=('i0',))
    >>> client.top_k("2026-01-05T11:00Z", 5, "sum_score").to_pandas()    # doctest: +SKIP
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping

import numpy as np
import pandas as pd

from statekit.errors import BadArgument, InstanceDown, ResultTooLarge
from statekit.model.changelog_record import format_time
from statekit.serve.answers import decode_response
from statekit.serve.part_keys import PartKeyCodec
from statekit.serve.ranking import top
from statekit.serve.results import MAX_LIMIT, QueryResult, TableResult
from statekit.serve.router import PartitionRouter
from statekit.serve.routing.key_text import parse_key_json
from statekit.serve.routing.key_times import time_ms
from statekit.serve.transport import HttpError
from statekit.validate import whole_number

SCATTER = ("all", "fetch_all", "fetch_range", "range", "top_k", "approximate_num_entries",
           "table", "position")
#: Row-shaped scans: at most ``limit`` rows (``MAX_LIMIT`` at most), never cut silently.
BOUNDED = ("all", "fetch_all", "fetch_range", "range")


class ServingClient(PartitionRouter):
    """Queries a group of serving instances, each by name at ``urls[name]``.

    Args:
        urls: instance name → base URL (``http://127.0.0.1:8123``).
        local: this process's own instance, answered without HTTP; without it the
            assignment, store and schema are asked of the first instance that answers.
        timeout: seconds for each HTTP call to answer, besides the wait it asks for (a
            query's ``timeout`` for ``min_batch``): a call waiting 20 s gets 20 s more.
        partial: default for scatter-gathers: return what answered (``missing`` listed)
            instead of raising when a partition has no live holder.
        token: the instances' token (``statekit.serve.auth``), sent with every call; an
            instance that refuses it raises ``TokenRefused``.
        verify: for https:// URLs, the CA file (PEM) or ``ssl.SSLContext`` to check the
            instances' certificates with; None: the system's trust store.
    """

    # --- the queries --------------------------------------------------------------------------
    def get(self, key: object, *, min_batch: int | None = None, timeout: float = 0.0
            ) -> QueryResult:
        """One state row by key, from the owner of its partition (or a standby); with
        ``min_batch``, once its store reflects that batch (waiting up to ``timeout`` s)."""
        full = self.codec.key(key)
        p = self.codec.partition(full)
        return self._on_partitions("get", {"key": self._key_json(key), "min_batch": min_batch,
                                           "timeout": timeout}, [p], partial=False)

    def fetch(self, key: object, time_from: object, time_to: object, *,
              min_batch: int | None = None, timeout: float = 0.0) -> QueryResult:
        """A key's windows starting in [time_from, time_to], from the partitions holding them."""
        group = self.codec.group(key)
        spread = self.codec.partitions_of_range(group, time_from, time_to)
        params = {"key": group, "time_from": time_ms(time_from, "time_from"),
                  "time_to": time_ms(time_to, "time_to"), "min_batch": min_batch,
                  "timeout": timeout}
        result = self._on_partitions("fetch", params, list(spread), partial=False)
        result.rows.sort(key=lambda row: row["window_start"])
        return result

    def find_sessions(self, key: object, earliest_end: object, latest_start: object, *,
                      min_batch: int | None = None, timeout: float = 0.0) -> QueryResult:
        group = self.codec.group(key)
        params = {"key": group, "earliest_end": time_ms(earliest_end, "earliest_end"),
                  "latest_start": time_ms(latest_start, "latest_start"),
                  "min_batch": min_batch, "timeout": timeout}
        return self._on_partitions("find_sessions", params, [self.codec.partition(group)],
                                   partial=False)

    def _scatter(self, kind: str, params: Mapping[str, object], partial: bool | None
                 ) -> QueryResult | TableResult:
        return self._on_partitions(kind, params, list(range(self.schema.partitions)), partial)

    def _bounded(self, kind: str, params: Mapping[str, object], limit: int | None,
                 partial: bool | None) -> QueryResult:
        """A row-shaped scan of at most ``limit`` rows (each instance reads one more per
        partition, so a longer answer is seen, not cut): ``ResultTooLarge`` beyond it."""
        cap = MAX_LIMIT if limit is None else whole_number(
            limit, "limit", minimum=1, maximum=MAX_LIMIT)
        result = self._scatter(kind, {**params, "limit": cap}, partial)
        if len(result.rows) > cap:
            raise ResultTooLarge(kind, cap, MAX_LIMIT)
        return result

    def all(self, *, limit: int | None = None, min_batch: int | None = None,
            timeout: float = 0.0, partial: bool | None = None) -> QueryResult:
        """Every state row, gathered from every partition's owner: at most ``limit`` rows
        (default and most: ``MAX_LIMIT``), else ``ResultTooLarge``; the whole state of a
        bigger store comes columnar from ``table()``. With ``min_batch``, once every
        partition reflects that batch (waiting up to ``timeout`` s, as every query here)."""
        return self._bounded("all", {"min_batch": min_batch, "timeout": timeout}, limit,
                             partial)

    def fetch_all(self, time_from: object, time_to: object, *, limit: int | None = None,
                  min_batch: int | None = None, timeout: float = 0.0,
                  partial: bool | None = None) -> QueryResult:
        """Every window starting in [time_from, time_to], of every partition (at most
        ``limit`` rows, as ``all``)."""
        params = {"time_from": time_ms(time_from, "time_from"),
                  "time_to": time_ms(time_to, "time_to"), "min_batch": min_batch,
                  "timeout": timeout}
        return self._bounded("fetch_all", params, limit, partial)

    def fetch_range(self, key_from: object | None, key_to: object | None, time_from: object,
                    time_to: object, *, limit: int | None = None, min_batch: int | None = None,
                    timeout: float = 0.0, partial: bool | None = None) -> QueryResult:
        """Windows of the keys from ``key_from`` to ``key_to`` (store byte order) starting in
        [time_from, time_to], of every partition (at most ``limit`` rows, as ``all``)."""
        params = {"key_from": None if key_from is None else self.codec.group(key_from),
                  "key_to": None if key_to is None else self.codec.group(key_to),
                  "time_from": time_ms(time_from, "time_from"),
                  "time_to": time_ms(time_to, "time_to"), "min_batch": min_batch,
                  "timeout": timeout}
        return self._bounded("fetch_range", params, limit, partial)

    def table(self, *, min_batch: int | None = None, timeout: float = 0.0,
              partial: bool | None = None) -> TableResult:
        """The whole latest state, columnar: every partition's store read in bulk by its
        owner (in parallel), shipped as Arrow, one table (a ``partition`` column first) and
        the per-partition report. No row limit: this is the bulk read.

        Example:
            >>> client.table(min_batch=12, timeout=10).to_pandas()    # doctest: +SKIP
        """
        return self._scatter("table", {"min_batch": min_batch, "timeout": timeout}, partial)

    def to_pandas(self, *, min_batch: int | None = None, timeout: float = 0.0,
                  partial: bool | None = None) -> pd.DataFrame:
        """``table()`` as pandas (window times as naive-UTC ``datetime64``)."""
        return self.table(min_batch=min_batch, timeout=timeout, partial=partial).to_pandas()

    def top_k(self, window_start: object, k: int, by: str, *, min_batch: int | None = None,
              timeout: float = 0.0, partial: bool | None = None, enrich: str | None = None
              ) -> QueryResult:
        """The leaderboard: the ``k`` largest ``by`` of one window (a running aggregate: of
        every key, ``window_start=None``), over every partition; ``enrich`` adds the columns
        of a global store's entries (looked up where they ran)."""
        start = None if window_start is None else self.codec.window_start(window_start)
        params = {"window_start": start, "k": k, "by": by, "min_batch": min_batch,
                  "timeout": timeout, "enrich": enrich}
        result = self._scatter("top_k", params, partial)
        result.rows = top(result.rows, k, by, self.codec.keys)
        return result

    def approximate_num_entries(self, *, partial: bool | None = None) -> QueryResult:
        return self._scatter("approximate_num_entries", {}, partial)

    def position(self, *, min_batch: int | None = None, timeout: float = 0.0,
                 partial: bool | None = None) -> QueryResult:
        """The batch every partition reflects, once each reaches ``min_batch`` (waiting up
        to ``timeout`` s): rows of partition and batch.

        Example:
            >>> client.position(min_batch=query.last_batch, timeout=10).batch   # doctest: +SKIP
            12
        """
        return self._scatter("position", {"min_batch": min_batch, "timeout": timeout},
                             partial)

    def range(self, key_from: object | None, key_to: object | None, *,
              limit: int | None = None, min_batch: int | None = None, timeout: float = 0.0,
              partial: bool | None = None) -> QueryResult:
        """Keys from ``key_from`` to ``key_to`` of a key-value store (a running aggregate),
        gathered from every partition (each in the store's key byte order; at most
        ``limit`` rows, as ``all``)."""
        params = {"key_from": None if key_from is None else self.codec.group(key_from),
                  "key_to": None if key_to is None else self.codec.group(key_to),
                  "min_batch": min_batch, "timeout": timeout}
        return self._bounded("range", params, limit, partial)

    def _key_json(self, key: object) -> dict:
        """A point query's key as the REST service takes it: its key columns only (a row
        may carry others), times in ms, NumPy scalars as Python values."""
        if isinstance(key, str | bytes):
            key = parse_key_json(key)
        if not isinstance(key, Mapping):
            raise BadArgument("key", key, "a dict (or JSON object) of the key columns")
        if isinstance(self.codec, PartKeyCodec):   # every key column, times in ms
            return {name: value.item() if hasattr(value, "item") else value
                    for name, value in self.codec.key(key).items()}
        names = [*self.codec.keys, *(() if self.codec.kind == "running" else
                                     ("window_start",))]
        return {name: time_ms(key[name], name) if name == "window_start" else
                key[name].item() if hasattr(key[name], "item") else key[name]
                for name in names if name in key}

    def global_get(self, name: str, key: object) -> QueryResult:
        """One row of global store ``name``: every instance holds it all, so the first live
        one answers (this process's own instance when there is one)."""
        if self.local is not None:
            return self.local.global_get(name, key)
        errors = []
        for instance, url in self.urls.items():
            try:
                response = self._http.get(f"{url}/global/{name}/get",
                                          params={"key": json.dumps(_jsonable_global(key))})
            except HttpError as exc:
                errors.append(f"{instance}: {exc}")
                continue
            return decode_response(response)
        raise InstanceDown(f"no serving instance answered: {'; '.join(errors)}")


def _jsonable_global(key: object) -> object:
    """A global store's key as JSON-ready data: times as ISO text (as the changelog writes
    them), numpy scalars as Python values."""
    if isinstance(key, Mapping):
        return {name: _jsonable_global(value) for name, value in key.items()}
    if isinstance(key, pd.Timestamp | dt.datetime | np.datetime64):
        return format_time(key)
    return key.item() if hasattr(key, "item") else key
