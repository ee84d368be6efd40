"""The hot path of serving: a plain lookup answered without the framework's routing and
parameter solving, as its route would answer it.

``plain_lookup`` reads a lookup's query string when it is in the plain form clients send;
``AnswerNow`` answers such a lookup of a key held here from the protocol itself (see
``protocol.StatekitHttpProtocol``), and ``FastLookup`` (ASGI middleware) any other plain
lookup, before the framework. Anything else goes to the route, whose answers are the same.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl

from fastapi import Request
from fastapi.responses import Response

from statekit.serve.auth import refusal
from statekit.serve.rest.limits import MAX_ID, MAX_WAIT
from statekit.serve.rows_text import encode

if TYPE_CHECKING:
    from statekit.serve.rest.store_queries import StoreQueries

#: request headers that announce a body (such a request is never answered before it is read)
_WITH_BODY = frozenset({b"content-length", b"transfer-encoding", b"expect"})

_PLAIN_BATCH = re.compile(r"[0-9]{1,16}")
_PLAIN_SECONDS = re.compile(r"[0-9]{1,2}(\.[0-9]{1,6})?")
_PLAIN_FLAGS = {"true": True, "false": False}
_PLAIN_QUERY_BYTES = 4096
#: plain lookups' query strings kept read and placed (``AnswerNow``): hot keys are asked again
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


class FastLookup:
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


class AnswerNow:
    """The body of a plain lookup of ``url`` answered here at once with 200 (see
    ``StatekitHttpProtocol``), else None: the app then answers it.

    A plain lookup's query string is read and its key placed once (``PLACED_QUERIES`` kept,
    the oldest out first); whether this instance owns the key is asked every time.
    ``state``: the app's state (``state.security``: the token to check, once armed)."""

    def __init__(self, queries: StoreQueries, state):
        self.queries, self.state = queries, state
        self.instance, self.codec = queries.instance, queries.codec
        self.path = f"/stores/{queries.store}/get".encode()
        self.placed: dict[bytes, tuple] = {}  # a query -> (located key, min_batch, local)

    def __call__(self, url: bytes, headers: list[tuple[bytes, bytes]]) -> bytes | None:
        path, _, query = url.partition(b"?")
        if path != self.path or any(name in _WITH_BODY for name, _ in headers):
            return None
        security = self.state.security
        if security is not None and security.token is not None:
            refused, less_token = refusal(security.token, {"headers": headers,
                                                           "query_string": query})
            if refused is not None:
                return None
            query = query if less_token is None else less_token
        instance, codec, placed = self.instance, self.codec, self.placed
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
            if not local and not self.queries.active_here(located[0]):
                return None  # forwarded: the app awaits the owner
            return encode(instance.get_located(located, min_batch=min_batch).to_dict())
        except Exception:  # noqa: BLE001 - waits and errors are the app's to answer
            return None
