"""The REST service of a serving instance: its stores over HTTP, any key from any instance.

Built on FastAPI (routing, validation and an OpenAPI schema from type hints)
served by uvicorn (a small, fast ASGI server): the well-kept Python stack for a
JSON API, and the schema lets the tests fuzz the service against itself
(``tests/serve/test_rest_fuzz.py``: every answer, error or not, is the one the schema
documents).

Like Kafka Streams' ``application.server``, every instance answers every query:
a key whose partition lives elsewhere is forwarded to its owner (or a standby),
and ``all`` / ``fetch_all`` / ``fetch_range`` / ``top_k`` are gathered from all
owners (``statekit.serve.client``). Requests a router sends with ``local=true``
are answered from this instance's own partitions only (``partitions`` narrows
them; a routed query reads every partition it needs).

Every error is JSON ``{"detail": {"error": ..., "message": ...}}`` naming the bad
value and what would be accepted: 400 for a bad key, time or parameter (a key is
parsed within bounds: ``keys.MAX_KEY_CHARS``, ``keys.MAX_KEY_DEPTH``), 404 for an
unknown store or path, 405 for a method a path does not take, 409 when the store
has not reached the batch asked for within ``timeout`` (``min_batch``; the batch it
has is given), 413 for a result larger than ``limit`` rows or a body larger than
``MAX_BODY``, 414 for a URL longer than ``MAX_URL`` (the server's own refusals are
JSON too: ``StatekitHttpProtocol``), 421 for a key asked with ``local=true`` of a
partition this instance does not hold (its owners named), 422 for a parameter or
body of the wrong shape (each problem listed in ``errors``), 503 with
``Retry-After`` when no live instance holds a partition (named, with its state).
The OpenAPI schema states what the service takes (``_tighten``). Served on
127.0.0.1 unless a non-loopback address is asked for explicitly
(``allow_remote=True``).

A wait for ``min_batch`` holds no thread: the query is asked without waiting, and
when a partition it needs is behind, the request awaits that partition's next
change (``ChangelogTail.wait_for_batch_async``; on another instance, its
``/position``) and asks again. Queries that read a store run on ``QUERY_THREADS``
threads of their own and an assignment that moves partitions on
``CONTROL_THREADS`` others; lookups of keys held here, ``/health``, ``/metadata``
and an assignment that moves nothing answer on the event loop.

A data listener saturated by queries answers every request, ``/health`` included,
only after a pass of its event loop over the requests in flight. So, as Kafka
separates controller traffic from the data plane (a control-plane listener,
KIP-291), an instance can also serve ``/health``, ``/metadata`` and
``POST /assignment`` on a control listener of its own (``create_control_app``: its
own port, thread and event loop); a cluster's instances do, and the cluster checks
health and sends assignments there, so failover is not queued behind lookups.

Example:
    >>> app = create_app(instance, client)                               # doctest: +SKIP
    >>> server = Server(app, port=8123).start()                          # doctest: +SKIP
    >>> httpx.get(f"{server.url}/stores/board-counts/top_k",             # doctest: +SKIP
    ...           params={"window_start": "2026-01-05T11:00Z", "k": 5, "by": "sum_score"})
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
import threading
import time
from collections.abc import Callable
from typing import Annotated, Any
from urllib.parse import parse_qsl

import httpx
from anyio import CapacityLimiter, to_thread
from fastapi import Depends, FastAPI, HTTPException, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, StringConstraints
from starlette.exceptions import HTTPException as StarletteHTTPException
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from statekit.errors import BadArgument
from statekit.serve.auth import (
    ServingSecurity,
    announce,
    arm,
    install,
    is_loopback,
    refusal,
    settle,
)
from statekit.serve.client import ARROW_STREAM, ServingClient, call_local
from statekit.serve.instance import QUERIES, PartitionNotHeld, ServingInstance
from statekit.serve.results import (
    MAX_LIMIT,
    PartitionUnavailable,
    PositionNotReached,
    QueryResult,
    ResultTooLarge,
    TableResult,
)
from statekit.serve.routing.assignment import Assignment
from statekit.serve.routing.key_codec import MAX_KEY_CHARS, check_key_text, time_schema
from statekit.serve.rows_text import RowsText, encode

DEFAULT_LIMIT = 10_000
MAX_URL = 60_000             # bytes of a request's target (path and query; httptools parses
                             # up to 64 KiB): two keys of 5 columns of MAX_KEY_VALUE_CHARS
                             # characters fit, however escaped
MAX_BODY = 65_536            # bytes of a request's body
MAX_WAIT = 30.0              # seconds a query may wait for min_batch
MAX_REQUEST_LINE = 262_144   # bytes of a request's target (and h11's head) the server itself
                             # reads: well over MAX_URL, so statekit's own 414 answers first
MAX_ID = 2**53 - 1           # batch ids and versions: whole numbers JSON (a double) holds exactly
QUERY_THREADS = 32           # queries reading a store or asking other instances, at once
CONTROL_THREADS = 4          # /metadata and POST /assignment: threads of their own
# partitions as ASCII digits without leading zeros (the same in Python, Rust and ECMA regexes)
PARTITIONS = r"^(0|[1-9][0-9]{0,5})(,(0|[1-9][0-9]{0,5}))*$"
_MILLIS = re.compile(r"-?[0-9]{1,19}")
_SHOWN = 300                 # characters of a bad value an error message shows


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


class ErrorDetail(BaseModel):
    """What went wrong: the error's name, a message naming the bad value, and its facts."""

    model_config = ConfigDict(extra="allow")
    error: str
    message: str


class ErrorModel(BaseModel):
    detail: ErrorDetail


class HealthModel(BaseModel):
    status: str
    instance: str


PartitionKey = Annotated[str, StringConstraints(pattern=r"^[0-9]{1,6}$")]
NO_OTHER_KEYS = {"additionalProperties": False}


class AssignmentData(BaseModel):
    """An assignment as ``Assignment.to_dict()`` writes it."""

    active: dict[PartitionKey, str] = Field(json_schema_extra=NO_OTHER_KEYS)
    standbys: dict[PartitionKey, list[str]] = Field(json_schema_extra=NO_OTHER_KEYS)
    instances: list[str] = Field(min_length=1)
    version: int = Field(ge=1, le=MAX_ID)
    lost: list[Annotated[int, Field(ge=0, le=999_999)]] = []


