"""The REST service of a serving instance: its stores over HTTP, any key from any instance.

Built on FastAPI (routing, validation and an OpenAPI schema from type hints)
served by uvicorn (a small, fast ASGI server): the well-kept Python stack for a
JSON API, and the schema lets the tests fuzz the service against itself.

Like Kafka Streams' ``application.server``, every instance answers every query:
a key whose partition lives elsewhere is forwarded to its owner (or a standby),
and ``all`` / ``fetch_all`` / ``fetch_range`` / ``top_k`` are gathered from all
owners (``statekit.serve.client``). Requests a router sends with ``local=true``
are answered from this instance's own partitions only.

Errors are JSON ``{"detail": {"error": ..., "message": ...}}``: 400 for a bad
key, time or parameter (the value named), 404 for an unknown store, 409 when
the store has not reached the batch asked for (``min_batch``; the batch it has
is given), 413 for a result larger than ``limit`` rows or a request too large,
503 with ``Retry-After`` when no live instance holds a partition (named, with
its state). Served on 127.0.0.1 unless a non-loopback address is asked for
explicitly (``allow_remote=True``).

Example:
    >>> app = create_app(instance, client)                               # doctest: +SKIP
    >>> serve_in_thread(app, port=8123)                                  # doctest: +SKIP
    >>> httpx.get("http://127.0.0.1:8123/stores/counts/top_k",           # doctest: +SKIP
    ...           params={"window_start": "2026-01-05T11:00Z", "k": 5, "by": "sum_score"})
"""

from __future__ import annotations

import ipaddress
import json
import threading
import time
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, HTTPException, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from statekit.errors import BadArgument
from statekit.serve.assignment import Assignment
from statekit.serve.client import ServingClient, call_local
from statekit.serve.instance import PartitionNotHeld, ServingInstance
from statekit.serve.results import PartitionUnavailable, PositionNotReached, QueryResult

MAX_LIMIT = 100_000          # rows one answer may carry
DEFAULT_LIMIT = 10_000
MAX_URL = 8192               # bytes of a request's URL
MAX_BODY = 65_536            # bytes of a request's body
MAX_WAIT = 30.0              # seconds a query may wait for min_batch
PARTITIONS = r"^\d{1,6}(,\d{1,6})*$"


class PartitionModel(BaseModel):
    partition: int
    instance: str
    role: str
    batch: int
    lag_batches: int
    seconds: float
    state: str


class ResultModel(BaseModel):
    """A query's answer: rows, and per partition who answered at which batch."""

    kind: str
    rows: list[dict[str, Any]]
    partitions: list[PartitionModel]
    missing: list[int]


class AssignmentModel(BaseModel):
    assignment: dict[str, Any]
    urls: dict[str, str]


def _fail(status: int, error: str, message: str, headers: dict | None = None, **extra
          ) -> HTTPException:
    return HTTPException(status, {"error": error, "message": message, **extra}, headers=headers)


def _error(exc: Exception) -> HTTPException:
    """The HTTP error of a statekit exception."""
    if isinstance(exc, PositionNotReached):
        return _fail(409, "PositionNotReached", str(exc), partition=exc.partition,
                     wanted=exc.wanted, current=exc.current)
    if isinstance(exc, PartitionUnavailable):
        return _fail(503, "PartitionUnavailable", str(exc), {"Retry-After": str(
            max(1, round(exc.retry_after)))}, partition=exc.partition,
            retry_after=exc.retry_after)
    if isinstance(exc, PartitionNotHeld):
        return _fail(503, "PartitionNotHeld", str(exc), {"Retry-After": "1"},
                     partition=exc.partition)
    if isinstance(exc, BadArgument):
        return _fail(400, "BadArgument", str(exc))
    raise exc


def _time(value: str, what: str) -> int | str:
    """A time parameter: digits are milliseconds, anything else ISO text (checked later)."""
    return int(value) if value.lstrip("-").isdigit() else value


