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
import os
import ssl
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx
import numpy as np
import pandas as pd

from statekit.errors import (
    BadArgument,
    InstanceDown,
    PartitionNotHeld,
    PartitionUnavailable,
    PositionNotReached,
    ResultTooLarge,
    StatekitError,
)
from statekit.model.changelog_record import format_time
from statekit.model.query_spec import QuerySpec
from statekit.model.store_schema import PartShape, StoreSchema
from statekit.serve.auth import bearer, client_context
from statekit.serve.instance import ServingInstance, top
from statekit.serve.part_keys import PartKeyCodec, key_codec
from statekit.serve.results import MAX_LIMIT, QueryResult, TableResult
from statekit.serve.routing.assignment import Assignment
from statekit.serve.routing.key_text import parse_key_json
from statekit.serve.routing.key_times import time_ms
from statekit.serve.transport import HttpError, HttpPool, Reply
from statekit.validate import whole_number

SCATTER = ("all", "fetch_all", "fetch_range", "range", "top_k", "approximate_num_entries",
           "table", "position")
#: Row-shaped scans: at most ``limit`` rows (``MAX_LIMIT`` at most), never cut silently.
BOUNDED = ("all", "fetch_all", "fetch_range", "range")
ARROW_STREAM = "application/vnd.apache.arrow.stream"


@dataclass(frozen=True)
class KeyMetadata:
    """Where a key lives: its partition, the instance answering for it, its standbys."""

    partition: int
    active: str | None
    standbys: tuple[str, ...]


URLS_ACCEPTED = ("a dict of one or more instance names to their base URLs, e.g. "
                 "{'i0': 'http://127.0.0.1:8123'} (ServingCluster.urls)")


def check_urls(urls: object) -> dict[str, str]:
    """``urls`` as a dict when it names one instance or more, each by a text name with a text
    URL; else BadArgument saying what is accepted.

    Example:
        >>> check_urls({})
        Traceback (most recent call last):
        ...
        statekit.errors.BadArgument: bad urls: {}; accepted: a dict of one or more instance \
names to their base URLs, e.g. {'i0': 'http://127.0.0.1:8123'} (ServingCluster.urls)
    """
    if not isinstance(urls, Mapping) or not urls or not all(
            isinstance(name, str) and name and isinstance(url, str)
            for name, url in urls.items()):
        raise BadArgument("urls", urls, URLS_ACCEPTED)
    return dict(urls)