class AssignmentModel(BaseModel):
    assignment: AssignmentData
    urls: dict[str, str]


class AssignmentAnswer(BaseModel):
    instance: str
    version: int
    held: dict[str, str]


class AsciiJSONResponse(JSONResponse):
    """JSON with every non-ASCII character escaped: any text a client sent (even a lone
    surrogate) can be quoted back in an error."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, separators=(",", ":")).encode("ascii")


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= _SHOWN else f"{text[:_SHOWN]}... ({len(text)} characters)"


def _fail(status: int, error: str, message: str, headers: dict | None = None, **extra
          ) -> HTTPException:
    return HTTPException(status, {"error": error, "message": message, **extra}, headers=headers)


#: statekit's exceptions a query answers with an HTTP error (``_error``)
ANSWERED = (BadArgument, PositionNotReached, PartitionUnavailable, PartitionNotHeld,
            ResultTooLarge)


def _error(exc: Exception) -> HTTPException:
    """The HTTP error of a statekit exception."""
    if isinstance(exc, PositionNotReached):
        return _fail(409, "PositionNotReached", str(exc), partition=exc.partition,
                     wanted=exc.wanted, current=exc.current, instance=exc.instance)
    if isinstance(exc, PartitionUnavailable):
        return _fail(503, "PartitionUnavailable", str(exc), {"Retry-After": str(
            max(1, round(exc.retry_after)))}, partition=exc.partition,
            retry_after=exc.retry_after)
    if isinstance(exc, ResultTooLarge):
        return _fail(413, "ResultTooLarge", str(exc), kind=exc.kind, limit=exc.limit)
    if isinstance(exc, PartitionNotHeld):  # asking this instance again cannot help: 421
        return _fail(421, "PartitionNotHeld", str(exc), partition=exc.partition,
                     instance=exc.instance, owners=exc.owners)
    if isinstance(exc, BadArgument):
        return _fail(400, "BadArgument", str(exc))
    raise exc


def _json_response(result: QueryResult) -> Response:
    return Response(encode(result.to_dict()), media_type="application/json")


#: request headers that announce a body (such a request is never answered before it is read)
_WITH_BODY = frozenset({b"content-length", b"transfer-encoding", b"expect"})


def _arrow_response(result: TableResult) -> Response:
    return Response(result.to_ipc(), media_type=ARROW_STREAM)


def _bad_argument(call: Callable, *args, **kwargs):
    """``call(*args, **kwargs)``, its BadArgument a 400."""
    try:
        return call(*args, **kwargs)
    except BadArgument as exc:
        raise _error(exc) from None


def _time(value: str) -> int | str:
    """A time parameter: ASCII digits are milliseconds, anything else ISO text (checked later)."""
    return int(value) if _MILLIS.fullmatch(value) else value


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


def _partitions(value: str | None, instance: ServingInstance) -> list[int] | None:
    """The partitions asked (in the order given), each one of the store's, each once."""
    if value is None:
        return None
    parts = [int(p) for p in value.split(",")]
    bad = [p for p in parts if not 0 <= p < instance.schema.partitions]
    if bad:
        raise _fail(400, "BadArgument", f"bad partition: {bad[0]}; accepted: 0.."
                                        f"{instance.schema.partitions - 1}")
    if len(set(parts)) < len(parts):
        raise _fail(400, "BadArgument", f"bad partitions: {value!r}; accepted: each partition "
                                        f"at most once")
    return parts


def _partitions_schema(count: int) -> dict:
    """The OpenAPI parameter of ``_partitions``: a comma-separated list of distinct partitions
    (OpenAPI's form style, not exploded)."""
    return {"style": "form", "explode": False, "schema": {
        "type": "array", "items": {"type": "integer", "minimum": 0, "maximum": count - 1},
        "minItems": 1, "maxItems": count, "uniqueItems": True}}


#: Query parameters that are times (``time_schema``), and the ranges a query takes (the one
#: rule an OpenAPI schema cannot state: each range's first end may not come after its last)
TIMES = ("time_from", "time_to", "earliest_end", "latest_start")
_TIME_RANGE = ("time_from", "time_to", "")
RANGES = {"window": {"fetch": _TIME_RANGE, "fetch_all": _TIME_RANGE, "fetch_range": _TIME_RANGE},
          "key-value": {"range": ("key_from", "key_to", " in the store's key byte order")}}


def _tighten(schema: dict, instance: ServingInstance) -> dict:
    """``schema`` (FastAPI's OpenAPI) made as strict as the service: keys as JSON objects of
    the store's key columns and types, times and window starts as the grammar and grid the
    service checks, partitions within the store's range, and only the parameters and paths
    this store's kind takes. What no schema can say — a range's ends in order (``RANGES``) —
    each operation's description states, and the service answers 400 naming both ends."""
    codec, store = instance.codec, instance.tail.store_name
    for path, operations in schema["paths"].items():
        kind = path.rsplit("/", 1)[-1]
        for operation in operations.values():
            kept = []
            for param in operation.get("parameters", []):
                name = param["name"]
                if name == "enrich" and not instance.globals:
                    continue  # no global store to enrich with: the parameter is refused
                if name == "window_start" and kind == "top_k":
                    if instance.kind == "key-value":
                        continue  # a running aggregate has no windows
                    param.update(required=True, schema=codec.window_start_schema())
                elif name in ("key", "key_from", "key_to") and path.startswith("/stores/"):
                    param.pop("schema", None)
                    window = kind == "get" and instance.kind != "key-value"
                    param["content"] = {"application/json": {
                        "schema": codec.json_schema(window=window)}}
                elif name in TIMES:
                    param["schema"] = time_schema()
                elif name == "partitions":
                    param.update(_partitions_schema(instance.schema.partitions))
                kept.append(param)
            if "parameters" in operation:
                operation["parameters"] = kept
            ends = RANGES.get(instance.kind, {}).get(kind)
            if ends is not None and path.startswith("/stores/"):
                first, last, order = ends
                operation["description"] = (f"{operation.get('description', '')}\n\n{first} "
                                            f"no later than {last}{order}, else 400 naming "
                                            f"both.")
    schema["info"]["description"] += f" This instance serves {store!r}, a {instance.kind} store."
    return schema


