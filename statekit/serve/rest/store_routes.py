"""The query routes of a store, ``/stores/{name}/...``: each reads its query model
(``models``) and asks ``StoreQueries``; in the schema only the queries the store's kind
answers.

This module does not postpone its annotations: the top_k route's query model is made per
store (its value columns, the global stores held), and FastAPI reads it from the route's
signature.

Example:
    >>> app.include_router(store_router(StoreQueries(instance, client)))  # doctest: +SKIP
"""

from typing import Annotated

from fastapi import APIRouter, Path, Query
from fastapi.responses import Response

from statekit.serve.answers import ARROW_STREAM
from statekit.serve.rest.http_errors import QUERY_ERRORS, fail
from statekit.serve.rest.models import (
    AllQuery,
    CountQuery,
    FetchAllQuery,
    FetchQuery,
    FetchRangeQuery,
    FindSessionsQuery,
    LookupQuery,
    RangeQuery,
    ResultModel,
    WholeStoreQuery,
    top_k_query,
)
from statekit.serve.rest.store_queries import (
    StoreQueries,
    arrow_response,
    asked_partitions,
    query_time,
)


def store_router(queries: StoreQueries) -> APIRouter:
    """The routes of ``queries``' store (``/stores/{name}/<query>``)."""
    router = APIRouter()
    instance, store = queries.instance, queries.store
    key_of, answer = queries.key_of, queries.answer
    globals_held = sorted(instance.globals)
    TopKQuery = top_k_query(list(instance.schema.shape.value_columns), globals_held)  # noqa: N806

    def store_path():
        """The store's path parameter (a new one per route: FastAPI binds each to one)."""
        return Path(description=f"the store (here: {store}; any other name is 404)",
                    json_schema_extra={"enum": [store]})

    def listed(kind: str) -> dict:
        """A query route's settings: in the schema only when this store answers it."""
        return {"response_model": ResultModel, "responses": QUERY_ERRORS,
                "include_in_schema": kind in queries.served}

    def parts(asked: str | None) -> list[int] | None:
        return asked_partitions(asked, instance)

    @router.get("/stores/{name}/get", **listed("get"))
    async def get(q: Annotated[LookupQuery, Query()], name: str = store_path()):
        """One state row by its full key (group keys and window_start)."""
        queries.check_store(name)
        return await queries.lookup(q.key, q.min_batch, q.timeout, q.local)

    @router.get("/stores/{name}/fetch", **listed("fetch"))
    async def fetch(q: Annotated[FetchQuery, Query()], name: str = store_path()):
        """A key's windows starting in [time_from, time_to], in time order."""
        queries.check_store(name)
        params = {"key": key_of(q.key, "key", False), "time_from": query_time(q.time_from),
                  "time_to": query_time(q.time_to), "min_batch": q.min_batch,
                  "timeout": q.timeout}
        return await answer("fetch", params, parts(q.partitions), q.local)

    @router.get("/stores/{name}/find_sessions", **listed("find_sessions"))
    async def find_sessions(q: Annotated[FindSessionsQuery, Query()],
                            name: str = store_path()):
        """A key's sessions ending at or after earliest_end and starting at or before
        latest_start (session stores)."""
        queries.check_store(name)
        queries.check_served("find_sessions")  # before routing: a window's key has no partition
        params = {"key": key_of(q.key, "key", False),
                  "earliest_end": query_time(q.earliest_end),
                  "latest_start": query_time(q.latest_start), "min_batch": q.min_batch,
                  "timeout": q.timeout}
        return await answer("find_sessions", params, parts(q.partitions), q.local)

    @router.get("/stores/{name}/all", **listed("all"))
    async def all_rows(q: Annotated[AllQuery, Query()], name: str = store_path()):
        """Every state row, gathered from every partition."""
        queries.check_store(name)
        asked = parts(q.partitions)
        kept = await queries.rows_body(asked, q.local, q.min_batch, q.limit)
        if kept is not None:
            return kept
        params = {"limit": q.limit, "min_batch": q.min_batch, "timeout": q.timeout}
        return await answer("all", params, asked, q.local, q.partial, q.limit)

    @router.get("/stores/{name}/fetch_all", **listed("fetch_all"))
    async def fetch_all(q: Annotated[FetchAllQuery, Query()], name: str = store_path()):
        """Every window starting in [time_from, time_to]."""
        queries.check_store(name)
        params = {"time_from": query_time(q.time_from), "time_to": query_time(q.time_to),
                  "limit": q.limit, "min_batch": q.min_batch, "timeout": q.timeout}
        return await answer("fetch_all", params, parts(q.partitions), q.local, q.partial,
                            q.limit)

    @router.get("/stores/{name}/fetch_range", **listed("fetch_range"))
    async def fetch_range(q: Annotated[FetchRangeQuery, Query()], name: str = store_path()):
        """Windows of the keys from key_from to key_to (store byte order) in time."""
        queries.check_store(name)
        params = {"key_from": key_of(q.key_from, "key_from", False),
                  "key_to": key_of(q.key_to, "key_to", False),
                  "time_from": query_time(q.time_from), "time_to": query_time(q.time_to),
                  "limit": q.limit, "min_batch": q.min_batch, "timeout": q.timeout}
        return await answer("fetch_range", params, parts(q.partitions), q.local, q.partial,
                            q.limit)

    @router.get("/stores/{name}/range", **listed("range"))
    async def key_range(q: Annotated[RangeQuery, Query()], name: str = store_path()):
        """Keys from key_from to key_to (store byte order) of a key-value store (a running
        aggregate)."""
        queries.check_store(name)
        params = {"key_from": key_of(q.key_from, "key_from", False),
                  "key_to": key_of(q.key_to, "key_to", False), "limit": q.limit,
                  "min_batch": q.min_batch, "timeout": q.timeout}
        return await answer("range", params, parts(q.partitions), q.local, q.partial,
                            q.limit)

    @router.get("/stores/{name}/top_k", **listed("top_k"))
    async def top_k(q: Annotated[TopKQuery, Query()], name: str = store_path()):
        """The leaderboard: the k rows of one window with the largest ``by``."""
        queries.check_store(name)
        if q.enrich is not None and q.enrich not in instance.globals:
            raise fail(400, "BadArgument", f"bad global store: {q.enrich!r}; accepted: "
                                           f"{', '.join(globals_held) or '(none held)'}")
        params = {"window_start": None if q.window_start is None else
                  query_time(q.window_start), "k": q.k, "by": q.by,
                  "min_batch": q.min_batch, "timeout": q.timeout, "enrich": q.enrich}
        return await answer("top_k", params, parts(q.partitions), q.local, q.partial)

    @router.get("/stores/{name}/table", response_class=Response, responses={
        200: {"content": {ARROW_STREAM: {"schema": {"type": "string", "format": "binary"}}},
              "description": "an Arrow IPC stream: one row per state row, a partition "
                             "column first; the per-partition report in the schema "
                             "metadata (statekit.partitions)"},
        **QUERY_ERRORS})
    async def table(q: Annotated[WholeStoreQuery, Query()], name: str = store_path()):
        """The whole state, columnar (Arrow IPC), with no row limit: the bulk read."""
        queries.check_store(name)
        return await answer("table", {"min_batch": q.min_batch, "timeout": q.timeout},
                            parts(q.partitions), q.local, q.partial, respond=arrow_response)

    @router.get("/stores/{name}/approximate_num_entries", **listed("approximate_num_entries"))
    async def approximate_num_entries(q: Annotated[CountQuery, Query()],
                                      name: str = store_path()):
        """About how many state rows each partition holds (RocksDB's estimate; a small
        store, or one whose estimate is below what it surely holds, is counted)."""
        queries.check_store(name)
        return await answer("approximate_num_entries", {}, parts(q.partitions), q.local,
                            q.partial)

    @router.get("/stores/{name}/position", **listed("position"))
    async def position(q: Annotated[WholeStoreQuery, Query()], name: str = store_path()):
        """The batch each partition reflects, once it reaches min_batch: a wait for the
        store to catch up (rows: partition, batch), without reading it."""
        queries.check_store(name)
        return await answer("position", {"min_batch": q.min_batch, "timeout": q.timeout},
                            parts(q.partitions), q.local, q.partial, inline=q.local)

    return router
