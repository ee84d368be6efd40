"""Which serving instance answers for which partition, and asking them: a client's routing.

A ``PartitionRouter`` knows the instances' URLs and the assignment (partition → active
instance and standbys, read from the first instance that answers, or the ``local`` one). It
asks each partition's holders, active first and its standbys next, in parallel threads per
instance, and gathers their answers; a partition no live holder answers raises
``PartitionUnavailable`` (or is listed in ``missing`` with ``partial``). The queries
themselves are ``ServingClient``'s (``statekit.serve.client``).

Example:
    >>> check_urls({"i0": "http://127.0.0.1:8123"})
    {'i0': 'http://127.0.0.1:8123'}
"""

from __future__ import annotations

import json
import os
import ssl
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Self

import httpx
import pandas as pd

from statekit.errors import (
    BadArgument,
    InstanceDown,
    PartitionNotHeld,
    PartitionUnavailable,
)
from statekit.model.query_spec import QuerySpec
from statekit.model.store_schema import PartShape, StoreSchema
from statekit.serve.answers import decode_response
from statekit.serve.auth import bearer, client_context
from statekit.serve.instance import ServingInstance
from statekit.serve.local_calls import call_local
from statekit.serve.part_keys import key_codec
from statekit.serve.results import QueryResult, TableResult
from statekit.serve.routing.assignment import Assignment
from statekit.serve.transport import HttpError, HttpPool


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

class PartitionRouter:
    """The instances a client asks, the assignment, and the asking of partitions' holders.

    ``ServingClient`` is this with the queries; its docstring says what the arguments mean.
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

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