def _check_assignment(assignment: Assignment, urls: dict[str, str],
                      instance: ServingInstance) -> None:
    """BadArgument unless ``assignment`` places each partition of the store once, names only
    its own instances, names ``instance``, and ``urls`` says where the others listen."""
    n = instance.schema.partitions
    placed = sorted([*assignment.active, *assignment.lost])
    if placed != list(range(n)):
        raise BadArgument("assignment partitions (active and lost)", placed,
                          f"each of 0..{n - 1} once")
    if instance.name not in assignment.instances:
        raise BadArgument("assignment instances", list(assignment.instances),
                          f"a list naming this instance, {instance.name!r}")
    if len(set(assignment.instances)) != len(assignment.instances):
        raise BadArgument("assignment instances", list(assignment.instances),
                          "distinct instance names")
    for p, replicas in assignment.standbys.items():
        if p not in assignment.active:
            raise BadArgument("assignment standbys partition", p,
                              f"an active partition ({sorted(assignment.active)})")
        if assignment.active[p] in replicas or len(set(replicas)) != len(replicas):
            raise BadArgument(f"assignment standbys of partition {p}", list(replicas),
                              f"distinct instances other than its active one "
                              f"({assignment.active[p]!r})")
    named = set(assignment.active.values()) | {i for r in assignment.standbys.values()
                                               for i in r}
    unknown = sorted(named - set(assignment.instances))
    if unknown:
        raise BadArgument("assignment owner", unknown[0],
                          f"one of its instances {list(assignment.instances)}")
    unplaced = [i for i in assignment.instances if i != instance.name and i not in urls]
    if unplaced:
        raise BadArgument("urls", urls, f"a URL for each other instance (none for "
                                        f"{unplaced[0]!r})")


class _Answered:
    """The cycle of a request the protocol answered itself: complete, nothing waits on it
    (what uvicorn's protocol reads of a request's cycle once its answer is sent)."""

    response_complete = True
    keep_alive = True
    disconnected = False

    class message_event:  # noqa: N801 - the attribute uvicorn's protocol sets on a close
        @staticmethod
        def set() -> None:
            pass


_ANSWERED = _Answered()


class StatekitHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, whose own refusals are JSON too: a request target longer
    than ``MAX_REQUEST_LINE`` (httptools reads any length; its URL parser stops at 64 KiB) is
    a 414 as statekit's own, and a request it cannot parse a 400 naming that.

    A plain lookup that is answered here at once with 200 (the app's ``state.answer_now``,
    see ``create_app``) is written as soon as its headers are read: no ASGI task, middleware
    or response object, the lookup's whole cost in the web stack halved. Anything else —
    another path or method, a body, a request behind another one, a wait, a forwarded key,
    every error — goes to the app, whose answers are the documented ones."""

    def on_headers_complete(self) -> None:
        answer_now = getattr(getattr(self.app, "state", None), "answer_now", None)
        if answer_now is not None and self.parser.get_method() == b"GET" and \
                (self.cycle is None or self.cycle.response_complete) and not self.pipeline \
                and self.parser.get_http_version() == "1.1" and \
                self.parser.should_keep_alive() and not self.parser.should_upgrade():
            body = answer_now(self.url, self.headers)
            if body is not None:
                head = [STATUS_LINE[200]]
                for name, value in self.server_state.default_headers:
                    head += [name, b": ", value, b"\r\n"]
                head += [b"content-length: %d\r\ncontent-type: application/json\r\n\r\n"
                         % len(body), body]
                self.transport.write(b"".join(head))
                self.cycle = _ANSWERED
                self.on_response_complete()
                return
        super().on_headers_complete()

    def on_url(self, url: bytes) -> None:
        super().on_url(url)
        if len(self.url) > MAX_REQUEST_LINE:
            raise ValueError("request target too long")  # ends the parse: send_400_response

    def send_400_response(self, msg: str) -> None:
        size = len(getattr(self, "url", b""))
        if size > MAX_URL:
            status, detail = 414, {"error": "URITooLong", "message": (
                f"bad URL: {size:,}{'+' if size > MAX_REQUEST_LINE else ''} bytes long; "
                f"accepted: at most {MAX_URL} bytes (path and query)")}
        else:
            status, detail = 400, {"error": "BadRequest", "message": (
                f"bad request: not HTTP/1.1 the server can read ({msg})")}
        body = json.dumps({"detail": detail}).encode("ascii")
        phrase = {400: b"Bad Request", 414: b"URI Too Long"}[status]
        self.transport.write(b"".join([
            b"HTTP/1.1 %d %s\r\n" % (status, phrase),
            b"content-type: application/json\r\n",
            b"content-length: %d\r\n" % len(body), b"connection: close\r\n\r\n", body]))
        self.transport.close()


#: How every statekit REST server runs uvicorn (``Server`` and the instance processes).
SERVER_OPTIONS = {"http": StatekitHttpProtocol, "h11_max_incomplete_event_size": MAX_REQUEST_LINE,
                  "log_level": "warning", "access_log": False, "lifespan": "off",
                  "proxy_headers": False}


async def _limit_url(request: Request) -> None:
    """414 for a URL longer than ``MAX_URL`` (checked once the path and method are known to
    be served, so that a path or method it does not have is still 404 or 405)."""
    scope = request.scope
    path = scope.get("raw_path") or scope["path"].encode("utf-8", "surrogateescape")
    query = scope.get("query_string", b"")
    size = len(path) + (len(query) + 1 if query else 0)
    if size > MAX_URL:
        raise _fail(414, "URITooLong", f"bad URL: {size} bytes long; accepted: at most "
                                       f"{MAX_URL} bytes (path and query)")


class _BodyLimit:
    """ASGI middleware: 413 for a body larger than ``MAX_BODY``, by its content-length or,
    when it is sent in chunks, as it arrives (read here, then handed on)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or [])
        length = headers.get(b"content-length")
        if length is not None:
            text = length.decode("latin-1")
            if not text.isascii() or not text.isdigit() or int(text) > MAX_BODY:
                return await _too_large(scope, receive, send, f"bad body: content-length "
                                        f"{text!r}; accepted: at most {MAX_BODY} bytes")
            return await self.app(scope, receive, send)
        if b"chunked" not in headers.get(b"transfer-encoding", b"").lower():
            return await self.app(scope, receive, send)
        chunks, total, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                return
            chunks.append(message.get("body", b""))
            total += len(chunks[-1])
            more = message.get("more_body", False)
            if total > MAX_BODY:
                return await _too_large(scope, receive, send, f"bad body: {total} bytes sent "
                                        f"in chunks so far; accepted: at most {MAX_BODY} bytes")
        body, replayed = b"".join(chunks), False

        async def replay():
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        return await self.app(scope, replay, send)