class ServingClient:
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

    def __init__(self, urls: Mapping[str, str], *, local: ServingInstance | None = None,
                 timeout: float = 5.0, partial: bool = False, token: str | None = None,
                 verify: str | os.PathLike | ssl.SSLContext | None = None):
        self.urls = check_urls(urls)
        self.local, self.timeout, self.partial = local, timeout, partial
        self._http = HttpPool(timeout=timeout, token=token, verify=verify)
        self._token, self._verify = token, verify  # for async_http()
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self.assignment: Assignment | None = None
        self.schema: StoreSchema | None = None
        self.store = ""
        if local is not None:
            self.assignment, self.schema = local.assignment, local.schema
            self.store = local.tail.store_name
        else:
            self.refresh()
        self.codec = key_codec(self.schema)

    # --- metadata -------------------------------------------------------------------------
    def refresh(self) -> Assignment:
        """Read the assignment (and schema) from the first instance that answers."""
        errors = []
        for name, url in self.urls.items():
            try:
                meta = self._http.get(f"{url}/metadata", timeout=self.timeout).json()
            except (HttpError, ValueError) as exc:
                errors.append(f"{name}: {exc}")
                continue
            self.assignment = Assignment.from_dict(meta["assignment"])
            part = meta.get("part")
            self.schema = StoreSchema(
                None if meta.get("spec") is None else QuerySpec.from_dict(meta["spec"]),
                meta["key_types"], meta["partitions"],
                part=None if part is None else PartShape.from_dict(part))
            self.store = meta["store"]
            return self.assignment
        raise InstanceDown(f"no serving instance answered: {'; '.join(errors)}")

    def set_assignment(self, assignment: Assignment, urls: Mapping[str, str] | None = None
                       ) -> None:
        with self._lock:
            self.assignment = assignment
            if urls is not None:
                self.urls = dict(urls)

    def metadata_for_key(self, key: object) -> KeyMetadata:
        """The partition of ``key`` (a full key: group keys and window_start; a session
        store: the group keys) and who answers for it."""
        full = self.codec.key(key) if self.codec.windowed else self.codec.group(key)
        p = self.codec.partition(full)
        return KeyMetadata(p, self.assignment.active.get(p), self.assignment.standbys.get(p, ()))

    def all_metadata(self) -> pd.DataFrame:
        """The whole map: one row per (partition, instance) with its role, URL, and the
        instance's process id and start time (UTC), as each instance's ``/metadata`` says
        (none for an instance that does not answer)."""
        frame = self.assignment.to_frame()
        frame["url"] = frame["instance"].map(self.urls)
        processes = {name: self._process(name) for name in frame["instance"].unique()}
        frame["pid"] = pd.array([processes[n][0] for n in frame["instance"]], dtype="Int64")
        frame["started"] = pd.to_datetime([processes[n][1] for n in frame["instance"]],
                                          utc=True, format="ISO8601")
        return frame

    def _process(self, instance: str) -> tuple[int | None, str | None]:
        """``instance``'s process id and start time (ISO text), or Nones."""
        if self.local is not None and instance == self.local.name:
            meta = {"pid": self.local.pid, "started": self.local.started}
            meta["started"] = meta["started"] and meta["started"].isoformat()
        else:
            try:
                meta = self._http.get(f"{self.urls.get(instance)}/metadata").json()
            except (HttpError, BadArgument, ValueError):
                return None, None
        return meta.get("pid"), meta.get("started")

    # --- calls -------------------------------------------------------------------------------
    def _call(self, instance: str, kind: str, params: Mapping[str, object],
              partitions: Sequence[int] | None) -> QueryResult | TableResult:
        """Ask ``instance`` (locally when it is this process's own)."""
        if self.local is not None and instance == self.local.name:
            return call_local(self.local, kind, params, partitions)
        url = self.urls.get(instance)
        if url is None:
            raise InstanceDown(f"instance {instance!r} has no known address")
        query = {k: (json.dumps(v) if isinstance(v, dict | list) else v)
                 for k, v in params.items() if v is not None}
        if partitions is not None:
            query["partitions"] = ",".join(map(str, partitions))
        query["local"] = "true"
        wait = float(params.get("timeout") or 0)  # the instance waits this long before it
        try:                                      # answers: the call's deadline covers it
            response = self._http.get(f"{url}/stores/{self.store}/{kind}", params=query,
                                      timeout=self.timeout + wait)
        except HttpError as exc:
            raise InstanceDown(f"instance {instance!r} at {url} did not answer: "
                               f"{type(exc).__name__}: {exc}") from None
        return decode_response(response)

    def _map(self, call: Callable, groups: Sequence) -> list:
        """``call(group)`` for each group: in parallel threads when there are several (each
        instance is its own process: the answers overlap), an outcome or exception each."""
        def outcome(group):
            try:
                return call(group), None
            except (InstanceDown, PartitionUnavailable, PartitionNotHeld) as exc:
                return None, exc

        if len(groups) < 2:
            return [outcome(g) for g in groups]
        if self._pool is None:
            with self._lock:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(max_workers=16,
                                                    thread_name_prefix="statekit-scatter")
        return list(self._pool.map(outcome, groups))

    def _on_partitions(self, kind: str, params: Mapping[str, object],
                       partitions: Sequence[int], partial: bool | None
                       ) -> QueryResult | TableResult:
        """Ask each partition's holders, active first; gather; report what is missing."""
        partial = self.partial if partial is None else partial
        todo, parts, failures = list(partitions), [], {}
        tried: dict[int, list[str]] = {p: [] for p in partitions}
        while todo:
            by_instance: dict[str, list[int]] = {}
            for p in todo:
                holder = next((i for i in self.assignment.owners(p) if i not in tried[p]), None)
                if holder is None:
                    continue
                by_instance.setdefault(holder, []).append(p)
            if not by_instance:
                break
            todo = []
            groups = list(by_instance.items())
            outcomes = self._map(lambda g: self._call(g[0], kind, params, g[1]), groups)
            for (instance, group), (answer, exc) in zip(groups, outcomes, strict=True):
                if answer is not None:
                    parts.append(answer)
                elif isinstance(exc, InstanceDown):  # the whole instance is gone: standbys next
                    for p in group:
                        tried[p].append(instance)
                        failures.setdefault(p, []).append(f"{instance}: {exc}")
                    todo.extend(group)
                else:  # one partition there is not ready, or not held (a reassignment the
                    #    client has not heard of): ask the group again elsewhere
                    tried[exc.partition].append(instance)
                    failures.setdefault(exc.partition, []).append(f"{instance}: {exc}")
                    todo.extend(group)
        answered = {a.partition for part in parts for a in part.partitions}
        missing = sorted(set(partitions) - answered)
        if missing and not partial:
            p = missing[0]
            said = "; ".join(failures.get(p, [])) or "no instance holds it (lost)"
            raise PartitionUnavailable(p, f"no live holder answered ({said})")
        result = TableResult.merge(parts) if kind == "table" else QueryResult.merge(kind, parts)
        result.missing = missing
        return result

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

    def async_http(self) -> httpx.AsyncClient:
        """An asyncio HTTP client that calls the instances as this one does (its token, its
        certificate checks): for a wait a service awaits on its event loop."""
        context = client_context(self._verify)
        return httpx.AsyncClient(headers=bearer(self._token),
                                 verify=True if context is None else context)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        self._http.close()

    def __enter__(self) -> ServingClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _jsonable_global(key: object) -> object:
    """A global store's key as JSON-ready data: times as ISO text (as the changelog writes
    them), numpy scalars as Python values."""
    if isinstance(key, Mapping):
        return {name: _jsonable_global(value) for name, value in key.items()}
    if isinstance(key, pd.Timestamp | dt.datetime | np.datetime64):
        return format_time(key)
    return key.item() if hasattr(key, "item") else key


