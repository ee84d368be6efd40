"""The REST service's limits on requests: a URL longer than ``MAX_URL`` (``limit_url``, a
dependency of every route), a body larger than ``MAX_BODY`` or nested deeper than
``MAX_BODY_DEPTH`` (``BodyLimit``, ASGI middleware) are refused with JSON errors.

Example:
    >>> from fastapi import Depends, FastAPI
    >>> app = FastAPI(dependencies=[Depends(limit_url)])
    >>> app.add_middleware(BodyLimit)
"""

from __future__ import annotations

from fastapi import Request

from statekit.serve.rest.http_errors import AsciiJSONResponse, fail
from statekit.serve.rest.limits import MAX_BODY, MAX_BODY_DEPTH, MAX_URL
from statekit.serve.routing.key_text import nesting_depth


async def limit_url(request: Request) -> None:
    """414 for a URL longer than ``MAX_URL`` (checked once the path and method are known to
    be served, so that a path or method it does not have is still 404 or 405)."""
    scope = request.scope
    path = scope.get("raw_path") or scope["path"].encode("utf-8", "surrogateescape")
    query = scope.get("query_string", b"")
    size = len(path) + (len(query) + 1 if query else 0)
    if size > MAX_URL:
        raise fail(414, "URITooLong", f"bad URL: {size} bytes long; accepted: at most "
                                      f"{MAX_URL} bytes (path and query)")


class BodyLimit:
    """ASGI middleware: 413 for a body larger than ``MAX_BODY``, by its content-length or,
    when it is sent in chunks, as it arrives; 422 for one nested deeper than
    ``MAX_BODY_DEPTH`` (read here, then handed on: the framework's JSON parser never meets
    it)."""

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
            if int(text) == 0:
                return await self.app(scope, receive, send)
        elif b"chunked" not in headers.get(b"transfer-encoding", b"").lower():
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
        depth = nesting_depth(body.decode("latin-1"))  # brackets and quotes are ASCII
        if depth > MAX_BODY_DEPTH:
            response = AsciiJSONResponse({"detail": {"error": "BadRequest", "message": (
                f"bad body: JSON nested {depth:,} deep; accepted: JSON nested at most "
                f"{MAX_BODY_DEPTH} deep, the body /openapi.json documents for "
                f"{scope['method']} {scope['path']}")}}, 422)
            return await response(scope, receive, send)

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