async def _too_large(scope, receive, send, message: str) -> None:
    """413 without reading the body (so the connection closes after it)."""
    response = AsciiJSONResponse({"detail": {"error": "RequestTooLarge", "message": message}},
                                 413, headers={"Connection": "close"})
    await response(scope, receive, send)


_PLAIN_BATCH = re.compile(r"[0-9]{1,16}")
_PLAIN_SECONDS = re.compile(r"[0-9]{1,2}(\.[0-9]{1,6})?")
_PLAIN_FLAGS = {"true": True, "false": False}
_PLAIN_QUERY_BYTES = 4096
#: plain lookups' query strings kept read and placed (``answer_now``): hot keys are asked again
PLACED_QUERIES = 4096


def plain_lookup(query_string: bytes) -> tuple[str, int | None, float, bool] | None:
    """``(key, min_batch, timeout, local)`` of a lookup's query string when every parameter is
    of the plain form clients send (each at most once, a key of at most 4,096 bytes, digits,
    ``true``/``false``) and within the route's bounds; None for anything else, which the
    framework's route then validates and answers (its errors are the documented ones).

    The query string is split as Starlette splits it (``parse_qsl``), so the key is the same.

    Example:
        >>> plain_lookup(b"key=%7B%22player%22%3A%22p1%22%7D&min_batch=4&timeout=2.5")
        ('{"player":"p1"}', 4, 2.5, False)
        >>> plain_lookup(b"key=x&local=yes") is None     # pydantic's forms: the route's job
        True
    """
    if len(query_string) > _PLAIN_QUERY_BYTES:
        return None
    pairs = parse_qsl(query_string.decode("latin-1"), keep_blank_values=True)
    found = dict(pairs)
    if len(found) != len(pairs) or "key" not in found or \
            not found.keys() <= {"key", "min_batch", "timeout", "local"}:
        return None
    batch, seconds, flag = found.get("min_batch"), found.get("timeout"), found.get("local")
    if batch is not None and (not _PLAIN_BATCH.fullmatch(batch) or int(batch) > MAX_ID):
        return None
    if seconds is not None and (not _PLAIN_SECONDS.fullmatch(seconds) or
                                float(seconds) > MAX_WAIT):
        return None
    if flag is not None and flag not in _PLAIN_FLAGS:
        return None
    return (found["key"], None if batch is None else int(batch),
            0.0 if seconds is None else float(seconds), _PLAIN_FLAGS.get(flag, False))


class _FastLookup:
    """ASGI middleware: a plain ``GET /stores/<store>/get`` (see ``plain_lookup``) answered
    by ``lookup`` without the framework's routing and parameter solving, the hot path of
    serving (a profile under 200 lookups in flight: the store read 2% of the process, the
    web stack most of the rest, and every request, ``/health`` included, queues behind a
    pass over the lookups in flight). Anything else goes on to the framework's route, the
    one that documents and validates the parameters; the answers are the same
    (``tests/serve/test_serving_hardened.py`` compares them)."""

    def __init__(self, app, path: str, lookup: Callable):
        self.app, self.path, self.lookup = app, path, lookup

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["method"] == "GET" and \
                scope["path"] == self.path:
            plain = plain_lookup(scope.get("query_string", b""))
            if plain is not None:
                try:
                    response = await self.lookup(*plain)
                except Exception as exc:  # noqa: BLE001 - the app's handlers, as the route's
                    response = await _handled(scope, exc)
                return await response(scope, receive, send)
        return await self.app(scope, receive, send)


async def _handled(scope, exc: Exception) -> Response:
    """The answer the app's exception handler for ``exc`` gives (the first of its classes
    with one, ``Exception`` apart: that one is the outermost middleware's, so ``exc`` is
    raised on to it)."""
    handlers = scope["app"].exception_handlers
    for kind in type(exc).__mro__:
        if kind is Exception:
            break
        if kind in handlers:
            answer = handlers[kind](Request(scope), exc)
            return await answer if inspect.isawaitable(answer) else answer
    raise exc


def _problem(error: dict) -> str:
    """One validation problem as text: the parameter, the value, and what is accepted."""
    loc = [str(part) for part in error.get("loc", ())]
    where = loc[0] if loc else "request"
    name = ".".join(loc[1:]) or where
    if error.get("type") == "missing":
        return f"missing {where} parameter {name!r}: {error.get('msg', '')}" if \
            len(loc) > 1 else f"missing {where}: {error.get('msg', '')}"
    if error.get("type") == "json_invalid":
        return f"bad body: not JSON ({error.get('ctx', {}).get('error', '')})"
    return f"bad {name}: {_shown(error.get('input'))}; accepted: {error.get('msg', '')}"


def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    """422 with the first problem in the message (the value named) and all in ``errors``."""
    errors = list(exc.errors())
    more = f" (and {len(errors) - 1} more: see errors)" if len(errors) > 1 else ""
    listed = [{"loc": [p if isinstance(p, int) else str(p) for p in error.get("loc", ())],
               "type": str(error.get("type", "")), "msg": str(error.get("msg", "")),
               "input": _shown(error.get("input"))} for error in errors]
    return AsciiJSONResponse({"detail": {"error": "BadRequest", "message": (
        _problem(errors[0]) + more if errors else "bad request"), "errors": listed}}, 422)


def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    """Errors as ``{"detail": {"error", "message", ...}}``, FastAPI's own (404, 405) too."""
    if isinstance(exc.detail, dict):
        detail = exc.detail
    elif exc.status_code == 404:
        detail = {"error": "NotFound", "message": f"bad path: {request.url.path!r}; accepted: "
                                                  f"the paths of /openapi.json"}
    elif exc.status_code == 405:
        detail = {"error": "MethodNotAllowed", "message": f"bad method: {request.method} "
                  f"{request.url.path}; accepted: {(exc.headers or {}).get('Allow', '')}"}
    else:
        detail = {"error": type(exc).__name__, "message": str(exc.detail)}
    return AsciiJSONResponse({"detail": detail}, exc.status_code, headers=exc.headers)


