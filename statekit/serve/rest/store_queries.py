"""A store's queries as the REST service answers them: here (``local``, or a key this
instance owns) or routed by the client to the instances that hold the partitions.

A wait for ``min_batch`` holds no thread: the query is asked without waiting, and when a
partition it needs is behind, the request awaits that partition's next change (here, or
``/position`` on the instance that answered: ``_RemoteWaits``) and asks again.

Example:
    >>> query_time("1767607200000"), query_time("2026-01-05T10:00Z")
    (1767607200000, '2026-01-05T10:00Z')
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable

import httpx
from anyio import CapacityLimiter, to_thread
from fastapi.responses import Response

from statekit.errors import BadArgument, PartitionUnavailable, PositionNotReached, ResultTooLarge
from statekit.serve.answers import ARROW_STREAM
from statekit.serve.client import ServingClient
from statekit.serve.instance import QUERIES, ServingInstance
from statekit.serve.local_calls import call_local
from statekit.serve.rest.http_errors import ANSWERED, as_http_error, bad_argument_as_400, fail
from statekit.serve.rest.limits import MAX_WAIT, QUERY_THREADS
from statekit.serve.results import MAX_LIMIT, QueryResult, TableResult
from statekit.serve.rows_text import RowsText, encode

_MILLIS = re.compile(r"-?[0-9]{1,19}")


def query_time(value: str) -> int | str:
    """A time parameter: ASCII digits are milliseconds, anything else ISO text (checked later)."""
    return int(value) if _MILLIS.fullmatch(value) else value


def asked_partitions(value: str | None, instance: ServingInstance) -> list[int] | None:
    """The partitions asked (in the order given), each one of the store's, each once."""
    if value is None:
        return None
    parts = [int(p) for p in value.split(",")]
    bad = [p for p in parts if not 0 <= p < instance.schema.partitions]
    if bad:
        raise fail(400, "BadArgument", f"bad partition: {bad[0]}; accepted: 0.."
                                       f"{instance.schema.partitions - 1}")
    if len(set(parts)) < len(parts):
        raise fail(400, "BadArgument", f"bad partitions: {value!r}; accepted: each partition "
                                       f"at most once")
    return parts


def json_response(result: QueryResult) -> Response:
    return Response(encode(result.to_dict()), media_type="application/json")


def arrow_response(result: TableResult) -> Response:
    return Response(result.to_ipc(), media_type=ARROW_STREAM)


class _RemoteWaits:
    """Waits on other instances for a batch (``GET .../position`` with the wait), asked with
    asyncio (httpx) so that a forwarded wait holds no thread here either."""

    def __init__(self, client: ServingClient):
        self.client = client
        self._http: httpx.AsyncClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def wait(self, name: str, partition: int, batch: int, timeout: float) -> bool:
        """Until instance ``name``'s store of ``partition`` reflects ``batch``, it no longer
        holds it, or ``timeout`` seconds (whatever it answers, the query is asked again);
        False when it could not ask (no address, no answer)."""
        url = self.client.urls.get(name)
        if not url:
            return False
        loop = asyncio.get_running_loop()
        if self._http is None or self._loop is not loop:  # bound to the loop that made it
            self._http, self._loop = self.client.async_http(), loop
        params = {"partitions": str(partition), "min_batch": batch, "local": "true",
                  "timeout": f"{min(timeout, MAX_WAIT):.3f}"}
        try:
            await self._http.get(f"{url}/stores/{self.client.store}/position", params=params,
                                 timeout=self.client.timeout + timeout)
        except httpx.HTTPError:  # gone: asked again, the query goes to a standby
            return False
        return True


