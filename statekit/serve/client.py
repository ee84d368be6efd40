"""Route interactive queries to the instances that own the partitions; fall back to standbys.

Like Kafka Streams' ``queryMetadataForKey`` plus a REST call, a ``ServingClient``
knows the assignment (partition → active instance and standbys) and where each
instance listens. A point query goes to the owner of the key's partition
(``statekit.serve.placement``: exactly where Spark keeps the row); a key's
time range is split into the partitions holding its windows; ``all``,
``fetch_all``, ``fetch_range``, ``top_k`` and ``approximate_num_entries`` are
scattered to every partition's owner and gathered, with one report row per
partition (who answered, at which batch, how long it took).

When an owner does not answer, the partition is asked of its standbys, and the
answer says so (``role="standby"``, the lag in batches). When no holder can
answer, ``PartitionUnavailable`` names the partition and what each holder said —
never a hang (every call has a timeout) and never a silently partial answer:
a scatter-gather with a missing partition raises unless ``partial=True``, and
then the result lists ``missing``.

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

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import httpx

from statekit.changelog.meta import StoreSchema
from statekit.errors import BadArgument, StatekitError
from statekit.query.spec import QuerySpec
from statekit.serve.assignment import Assignment
from statekit.serve.instance import ServingInstance, top
from statekit.serve.keys import KeyCodec, time_ms
from statekit.serve.results import (
    PartitionUnavailable,
    PositionNotReached,
    QueryResult,
)

SCATTER = ("all", "fetch_all", "fetch_range", "range", "top_k", "approximate_num_entries")


@dataclass(frozen=True)
class KeyMetadata:
    """Where a key lives: its partition, the instance answering for it, its standbys."""

    partition: int
    active: str | None
    standbys: tuple[str, ...]


class InstanceDown(StatekitError, ConnectionError):
    """An instance did not answer (connection refused, timed out)."""


class ServingClient:
    """Queries a group of serving instances, each by name at ``urls[name]``.

    Args:
        urls: instance name → base URL (``http://127.0.0.1:8123``).
        local: this process's own instance, answered without HTTP; without it the
            assignment, store and schema are asked of the first instance that answers.
        timeout: seconds for each HTTP call.
        partial: default for scatter-gathers: return what answered (``missing`` listed)
            instead of raising when a partition has no live holder.
    """

    def __init__(self, urls: Mapping[str, str], *, local: ServingInstance | None = None,
                 timeout: float = 5.0, partial: bool = False):
        self.urls = dict(urls)
        self.local, self.timeout, self.partial = local, timeout, partial
        self._http = httpx.Client(timeout=timeout,
                                  limits=httpx.Limits(max_keepalive_connections=32))
        self._lock = threading.Lock()
        self.assignment: Assignment | None = None
        self.schema: StoreSchema | None = None
        self.store = ""
        if local is not None:
            self.assignment, self.schema = local.assignment, local.schema
            self.store = local.tail.store_name
        else:
            self.refresh()
        self.codec = KeyCodec(self.schema.spec, self.schema.key_types, self.schema.partitions)

    # --- metadata -------------------------------------------------------------------------
    def refresh(self) -> Assignment:
        """Read the assignment (and schema) from the first instance that answers."""
        errors = []
        for name, url in self.urls.items():
            try:
                meta = self._http.get(f"{url}/metadata", timeout=self.timeout).json()
            except (httpx.HTTPError, ValueError) as exc:
                errors.append(f"{name}: {exc}")
                continue
            self.assignment = Assignment.from_dict(meta["assignment"])
            self.schema = StoreSchema(QuerySpec.from_dict(meta["spec"]), meta["key_types"],
                                      meta["partitions"])
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

    def all_metadata(self):
        """The whole map: one row per (partition, instance) with its role and URL."""
        frame = self.assignment.to_frame()
        frame["url"] = frame["instance"].map(self.urls)
        return frame

    # --- calls -------------------------------------------------------------------------------
    def _call(self, instance: str, kind: str, params: Mapping[str, object],
              partitions: Sequence[int] | None) -> QueryResult:
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
        try:
            response = self._http.get(f"{url}/stores/{self.store}/{kind}", params=query)
        except httpx.HTTPError as exc:
            raise InstanceDown(f"instance {instance!r} at {url} did not answer: "
                               f"{type(exc).__name__}: {exc}") from None
        return decode_response(response)

    def _on_partitions(self, kind: str, params: Mapping[str, object],
                       partitions: Sequence[int], partial: bool | None) -> QueryResult:
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
            for instance, group in by_instance.items():
                try:
                    parts.append(self._call(instance, kind, params, group))
                except InstanceDown as exc:  # the whole instance is gone: its standbys next
                    for p in group:
                        tried[p].append(instance)
                        failures.setdefault(p, []).append(f"{instance}: {exc}")
                    todo.extend(group)
                except PartitionUnavailable as exc:  # one partition there is not ready
                    tried[exc.partition].append(instance)
                    failures.setdefault(exc.partition, []).append(f"{instance}: {exc}")
                    todo.extend(group)
        answered = {a.partition for part in parts for a in part.partitions}
        missing = sorted(set(partitions) - answered)
        if missing and not partial:
            p = missing[0]
            said = "; ".join(failures.get(p, [])) or "no instance holds it (lost)"
            raise PartitionUnavailable(p, f"no live holder answered ({said})")
        result = QueryResult.merge(kind, parts)
        result.missing = missing
        return result

    # --- the queries --------------------------------------------------------------------------
    def get(self, key: object, *, min_batch: int | None = None, timeout: float = 0.0
            ) -> QueryResult:
        """One state row by key, from the owner of its partition (or a standby)."""
        full = self.codec.key(key)
        p = self.codec.partition(full)
        return self._on_partitions("get", {"key": _jsonable(key), "min_batch": min_batch,
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
                 ) -> QueryResult:
        return self._on_partitions(kind, params, list(range(self.schema.partitions)), partial)

    def all(self, *, limit: int | None = None, min_batch: int | None = None,
            partial: bool | None = None) -> QueryResult:
        """Every state row, gathered from every partition's owner."""
        return self._scatter("all", {"limit": limit, "min_batch": min_batch}, partial)

    def fetch_all(self, time_from: object, time_to: object, *, limit: int | None = None,
                  min_batch: int | None = None, partial: bool | None = None) -> QueryResult:
        params = {"time_from": time_ms(time_from, "time_from"),
                  "time_to": time_ms(time_to, "time_to"), "limit": limit,
                  "min_batch": min_batch}
        return self._scatter("fetch_all", params, partial)

    def fetch_range(self, key_from: object | None, key_to: object | None, time_from: object,
                    time_to: object, *, limit: int | None = None, min_batch: int | None = None,
                    partial: bool | None = None) -> QueryResult:
        params = {"key_from": None if key_from is None else self.codec.group(key_from),
                  "key_to": None if key_to is None else self.codec.group(key_to),
                  "time_from": time_ms(time_from, "time_from"),
                  "time_to": time_ms(time_to, "time_to"), "limit": limit,
                  "min_batch": min_batch}
        return self._scatter("fetch_range", params, partial)

    def top_k(self, window_start: object, k: int, by: str, *, min_batch: int | None = None,
              partial: bool | None = None, enrich: str | None = None) -> QueryResult:
        """The leaderboard: the ``k`` largest ``by`` of one window (a running aggregate: of
        every key, ``window_start=None``), over every partition; ``enrich`` adds the columns
        of a global store's entries (looked up where they ran)."""
        start = None if window_start is None else time_ms(window_start, "window_start")
        params = {"window_start": start, "k": k, "by": by, "min_batch": min_batch,
                  "enrich": enrich}
        result = self._scatter("top_k", params, partial)
        result.rows = top(result.rows, k, by, self.schema.spec.keys)
        return result

    def approximate_num_entries(self, *, partial: bool | None = None) -> QueryResult:
        return self._scatter("approximate_num_entries", {}, partial)

    def range(self, key_from: object | None, key_to: object | None, *,
              limit: int | None = None, min_batch: int | None = None,
              partial: bool | None = None) -> QueryResult:
        """Keys from ``key_from`` to ``key_to`` of a key-value store (a running aggregate),
        gathered from every partition (each in the store's key byte order)."""
        params = {"key_from": None if key_from is None else self.codec.group(key_from),
                  "key_to": None if key_to is None else self.codec.group(key_to),
                  "limit": limit, "min_batch": min_batch}
        return self._scatter("range", params, partial)

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
            except httpx.HTTPError as exc:
                errors.append(f"{instance}: {exc}")
                continue
            return decode_response(response)
        raise InstanceDown(f"no serving instance answered: {'; '.join(errors)}")

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ServingClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _jsonable(key: object) -> object:
    """A key as JSON-ready data (times as ISO text or ms)."""
    if isinstance(key, str | bytes):
        return json.loads(key)
    if not isinstance(key, Mapping):
        raise BadArgument("key", key, "a dict (or JSON object) of the key columns")
    out = {}
    for name, value in key.items():
        if name in ("window_start", "window_end"):
            out[name] = time_ms(value, name)
        elif hasattr(value, "item"):  # numpy scalars
            out[name] = value.item()
        else:
            out[name] = value
    return out


def _jsonable_global(key: object) -> object:
    return key.item() if hasattr(key, "item") else key


LOCAL_CALLS: dict[str, Callable] = {
    "get": lambda i, p, parts: i.get(p["key"], min_batch=p.get("min_batch"),
                                     timeout=float(p.get("timeout") or 0)),
    "fetch": lambda i, p, parts: i.fetch(p["key"], p["time_from"], p["time_to"],
                                         partitions=parts, min_batch=p.get("min_batch"),
                                         timeout=float(p.get("timeout") or 0)),
    "find_sessions": lambda i, p, parts: i.find_sessions(
        p["key"], p["earliest_end"], p["latest_start"], partitions=parts,
        min_batch=p.get("min_batch"), timeout=float(p.get("timeout") or 0)),
    "all": lambda i, p, parts: i.all(partitions=parts, limit=p.get("limit") or 1_000_000,
                                     min_batch=p.get("min_batch")),
    "fetch_all": lambda i, p, parts: i.fetch_all(p["time_from"], p["time_to"],
                                                 partitions=parts,
                                                 limit=p.get("limit") or 1_000_000,
                                                 min_batch=p.get("min_batch")),
    "fetch_range": lambda i, p, parts: i.fetch_range(
        p.get("key_from"), p.get("key_to"), p["time_from"], p["time_to"], partitions=parts,
        limit=p.get("limit") or 1_000_000, min_batch=p.get("min_batch")),
    "range": lambda i, p, parts: i.range(p.get("key_from"), p.get("key_to"), partitions=parts,
                                         limit=p.get("limit") or 1_000_000,
                                         min_batch=p.get("min_batch")),
    "top_k": lambda i, p, parts: i.top_k(p["window_start"], p["k"], p["by"],
                                         partitions=parts, min_batch=p.get("min_batch"),
                                         enrich=p.get("enrich")),
    "approximate_num_entries": lambda i, p, parts: i.approximate_num_entries(partitions=parts),
}


def call_local(instance: ServingInstance, kind: str, params: Mapping[str, object],
               partitions: Sequence[int] | None) -> QueryResult:
    """Run query ``kind`` on ``instance`` in this process."""
    if kind not in LOCAL_CALLS:
        raise BadArgument("query", kind, sorted(LOCAL_CALLS))
    return LOCAL_CALLS[kind](instance, params, partitions)


def decode_response(response: httpx.Response) -> QueryResult:
    """A REST answer back as a QueryResult, or the error it carries as an exception."""
    try:
        body = response.json()
    except ValueError:
        raise StatekitError(f"{response.request.url} answered {response.status_code} with "
                            f"no JSON: {response.text[:200]!r}") from None
    if response.status_code == 200:
        return QueryResult.from_dict(body)
    detail = body.get("detail", body) if isinstance(body, dict) else body
    error = detail.get("error") if isinstance(detail, dict) else None
    message = detail.get("message", str(detail)) if isinstance(detail, dict) else str(detail)
    if error == "PartitionUnavailable":
        raise PartitionUnavailable(detail["partition"], message.split(": ", 1)[-1],
                                   detail.get("retry_after", 1.0))
    if error == "PositionNotReached":
        raise PositionNotReached(detail["partition"], detail["wanted"], detail["current"])
    if response.status_code in (400, 404, 413, 422):
        raise BadArgument("request", str(response.request.url.params), message)
    if response.status_code >= 500:
        raise InstanceDown(f"{response.request.url.host}:{response.request.url.port} "
                           f"answered {response.status_code}: {message}")
    raise StatekitError(f"{response.status_code}: {message}")