def _server_error(request: Request, exc: Exception) -> JSONResponse:
    return AsciiJSONResponse({"detail": {"error": "InternalError", "message": (
        f"{type(exc).__name__}: {exc} (a bug in statekit: please report it with the request "
        f"{request.method} {request.url.path})")}}, 500)


def _responses(*statuses: int) -> dict:
    """The OpenAPI entries of the errors a route answers."""
    said = {400: "a bad key, time or parameter (the value named)",
            404: "no such store here", 409: "the store has not reached min_batch (the batch it "
                                            "has is given)",
            413: "a result larger than limit, or a body larger than the service takes",
            414: "a URL longer than the service takes",
            422: "a parameter or body of the wrong shape (each problem in errors)",
            421: "this instance does not hold the key's partition (local=true): ask one of "
                 "the owners named",
            503: "no live instance holds a partition (retry after Retry-After seconds)"}
    out: dict[int | str, dict] = {}
    for status in statuses:
        out[status] = {"model": ErrorModel, "description": said[status]}
    if 503 in out:
        out[503]["headers"] = {"Retry-After": {"description": "seconds to wait",
                                               "schema": {"type": "string"}}}
    return out


QUERY_ERRORS = _responses(400, 404, 409, 413, 414, 421, 422, 503)


def _control_routes(app: FastAPI, instance: ServingInstance, client: ServingClient,
                    on_assignment: Callable[[Assignment], None] | None,
                    control: CapacityLimiter, control_url: str | None) -> None:
    """``/health``, ``/metadata`` and ``POST /assignment`` of ``instance`` on ``app`` (the
    data listener's app, or the control listener's)."""

    @app.get("/health", responses=_responses(414))
    async def health() -> HealthModel:  # on the event loop: nothing here waits
        return HealthModel(status="ok", instance=instance.name)

    @app.get("/metadata", response_model=dict[str, Any], responses=_responses(414))
    async def metadata() -> JSONResponse:  # on the event loop: statuses are read lock-free
        """This instance (its process id and start time), the assignment, and every held
        partition's state and batch."""
        # plain JSON values: written as they are, not walked again by the framework's encoder
        known = {**instance.metadata(), "urls": client.urls}
        if control_url is not None:
            known["control_url"] = control_url
        return JSONResponse(known)

    @app.post("/assignment", responses=_responses(400, 413, 414, 422))
    async def set_assignment(body: AssignmentModel) -> AssignmentAnswer:
        """Take a new assignment (sent by the cluster after an instance died)."""
        try:
            assignment = Assignment.from_dict(body.assignment.model_dump())
            _check_assignment(assignment, body.urls, instance)
        except BadArgument as exc:
            raise _error(exc) from None

        def take() -> AssignmentAnswer:
            instance.set_assignment(assignment)
            client.set_assignment(assignment, body.urls)
            if on_assignment is not None:
                on_assignment(assignment)
            return AssignmentAnswer(instance=instance.name, version=assignment.version,
                                    held={str(p): r for p, r in instance.roles.items()})

        if set(assignment.held_by(instance.name)) == set(instance.roles) and \
                on_assignment is None:
            return take()  # no partition comes or goes: nothing to restore or close
        return await to_thread.run_sync(take, limiter=control)


def _bare_app(title: str, description: str, fast_lookup: dict | None = None) -> FastAPI:
    """A FastAPI app with the service's limits and JSON errors (no routes yet);
    ``fast_lookup``: the options of the plain lookup's own path (``_FastLookup``), inside
    the body limit."""
    app = FastAPI(title=title, version="1", description=description,
                  dependencies=[Depends(_limit_url)])
    if fast_lookup is not None:
        app.add_middleware(_FastLookup, **fast_lookup)
    app.add_middleware(_BodyLimit)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _server_error)
    return app


def create_control_app(instance: ServingInstance, client: ServingClient | None = None,
                       on_assignment: Callable[[Assignment], None] | None = None,
                       control_url: str | None = None) -> FastAPI:
    """The control listener's app of ``instance``: ``/health``, ``/metadata`` and
    ``POST /assignment`` only, answered on a port (and an event loop) of their own, so
    they are not queued behind the queries in flight on the data listener.

    Example:
        >>> control = Server(create_control_app(instance, client)).start()  # doctest: +SKIP
        >>> httpx.get(f"{control.url}/health").json()                      # doctest: +SKIP
        {'status': 'ok', 'instance': 'i0'}
    """
    client = client or ServingClient({instance.name: ""}, local=instance)
    app = _bare_app(f"statekit serving instance {instance.name}: control listener",
                    "Health, metadata and assignments of a serving instance, on a "
                    "listener of their own (the queries are on the data listener).")
    install(app, ErrorModel)
    _control_routes(app, instance, client, on_assignment, CapacityLimiter(CONTROL_THREADS),
                    control_url)
    return app