def _read_limit(params: Mapping[str, object]) -> int:
    """Rows a scan reads per partition: one more than the answer may hold, so a longer
    answer is seen (and refused), never cut."""
    limit = params.get("limit")
    return MAX_LIMIT + 1 if limit is None else int(limit) + 1


def _wait(params: Mapping[str, object]) -> float:
    """The seconds a query waits for its ``min_batch``."""
    return float(params.get("timeout") or 0)


LOCAL_CALLS: dict[str, Callable] = {
    "get": lambda i, p, parts: i.get(p["key"], min_batch=p.get("min_batch"),
                                     timeout=_wait(p)),
    "fetch": lambda i, p, parts: i.fetch(p["key"], p["time_from"], p["time_to"],
                                         partitions=parts, min_batch=p.get("min_batch"),
                                         timeout=_wait(p)),
    "find_sessions": lambda i, p, parts: i.find_sessions(
        p["key"], p["earliest_end"], p["latest_start"], partitions=parts,
        min_batch=p.get("min_batch"), timeout=_wait(p)),
    "all": lambda i, p, parts: i.all(partitions=parts, limit=_read_limit(p),
                                     min_batch=p.get("min_batch"), timeout=_wait(p)),
    "fetch_all": lambda i, p, parts: i.fetch_all(p["time_from"], p["time_to"],
                                                 partitions=parts, limit=_read_limit(p),
                                                 min_batch=p.get("min_batch"),
                                                 timeout=_wait(p)),
    "fetch_range": lambda i, p, parts: i.fetch_range(
        p.get("key_from"), p.get("key_to"), p["time_from"], p["time_to"], partitions=parts,
        limit=_read_limit(p), min_batch=p.get("min_batch"), timeout=_wait(p)),
    "range": lambda i, p, parts: i.range(p.get("key_from"), p.get("key_to"), partitions=parts,
                                         limit=_read_limit(p), min_batch=p.get("min_batch"),
                                         timeout=_wait(p)),
    "top_k": lambda i, p, parts: i.top_k(p["window_start"], p["k"], p["by"],
                                         partitions=parts, min_batch=p.get("min_batch"),
                                         timeout=_wait(p), enrich=p.get("enrich")),
    "approximate_num_entries": lambda i, p, parts: i.approximate_num_entries(partitions=parts),
    "table": lambda i, p, parts: i.table(partitions=parts, min_batch=p.get("min_batch"),
                                         timeout=_wait(p)),
    "position": lambda i, p, parts: i.position(partitions=parts, min_batch=p.get("min_batch"),
                                               timeout=_wait(p)),
}


def call_local(instance: ServingInstance, kind: str, params: Mapping[str, object],
               partitions: Sequence[int] | None) -> QueryResult:
    """Run query ``kind`` on ``instance`` in this process."""
    if kind not in LOCAL_CALLS:
        raise BadArgument("query", kind, sorted(LOCAL_CALLS))
    return LOCAL_CALLS[kind](instance, params, partitions)


def decode_response(response: Reply) -> QueryResult | TableResult:
    """A REST answer back as a QueryResult (a TableResult for Arrow), or the error it
    carries as an exception."""
    if response.status == 200 and response.content_type == ARROW_STREAM:
        return TableResult.from_ipc(response.content)
    try:
        body = response.json()
    except ValueError:
        raise StatekitError(f"{response.url} answered {response.status} with "
                            f"no JSON: {response.text[:200]!r}") from None
    if response.status == 200:
        return QueryResult.from_dict(body)
    detail = body.get("detail", body) if isinstance(body, dict) else body
    error = detail.get("error") if isinstance(detail, dict) else None
    message = detail.get("message", str(detail)) if isinstance(detail, dict) else str(detail)
    if error == "PartitionUnavailable":
        raise PartitionUnavailable(detail["partition"], message.split(": ", 1)[-1],
                                   detail.get("retry_after", 1.0))
    if error == "PositionNotReached":
        raise PositionNotReached(detail["partition"], detail["wanted"], detail["current"],
                                 detail.get("instance", ""))
    if error == "PartitionNotHeld":
        raise PartitionNotHeld(detail.get("instance", ""), detail["partition"],
                               detail.get("owners", []))
    if error == "ResultTooLarge":
        raise ResultTooLarge(detail.get("kind", "the answer"), detail.get("limit", MAX_LIMIT),
                             MAX_LIMIT)
    if response.status in (400, 404, 413, 422):  # in the instance's own words: the query
        raise BadArgument("request", None, message, message=message)  # it was sent is ours
    if response.status >= 500:
        raise InstanceDown(f"{urlsplit(response.url).netloc} answered {response.status}: "
                           f"{message}")
    raise StatekitError(f"{response.status}: {message}")