def _json(value: str | None, what: str) -> Any:
    if value is None:
        return None
    try:
        return json.loads(value)
    except ValueError:
        raise _fail(400, "BadArgument", f"bad {what}: {value!r}; accepted: a JSON object of "
                                        f"the key columns, e.g. {{\"player\": \"p07\"}}"
                    ) from None


def _partitions(value: str | None, instance: ServingInstance) -> list[int] | None:
    if value is None:
        return None
    parts = [int(p) for p in value.split(",")]
    bad = [p for p in parts if not 0 <= p < instance.schema.partitions]
    if bad:
        raise _fail(400, "BadArgument", f"bad partition: {bad[0]}; accepted: 0.."
                                        f"{instance.schema.partitions - 1}")
    return parts


def create_app(instance: ServingInstance, client: ServingClient | None = None,
               on_assignment: Callable[[Assignment], None] | None = None) -> FastAPI:
    """The FastAPI app of ``instance``; ``client`` routes what it does not hold itself."""
    client = client or ServingClient({instance.name: ""}, local=instance)
    app = FastAPI(title=f"statekit serving instance {instance.name}", version="1",
                  description="Interactive queries over the state of a Spark streaming "
                              "aggregation, kept current from its Kafka changelog.")
    store = instance.tail.store_name

    @app.middleware("http")
    async def limit_size(request: Request, call_next):
        if len(str(request.url)) > MAX_URL:
            return JSONResponse({"detail": {"error": "RequestTooLarge", "message": (
                f"the URL is longer than {MAX_URL} bytes")}}, status_code=414)
        length = request.headers.get("content-length", "0")
        if not length.isdigit() or int(length) > MAX_BODY:
            return JSONResponse({"detail": {"error": "RequestTooLarge", "message": (
                f"the body is larger than {MAX_BODY} bytes (content-length {length!r})")}},
                status_code=413)
        return await call_next(request)

    def check_store(name: str) -> None:
        if name != store:
            raise _fail(404, "UnknownStore", f"no store {name!r} here; stores: {store}")

    def run(kind: str, params: dict, partitions: list[int] | None, local: bool,
            partial: bool = False, limit: int | None = None) -> dict:
        try:
            if local:
                result = call_local(instance, kind, params, partitions)
            else:
                result = route(kind, params, partial)
        except (BadArgument, PositionNotReached, PartitionUnavailable, PartitionNotHeld) as exc:
            raise _error(exc) from None
        if limit is not None and not local and len(result.rows) > limit:  # routers check it
            raise _fail(413, "ResultTooLarge", f"the answer has more than {limit} rows; ask "
                                               f"with a larger limit (up to {MAX_LIMIT}) or a "
                                               f"narrower query")
        return result.to_dict()

    def route(kind: str, params: dict, partial: bool) -> QueryResult:
        p = params
        if kind == "get":
            return client.get(p["key"], min_batch=p["min_batch"], timeout=p["timeout"])
        if kind == "fetch":
            return client.fetch(p["key"], p["time_from"], p["time_to"],
                                min_batch=p["min_batch"], timeout=p["timeout"])
        if kind == "find_sessions":
            return client.find_sessions(p["key"], p["earliest_end"], p["latest_start"],
                                        min_batch=p["min_batch"], timeout=p["timeout"])
        if kind == "all":
            return client.all(limit=p["limit"], min_batch=p["min_batch"], partial=partial)
        if kind == "fetch_all":
            return client.fetch_all(p["time_from"], p["time_to"], limit=p["limit"],
                                    min_batch=p["min_batch"], partial=partial)
        if kind == "fetch_range":
            return client.fetch_range(p["key_from"], p["key_to"], p["time_from"],
                                      p["time_to"], limit=p["limit"],
                                      min_batch=p["min_batch"], partial=partial)
        if kind == "top_k":
            return client.top_k(p["window_start"], p["k"], p["by"], min_batch=p["min_batch"],
                                partial=partial)
        return client.approximate_num_entries(partial=partial)

    key_doc = ('the key as a JSON object, e.g. {"player": "p07", '
               '"window_start": "2026-01-05T10:00Z"}')
    time_doc = "milliseconds since the epoch or ISO-8601 text"
    # one Query object per parameter: FastAPI binds each to the first parameter it meets
    def MinBatch():  # noqa: N802
        return Query(None, ge=0, le=2**62,
                     description="answer only once the store reflects at least this batch")

    def Wait():  # noqa: N802
        return Query(0.0, ge=0.0, le=MAX_WAIT, description="seconds to wait for min_batch")

    def Local():  # noqa: N802
        return Query(False, description="answer from this instance's partitions only "
                                        "(routers)")

    def Parts():  # noqa: N802
        return Query(None, pattern=PARTITIONS, max_length=4096,
                     description="comma-separated partitions")

    def Partial():  # noqa: N802
        return Query(False, description="answer without partitions no live instance holds "
                                        "(listed in missing) instead of failing")

    def Limit():  # noqa: N802
        return Query(DEFAULT_LIMIT, ge=1, le=MAX_LIMIT, description="most rows in the answer")

    def Time():  # noqa: N802
        return Query(..., max_length=64, description=time_doc)

    @app.get("/health")
    def health() -> dict:
        return {"status": "ok", "instance": instance.name}

    @app.get("/metadata")
    def metadata() -> dict:
        """This instance, the assignment, and every held partition's state and batch."""
        return {**instance.metadata(), "urls": client.urls}

    @app.post("/assignment")
    def set_assignment(body: AssignmentModel) -> dict:
        """Take a new assignment (sent by the cluster after an instance died)."""
        try:
            assignment = Assignment.from_dict(body.assignment)
        except BadArgument as exc:
            raise _error(exc) from None
        if instance.name not in assignment.instances or \
                assignment.partitions != instance.schema.partitions:
            raise _fail(400, "BadArgument", f"bad assignment: it must name instance "
                                            f"{instance.name!r} and cover "
                                            f"{instance.schema.partitions} partitions")
        instance.set_assignment(assignment)
        client.set_assignment(assignment, body.urls)
        if on_assignment is not None:
            on_assignment(assignment)
        return {"instance": instance.name, "version": assignment.version,
                "held": {str(p): r for p, r in instance.roles.items()}}

    @app.get("/stores/{name}/get", response_model=ResultModel)
    def get(name: str, key: str = Query(..., max_length=4096, description=key_doc),
            min_batch: int | None = MinBatch(), timeout: float = Wait(), local: bool = Local()):
        """One state row by its full key (group keys and window_start)."""
        check_store(name)
        return JSONResponse(run("get", {"key": _json(key, "key"), "min_batch": min_batch,
                                        "timeout": timeout}, None, local))

    @app.get("/stores/{name}/fetch", response_model=ResultModel)
    def fetch(name: str, key: str = Query(..., max_length=4096, description=key_doc),
              time_from: str = Time(), time_to: str = Time(), min_batch: int | None = MinBatch(),
              timeout: float = Wait(), partitions: str | None = Parts(), local: bool = Local()):
        """A key's windows starting in [time_from, time_to], in time order."""
        check_store(name)
        params = {"key": _json(key, "key"), "time_from": _time(time_from, "time_from"),
                  "time_to": _time(time_to, "time_to"), "min_batch": min_batch,
                  "timeout": timeout}
        return JSONResponse(run("fetch", params, _partitions(partitions, instance), local))

    @app.get("/stores/{name}/find_sessions", response_model=ResultModel)
    def find_sessions(name: str, key: str = Query(..., max_length=4096, description=key_doc),
                      earliest_end: str = Time(), latest_start: str = Time(),
                      min_batch: int | None = MinBatch(), timeout: float = Wait(),
                      partitions: str | None = Parts(), local: bool = Local()):
        """A key's sessions ending at or after earliest_end and starting at or before
        latest_start (session stores)."""
        check_store(name)
        params = {"key": _json(key, "key"),
                  "earliest_end": _time(earliest_end, "earliest_end"),
                  "latest_start": _time(latest_start, "latest_start"),
                  "min_batch": min_batch, "timeout": timeout}
        return JSONResponse(run("find_sessions", params, _partitions(partitions, instance),
                                local))

    @app.get("/stores/{name}/all", response_model=ResultModel)
    def all_rows(name: str, limit: int = Limit(), min_batch: int | None = MinBatch(),
                 partitions: str | None = Parts(), local: bool = Local(),
                 partial: bool = Partial()):
        """Every state row, gathered from every partition."""
        check_store(name)
        params = {"limit": limit + 1, "min_batch": min_batch}
        return JSONResponse(run("all", params, _partitions(partitions, instance), local,
                                partial, limit))

    @app.get("/stores/{name}/fetch_all", response_model=ResultModel)
    def fetch_all(name: str, time_from: str = Time(), time_to: str = Time(), limit: int = Limit(),
                  min_batch: int | None = MinBatch(), partitions: str | None = Parts(),
                  local: bool = Local(), partial: bool = Partial()):
        """Every window starting in [time_from, time_to]."""
        check_store(name)
        params = {"time_from": _time(time_from, "time_from"),
                  "time_to": _time(time_to, "time_to"), "limit": limit + 1,
                  "min_batch": min_batch}
        return JSONResponse(run("fetch_all", params, _partitions(partitions, instance), local,
                                partial, limit))

    @app.get("/stores/{name}/fetch_range", response_model=ResultModel)
    def fetch_range(name: str, time_from: str = Time(), time_to: str = Time(),
                    key_from: str | None = Query(None, max_length=4096),
                    key_to: str | None = Query(None, max_length=4096), limit: int = Limit(),
                    min_batch: int | None = MinBatch(), partitions: str | None = Parts(),
                    local: bool = Local(), partial: bool = Partial()):
        """Windows of the keys from key_from to key_to (store byte order) in time."""
        check_store(name)
        params = {"key_from": _json(key_from, "key_from"), "key_to": _json(key_to, "key_to"),
                  "time_from": _time(time_from, "time_from"),
                  "time_to": _time(time_to, "time_to"), "limit": limit + 1,
                  "min_batch": min_batch}
        return JSONResponse(run("fetch_range", params, _partitions(partitions, instance),
                                local, partial, limit))

    @app.get("/stores/{name}/top_k", response_model=ResultModel)
    def top_k(name: str, window_start: str = Time(), k: int = Query(10, ge=1, le=MAX_LIMIT),
              by: str = Query(..., max_length=256), min_batch: int | None = MinBatch(),
              partitions: str | None = Parts(), local: bool = Local(), partial: bool = Partial()):
        """The leaderboard: the k rows of one window with the largest ``by``."""
        check_store(name)
        params = {"window_start": _time(window_start, "window_start"), "k": k, "by": by,
                  "min_batch": min_batch}
        return JSONResponse(run("top_k", params, _partitions(partitions, instance), local,
                                partial))

    @app.get("/stores/{name}/approximate_num_entries", response_model=ResultModel)
    def approximate_num_entries(name: str, partitions: str | None = Parts(),
                                local: bool = Local(), partial: bool = Partial()):
        """About how many state rows each partition holds."""
        check_store(name)
        return JSONResponse(run("approximate_num_entries", {},
                                _partitions(partitions, instance), local, partial))

    return app


def check_host(host: str, allow_remote: bool) -> str:
    """``host`` when it is a loopback address, or when remote serving is asked for."""
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback and not allow_remote:
        raise BadArgument("host", host, "a loopback address such as 127.0.0.1 (pass "
                                        "allow_remote=True to listen on other interfaces)")
    return host


class Server:
    """A uvicorn server for ``app`` on a background thread (stop() ends it)."""

    def __init__(self, app: FastAPI, host: str = "127.0.0.1", port: int = 0, *,
                 allow_remote: bool = False):
        import uvicorn

        from statekit.kafka.broker import free_port

        self.host = check_host(host, allow_remote)
        self.port = port or free_port(self.host)
        config = uvicorn.Config(app, host=self.host, port=self.port, log_level="warning",
                                access_log=False, lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name=f"rest-{self.port}",
                                        daemon=True)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, timeout: float = 30.0) -> Server:
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the REST server on {self.url} did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(10)