def create_app(instance: ServingInstance, client: ServingClient | None = None,
               on_assignment: Callable[[Assignment], None] | None = None,
               control_url: str | None = None) -> FastAPI:
    """The FastAPI app of ``instance``; ``client`` routes what it does not hold itself.
    ``control_url``: the instance's control listener (``create_control_app``), shown in
    ``/metadata``."""
    client = client or ServingClient({instance.name: ""}, local=instance)
    app = _bare_app(f"statekit serving instance {instance.name}",
                    "Interactive queries over the state of a Spark streaming "
                    "aggregation, kept current from its Kafka changelog.",
                    {"path": f"/stores/{instance.tail.store_name}/get",
                     "lookup": lambda *plain: lookup(*plain)})  # lookup: defined below

    def openapi() -> dict:
        """The schema FastAPI makes from the routes, made as strict as the service."""
        if app.openapi_schema is None:
            app.openapi_schema = _tighten(FastAPI.openapi(app), instance)
        return app.openapi_schema

    app.openapi = openapi
    # the token check (armed by the Server that binds the app): it documents the security
    # schemes on top of the strict schema above
    install(app, ErrorModel)
    store = instance.tail.store_name
    codec = instance.codec
    values = list(instance.schema.shape.value_columns)
    globals_held = sorted(instance.globals)
    served = QUERIES[instance.kind]
    # threads of their own: queries never wait behind /metadata or POST /assignment, nor those
    # behind queries (a wait holds no thread at all: see answer())
    queries, control = CapacityLimiter(QUERY_THREADS), CapacityLimiter(CONTROL_THREADS)
    remote = _RemoteWaits(client)
    rows_text = RowsText(instance)  # /all's rows as text, per partition and position

    def check_store(name: str) -> None:
        if name != store:
            raise _fail(404, "UnknownStore", f"no store {name!r} here; stores: {store}")

    def run(kind: str, params: dict, partitions: list[int] | None, local: bool,
            partial: bool = False, limit: int | None = None) -> QueryResult | TableResult:
        """The query's answer, here (``local``, or a key this instance owns) or routed;
        statekit's errors raised as they are."""
        if not local and not (kind == "get" and owns(params["key"])):
            return route(kind, params, partial)
        # scans read limit + 1 rows a partition: a longer answer is refused
        result = call_local(instance, kind, params, partitions)
        if limit is not None and len(result.rows) > limit:
            raise ResultTooLarge(kind, limit)
        return result

    async def answer(kind: str, params: dict, partitions: list[int] | None = None,
                     local: bool = False, partial: bool = False, limit: int | None = None,
                     *, inline: bool = False, respond: Callable = _json_response
                     ) -> Response:
        """``respond(run(...))`` asked without waiting, again each time a partition it needs
        moves on, until ``params["timeout"]``: a wait for ``min_batch`` is a coroutine
        awaiting that partition's progress (here, or ``position`` on the instance that
        answered), holding no thread. ``inline``: on the event loop (a lookup here:
        microseconds), else in one of the query threads, the answer's body written there
        too (a large one would hold the event loop for milliseconds)."""
        def ask() -> Response:
            return respond(run(kind, {**params, "timeout": 0.0}, partitions, local, partial,
                               limit))

        deadline = time.monotonic() + (params.get("timeout") or 0.0)
        while True:
            try:
                return ask() if inline else await to_thread.run_sync(ask, limiter=queries)
            except PositionNotReached as exc:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise _error(exc) from None
                if exc.instance in ("", instance.name):
                    waited = await instance.wait_for_batch_async(exc.partition, exc.wanted,
                                                                 remaining)
                else:
                    waited = await remote.wait(exc.instance, exc.partition, exc.wanted,
                                               remaining)
                if not waited:  # (not held there, or no answer): asked again, not at once
                    await asyncio.sleep(min(remaining, 0.05))
            except ANSWERED as exc:
                raise _error(exc) from None

    def route(kind: str, params: dict, partial: bool) -> QueryResult | TableResult:
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

    def key_of(text: str | None, what: str, window: bool) -> dict | None:
        """A key parameter: a JSON object of the group keys (and, ``window``, window_start)."""
        return None if text is None else _bad_argument(codec.parse, text, what, window=window)

    def owns(key: object) -> bool:
        """True when this instance is the active owner of ``key``'s partition (a bad key:
        True too, so that the lookup here names what is wrong with it)."""
        try:
            return active_here(codec.locate(key)[0])
        except BadArgument:
            return True

    def active_here(partition: int) -> bool:
        return instance.role(partition) == "active"

    key_doc = ('the key as a JSON object, e.g. {"player": "p07", '
               '"window_start": "2026-01-05T10:00Z"}')
    time_doc = "milliseconds since the epoch or ISO-8601 text"

    # one Query object per parameter: FastAPI binds each to the first parameter it meets
    def Store():  # noqa: N802
        return Path(description=f"the store (here: {store}; any other name is 404)",
                    json_schema_extra={"enum": [store]})

    def MinBatch():  # noqa: N802
        return Query(None, ge=0, le=MAX_ID,
                     description="answer only once the store reflects at least this batch")

    def Wait():  # noqa: N802
        return Query(0.0, ge=0.0, le=MAX_WAIT, description=(
            "seconds to wait for min_batch (the wait holds no thread: any number may wait)"))

    def Local():  # noqa: N802
        return Query(False, description="answer from this instance's partitions only "
                                        "(routers)")

    def Parts():  # noqa: N802
        return Query(None, pattern=PARTITIONS, max_length=4096,
                     description="comma-separated partitions to read (with local=true; a "
                                 "routed query reads every partition it needs)")

    def Partial():  # noqa: N802
        return Query(False, description="answer without partitions no live instance holds "
                                        "(listed in missing) instead of failing")

    def Limit():  # noqa: N802
        return Query(DEFAULT_LIMIT, ge=1, le=MAX_LIMIT, description="most rows in the answer")

    def Time():  # noqa: N802
        return Query(..., max_length=64, description=time_doc,
                     examples=["2026-01-05T10:00:00Z", "1767607200000"])

    def Key(required: bool = True):  # noqa: N802
        return Query(... if required else None, max_length=MAX_KEY_CHARS, description=key_doc)

    def listed(kind: str) -> dict:
        """A query route's settings: in the schema only when this store answers it."""
        return {"response_model": ResultModel, "responses": QUERY_ERRORS,
                "include_in_schema": kind in served}

    _control_routes(app, instance, client, on_assignment, control, control_url)

    async def lookup(key: str, min_batch: int | None, timeout: float, local: bool
                     ) -> Response:
        found = key_of(key, "key", instance.kind != "key-value")
        params = {"key": found, "min_batch": min_batch, "timeout": timeout}
        # a lookup here takes microseconds: answered on the event loop
        return await answer("get", params, None, local, inline=local or owns(found))

    lookup_path = f"/stores/{store}/get".encode()
    placed: dict[bytes, tuple] = {}  # a plain lookup's query -> (located key, min_batch, local)

    def answer_now(url: bytes, headers: list[tuple[bytes, bytes]]) -> bytes | None:
        """The body of a plain lookup of ``url`` answered here at once with 200 (see
        ``StatekitHttpProtocol``), else None: the app then answers it."""
        path, _, query = url.partition(b"?")
        if path != lookup_path or any(name in _WITH_BODY for name, _ in headers):
            return None
        security = app.state.security
        if security is not None and security.token is not None:
            refused, less_token = refusal(security.token, {"headers": headers,
                                                           "query_string": query})
            if refused is not None:
                return None
            query = query if less_token is None else less_token
        asked = placed.get(query)
        if asked is None:  # read and placed once per query string (a pure function of it)
            plain = plain_lookup(query)
            if plain is None:
                return None
            text, min_batch, _, local = plain
            try:
                located = codec.locate(codec.parse(text, window=instance.kind != "key-value"))
            except Exception:  # noqa: BLE001 - a bad key is the app's to name
                return None
            if len(placed) >= PLACED_QUERIES:
                del placed[next(iter(placed))]  # the oldest out
            placed[query] = asked = located, min_batch, local
        located, min_batch, local = asked
        try:
            if not local and not active_here(located[0]):
                return None  # forwarded: the app awaits the owner
            return encode(instance.get_located(located, min_batch=min_batch).to_dict())
        except Exception:  # noqa: BLE001 - waits and errors are the app's to answer
            return None

    app.state.answer_now = answer_now

    @app.get("/stores/{name}/get", **listed("get"))
    async def get(name: str = Store(), key: str = Key(), min_batch: int | None = MinBatch(),
                  timeout: float = Wait(), local: bool = Local()):
        """One state row by its full key (group keys and window_start)."""
        check_store(name)
        return await lookup(key, min_batch, timeout, local)

    @app.get("/stores/{name}/fetch", **listed("fetch"))
    async def fetch(name: str = Store(), key: str = Key(), time_from: str = Time(),
                    time_to: str = Time(), min_batch: int | None = MinBatch(),
                    timeout: float = Wait(), partitions: str | None = Parts(),
                    local: bool = Local()):
        """A key's windows starting in [time_from, time_to], in time order."""
        check_store(name)
        params = {"key": key_of(key, "key", False), "time_from": _time(time_from),
                  "time_to": _time(time_to), "min_batch": min_batch, "timeout": timeout}
        return await answer("fetch", params, _partitions(partitions, instance), local)

    @app.get("/stores/{name}/find_sessions", **listed("find_sessions"))
    async def find_sessions(name: str = Store(), key: str = Key(),
                            earliest_end: str = Time(), latest_start: str = Time(),
                            min_batch: int | None = MinBatch(), timeout: float = Wait(),
                            partitions: str | None = Parts(), local: bool = Local()):
        """A key's sessions ending at or after earliest_end and starting at or before
        latest_start (session stores)."""
        check_store(name)
        if "find_sessions" not in served:  # before routing: a window's key has no partition
            raise _error(BadArgument("query", "find_sessions", f"the queries of a "
                                     f"{instance.kind} store: {', '.join(served)}"))
        params = {"key": key_of(key, "key", False), "earliest_end": _time(earliest_end),
                  "latest_start": _time(latest_start), "min_batch": min_batch,
                  "timeout": timeout}
        return await answer("find_sessions", params, _partitions(partitions, instance),
                            local)

    @app.get("/stores/{name}/all", **listed("all"))
    async def all_rows(name: str = Store(), limit: int = Limit(),
                       min_batch: int | None = MinBatch(), timeout: float = Wait(),
                       partitions: str | None = Parts(), local: bool = Local(),
                       partial: bool = Partial()):
        """Every state row, gathered from every partition."""
        check_store(name)
        parts = _partitions(partitions, instance)
        # partitions narrow a local ask only: a routed one reads every partition it needs
        plain = rows_text.plain(parts if local else None, not local, min_batch)
        if plain is not None:  # made once per store position, then joined on the event loop
            try:
                body = rows_text.body(plain, limit, made_only=True) or await \
                    to_thread.run_sync(lambda: rows_text.body(plain, limit, made_only=False),
                                       limiter=queries)
            except ANSWERED as exc:
                raise _error(exc) from None
            if body is not None:
                return Response(body, media_type="application/json")
        params = {"limit": limit, "min_batch": min_batch, "timeout": timeout}
        return await answer("all", params, parts, local, partial, limit)

    @app.get("/stores/{name}/fetch_all", **listed("fetch_all"))
    async def fetch_all(name: str = Store(), time_from: str = Time(),
                        time_to: str = Time(), limit: int = Limit(),
                        min_batch: int | None = MinBatch(), timeout: float = Wait(),
                        partitions: str | None = Parts(), local: bool = Local(),
                        partial: bool = Partial()):
        """Every window starting in [time_from, time_to]."""
        check_store(name)
        params = {"time_from": _time(time_from), "time_to": _time(time_to), "limit": limit,
                  "min_batch": min_batch, "timeout": timeout}
        return await answer("fetch_all", params, _partitions(partitions, instance), local,
                            partial, limit)

    @app.get("/stores/{name}/fetch_range", **listed("fetch_range"))
    async def fetch_range(name: str = Store(), time_from: str = Time(),
                          time_to: str = Time(), key_from: str | None = Key(required=False),
                          key_to: str | None = Key(required=False), limit: int = Limit(),
                          min_batch: int | None = MinBatch(), timeout: float = Wait(),
                          partitions: str | None = Parts(), local: bool = Local(),
                          partial: bool = Partial()):
        """Windows of the keys from key_from to key_to (store byte order) in time."""
        check_store(name)
        params = {"key_from": key_of(key_from, "key_from", False),
                  "key_to": key_of(key_to, "key_to", False), "time_from": _time(time_from),
                  "time_to": _time(time_to), "limit": limit, "min_batch": min_batch,
                  "timeout": timeout}
        return await answer("fetch_range", params, _partitions(partitions, instance),
                            local, partial, limit)

    @app.get("/stores/{name}/range", **listed("range"))
    async def key_range(name: str = Store(), key_from: str | None = Key(required=False),
                        key_to: str | None = Key(required=False), limit: int = Limit(),
                        min_batch: int | None = MinBatch(), timeout: float = Wait(),
                        partitions: str | None = Parts(), local: bool = Local(),
                        partial: bool = Partial()):
        """Keys from key_from to key_to (store byte order) of a key-value store (a running
        aggregate)."""
        check_store(name)
        params = {"key_from": key_of(key_from, "key_from", False),
                  "key_to": key_of(key_to, "key_to", False), "limit": limit,
                  "min_batch": min_batch, "timeout": timeout}
        return await answer("range", params, _partitions(partitions, instance), local,
                            partial, limit)

    @app.get("/stores/{name}/top_k", **listed("top_k"))
    async def top_k(name: str = Store(),
                    window_start: str | None = Query(None, max_length=64, description=(
                        "the window (milliseconds since the epoch or ISO-8601 text); left out "
                        "for a running aggregate, which has no windows"),
                        examples=["2026-01-05T10:00:00Z"]),
                    k: int = Query(10, ge=1, le=MAX_LIMIT),
                    by: str = Query(..., max_length=256, json_schema_extra={"enum": values},
                                    description=f"the value column to rank by "
                                                f"({', '.join(values)})"),
                    min_batch: int | None = MinBatch(), timeout: float = Wait(),
                    partitions: str | None = Parts(), local: bool = Local(),
                    partial: bool = Partial(),
                    enrich: str | None = Query(None, max_length=256, json_schema_extra={
                        "enum": globals_held or ["(none)"]}, description=(
                        "a global store whose entries' columns are added to each row"))):
        """The leaderboard: the k rows of one window with the largest ``by``."""
        check_store(name)
        if enrich is not None and enrich not in instance.globals:
            raise _fail(400, "BadArgument", f"bad global store: {enrich!r}; accepted: "
                                            f"{', '.join(globals_held) or '(none held)'}")
        params = {"window_start": None if window_start is None else _time(window_start),
                  "k": k, "by": by, "min_batch": min_batch, "timeout": timeout,
                  "enrich": enrich}
        return await answer("top_k", params, _partitions(partitions, instance), local,
                            partial)

    @app.get("/stores/{name}/table", response_class=Response, responses={
        200: {"content": {ARROW_STREAM: {"schema": {"type": "string", "format": "binary"}}},
              "description": "an Arrow IPC stream: one row per state row, a partition "
                             "column first; the per-partition report in the schema "
                             "metadata (statekit.partitions)"},
        **QUERY_ERRORS})
    async def table(name: str = Store(), min_batch: int | None = MinBatch(),
                    timeout: float = Wait(), partitions: str | None = Parts(),
                    local: bool = Local(), partial: bool = Partial()):
        """The whole state, columnar (Arrow IPC), with no row limit: the bulk read."""
        check_store(name)
        return await answer("table", {"min_batch": min_batch, "timeout": timeout},
                            _partitions(partitions, instance), local, partial,
                            respond=_arrow_response)

    @app.get("/stores/{name}/approximate_num_entries", **listed("approximate_num_entries"))
    async def approximate_num_entries(name: str = Store(), partitions: str | None = Parts(),
                                      local: bool = Local(), partial: bool = Partial()):
        """About how many state rows each partition holds (RocksDB's estimate; a small
        store, or one whose estimate is below what it surely holds, is counted)."""
        check_store(name)
        return await answer("approximate_num_entries", {},
                            _partitions(partitions, instance), local, partial)

    @app.get("/stores/{name}/position", **listed("position"))
    async def position(name: str = Store(), min_batch: int | None = MinBatch(),
                       timeout: float = Wait(), partitions: str | None = Parts(),
                       local: bool = Local(), partial: bool = Partial()):
        """The batch each partition reflects, once it reaches min_batch: a wait for the
        store to catch up (rows: partition, batch), without reading it."""
        check_store(name)
        return await answer("position", {"min_batch": min_batch, "timeout": timeout},
                            _partitions(partitions, instance), local, partial,
                            inline=local)

    @app.get("/global/{name}/get", response_model=ResultModel, responses=QUERY_ERRORS,
             include_in_schema=bool(globals_held))
    async def global_get(name: str = Path(description="a global store held here",
                                          json_schema_extra={"enum": globals_held or
                                                             ["(none)"]}),
                         key: str = Query(..., max_length=MAX_KEY_CHARS, description=(
                             "the key: a JSON object of the global store's key columns, or "
                             "the plain key (p07)"))):
        """One row of a global store: every instance holds all of it, so it answers here."""
        if name not in instance.globals:
            raise _fail(404, "UnknownStore", f"no global store {name!r} here; global stores: "
                                             f"{', '.join(globals_held) or '(none)'}")
        _bad_argument(check_key_text, key)  # bounded: never too deep for json.loads
        try:
            value = json.loads(key)
        except ValueError:
            value = key  # a plain key
        if not isinstance(value, dict | str):
            value = key
        return JSONResponse(_bad_argument(instance.global_get, name, value).to_dict())

    return app