class StoreQueries:
    """The queries of ``instance``'s store; ``client`` routes what it does not hold itself.

    Queries that read a store run on ``QUERY_THREADS`` threads of their own (``queries``),
    never waiting behind ``/metadata`` or ``POST /assignment``, nor those behind queries;
    lookups of keys held here answer on the event loop.
    """

    def __init__(self, instance: ServingInstance, client: ServingClient):
        self.instance, self.client = instance, client
        self.store = instance.tail.store_name
        self.codec = instance.codec
        self.served = QUERIES[instance.kind]
        self.queries = CapacityLimiter(QUERY_THREADS)
        self.remote = _RemoteWaits(client)
        self.rows_text = RowsText(instance)  # /all's rows as text, per partition and position

    def check_store(self, name: str) -> None:
        if name != self.store:
            raise fail(404, "UnknownStore", f"no store {name!r} here; stores: {self.store}")

    def check_served(self, kind: str) -> None:
        """400 unless this store's kind answers query ``kind``."""
        if kind not in self.served:
            raise as_http_error(BadArgument("query", kind, f"the queries of a "
                                            f"{self.instance.kind} store: "
                                            f"{', '.join(self.served)}"))

    def run(self, kind: str, params: dict, partitions: list[int] | None, local: bool,
            partial: bool = False, limit: int | None = None) -> QueryResult | TableResult:
        """The query's answer, here (``local``, or a key this instance owns) or routed;
        statekit's errors raised as they are."""
        if not local and not (kind == "get" and self.owns(params["key"])):
            return self.route(kind, params, partial)
        # scans read limit + 1 rows a partition: a longer answer is refused
        result = call_local(self.instance, kind, params, partitions)
        if limit is not None and len(result.rows) > limit:
            raise ResultTooLarge(kind, limit, MAX_LIMIT)
        return result

    async def answer(self, kind: str, params: dict, partitions: list[int] | None = None,
                     local: bool = False, partial: bool = False, limit: int | None = None,
                     *, inline: bool = False, respond: Callable = json_response
                     ) -> Response:
        """``respond(run(...))`` asked without waiting, again each time a partition it needs
        moves on, until ``params["timeout"]``: a wait for ``min_batch`` (through a restore
        too) is a coroutine awaiting that partition's progress (here, or ``position`` on the
        instance that answered), holding no thread. ``inline``: on the event loop (a lookup here:
        microseconds), else in one of the query threads, the answer's body written there
        too (a large one would hold the event loop for milliseconds)."""
        def ask() -> Response:
            return respond(self.run(kind, {**params, "timeout": 0.0}, partitions, local,
                                    partial, limit))

        instance = self.instance
        deadline = time.monotonic() + (params.get("timeout") or 0.0)
        while True:
            try:
                return ask() if inline else await to_thread.run_sync(ask, limiter=self.queries)
            except PositionNotReached as exc:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise as_http_error(exc) from None
                if exc.instance in ("", instance.name):
                    waited = await instance.wait_for_batch_async(exc.partition, exc.wanted,
                                                                 remaining)
                else:
                    waited = await self.remote.wait(exc.instance, exc.partition, exc.wanted,
                                                    remaining)
                if not waited:  # (not held there, or no answer): asked again, not at once
                    await asyncio.sleep(min(remaining, 0.05))
            except PartitionUnavailable as exc:  # restoring here: with a position asked, the
                remaining = deadline - time.monotonic()  # restore is part of the wait
                wanted = params.get("min_batch")
                if wanted is None or remaining <= 0 or not await \
                        instance.wait_for_batch_async(exc.partition, wanted, remaining):
                    raise as_http_error(exc) from None
            except ANSWERED as exc:
                raise as_http_error(exc) from None

    def route(self, kind: str, params: dict, partial: bool) -> QueryResult | TableResult:
        """The query asked of the instances that hold what it reads (``client``)."""
        client = self.client
        p, wait = params, {"min_batch": params.get("min_batch"), "timeout": params["timeout"]}
        if kind == "get":
            return client.get(p["key"], **wait)
        if kind == "fetch":
            return client.fetch(p["key"], p["time_from"], p["time_to"], **wait)
        if kind == "find_sessions":
            return client.find_sessions(p["key"], p["earliest_end"], p["latest_start"], **wait)
        if kind == "all":
            return client.all(limit=p["limit"], partial=partial, **wait)
        if kind == "fetch_all":
            return client.fetch_all(p["time_from"], p["time_to"], limit=p["limit"],
                                    partial=partial, **wait)
        if kind == "fetch_range":
            return client.fetch_range(p["key_from"], p["key_to"], p["time_from"],
                                      p["time_to"], limit=p["limit"], partial=partial, **wait)
        if kind == "range":
            return client.range(p["key_from"], p["key_to"], limit=p["limit"], partial=partial,
                                **wait)
        if kind == "table":
            return client.table(partial=partial, **wait)
        if kind == "top_k":
            return client.top_k(p["window_start"], p["k"], p["by"], partial=partial,
                                enrich=p.get("enrich"), **wait)
        if kind == "position":
            return client.position(partial=partial, **wait)
        return client.approximate_num_entries(partial=partial)

    def key_of(self, text: str | None, what: str, window: bool) -> dict | None:
        """A key parameter: a JSON object of the group keys (and, ``window``, window_start)."""
        return None if text is None else bad_argument_as_400(self.codec.parse, text, what,
                                                             window=window)

    def owns(self, key: object) -> bool:
        """True when this instance is the active owner of ``key``'s partition (a bad key:
        True too, so that the lookup here names what is wrong with it)."""
        try:
            return self.active_here(self.codec.locate(key)[0])
        except BadArgument:
            return True

    def active_here(self, partition: int) -> bool:
        return self.instance.role(partition) == "active"

    async def lookup(self, key: str, min_batch: int | None, timeout: float, local: bool
                     ) -> Response:
        """``GET /stores/{name}/get``: a key held here answers on the event loop."""
        found = self.key_of(key, "key", self.instance.kind != "key-value")
        params = {"key": found, "min_batch": min_batch, "timeout": timeout}
        # a lookup here takes microseconds: answered on the event loop
        return await self.answer("get", params, None, local, inline=local or self.owns(found))

    async def rows_body(self, parts: list[int] | None, local: bool, min_batch: int | None,
                        limit: int) -> Response | None:
        """``/all`` answered from rows kept as text, when that is the plain case
        (``RowsText.plain``), else None."""
        # partitions narrow a local ask only: a routed one reads every partition it needs
        plain = self.rows_text.plain(parts if local else None, not local, min_batch)
        if plain is None:
            return None
        # made once per store position, then joined on the event loop
        rows_text = self.rows_text
        try:
            body = rows_text.body(plain, limit, made_only=True) or await \
                to_thread.run_sync(lambda: rows_text.body(plain, limit, made_only=False),
                                   limiter=self.queries)
        except ANSWERED as exc:
            raise as_http_error(exc) from None
        return None if body is None else Response(body, media_type="application/json")