def check_host(host: str, allow_remote: bool) -> str:
    """``host`` when it is a loopback address, or when remote serving is asked for."""
    if not is_loopback(host) and not allow_remote:
        raise BadArgument("host", host, "a loopback address such as 127.0.0.1 (pass "
                                        "allow_remote=True to listen on other interfaces)")
    return host


class Server:
    """A uvicorn server for ``app``: on a background thread (``start``, ``stop``) or in the
    foreground (``run``).

    Bound beyond loopback (``allow_remote=True``) it answers only calls with the token:
    ``security.token``, or one generated and printed with the URL at ``start``. With
    ``security.certfile`` / ``keyfile`` it serves HTTPS. ``url`` is the URL to use from
    this machine; ``security`` what it checks.

    Example:
        >>> server = Server(app, "0.0.0.0", allow_remote=True).start()  # doctest: +SKIP
        statekit serving on http://127.0.0.1:8123 needs its token (generated): ...
    """

    def __init__(self, app: FastAPI, host: str = "127.0.0.1", port: int = 0, *,
                 allow_remote: bool = False, security: ServingSecurity | None = None):
        import uvicorn

        from statekit.kafka.broker import free_port

        self.host = check_host(host, allow_remote)
        self.port = port or free_port(self.host)
        self.security, self._generated = settle(self.host, security)
        arm(app, self.security)
        config = uvicorn.Config(app, host=self.host, port=self.port, **SERVER_OPTIONS,
                                **self.security.uvicorn_options())
        self._server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return self.security.url(self.host, self.port)

    def start(self, timeout: float = 30.0) -> Server:
        self._thread = threading.Thread(target=self._server.run, name=f"rest-{self.port}",
                                        daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the REST server on {self.url} did not start")
            time.sleep(0.01)
        if self._generated:
            announce(self.url, self.security)
        return self

    def run(self) -> None:
        """Serve in this thread until the process is told to stop (SIGTERM, SIGINT)."""
        if self._generated:
            announce(self.url, self.security)
        self._server.run()

    def stop(self) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(10)
