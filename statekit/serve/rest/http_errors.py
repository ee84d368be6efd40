"""The REST service's errors: every one JSON ``{"detail": {"error": ..., "message": ...}}``
naming the bad value and what would be accepted, and each route's documented errors.

Example:
    >>> as_http_error(BadArgument("k", 0, "1..100")).detail
    {'error': 'BadArgument', 'message': 'bad k: 0; accepted: 1..100'}
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from fastapi import HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from statekit.errors import (
    BadArgument,
    PartitionNotHeld,
    PartitionUnavailable,
    PositionNotReached,
    ResultTooLarge,
)
from statekit.serve.rest.models import ErrorModel

_SHOWN = 300                 # characters of a bad value an error message shows


class AsciiJSONResponse(JSONResponse):
    """JSON with every non-ASCII character escaped: any text a client sent (even a lone
    surrogate) can be quoted back in an error."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, separators=(",", ":")).encode("ascii")


def shown(value: object) -> str:
    """``repr(value)``, cut to ``_SHOWN`` characters (an error message quotes it)."""
    text = repr(value)
    return text if len(text) <= _SHOWN else f"{text[:_SHOWN]}... ({len(text)} characters)"


def fail(status: int, error: str, message: str, headers: dict | None = None, **extra
         ) -> HTTPException:
    """The HTTPException of a JSON error: ``error`` (its name), ``message`` and ``extra``."""
    return HTTPException(status, {"error": error, "message": message, **extra}, headers=headers)


#: statekit's exceptions a query answers with an HTTP error (``as_http_error``)
ANSWERED = (BadArgument, PositionNotReached, PartitionUnavailable, PartitionNotHeld,
            ResultTooLarge)


def as_http_error(exc: Exception) -> HTTPException:
    """The HTTP error of a statekit exception."""
    if isinstance(exc, PositionNotReached):
        return fail(409, "PositionNotReached", str(exc), partition=exc.partition,
                    wanted=exc.wanted, current=exc.current, instance=exc.instance)
    if isinstance(exc, PartitionUnavailable):
        return fail(503, "PartitionUnavailable", str(exc), {"Retry-After": str(
            max(1, round(exc.retry_after)))}, partition=exc.partition,
            retry_after=exc.retry_after)
    if isinstance(exc, ResultTooLarge):
        return fail(413, "ResultTooLarge", str(exc), kind=exc.kind, limit=exc.limit)
    if isinstance(exc, PartitionNotHeld):  # asking this instance again cannot help: 421
        return fail(421, "PartitionNotHeld", str(exc), partition=exc.partition,
                    instance=exc.instance, owners=exc.owners)
    if isinstance(exc, BadArgument):
        return fail(400, "BadArgument", str(exc))
    raise exc


def bad_argument_as_400(call: Callable, *args, **kwargs):
    """``call(*args, **kwargs)``, its BadArgument a 400."""
    try:
        return call(*args, **kwargs)
    except BadArgument as exc:
        raise as_http_error(exc) from None


def problem(error: dict) -> str:
    """One validation problem as text: the parameter, the value, and what is accepted."""
    loc = [str(part) for part in error.get("loc", ())]
    where = loc[0] if loc else "request"
    name = ".".join(loc[1:]) or where
    if error.get("type") == "missing":
        return f"missing {where} parameter {name!r}: {error.get('msg', '')}" if \
            len(loc) > 1 else f"missing {where}: {error.get('msg', '')}"
    if error.get("type") == "json_invalid":
        return f"bad body: not JSON ({error.get('ctx', {}).get('error', '')})"
    return f"bad {name}: {shown(error.get('input'))}; accepted: {error.get('msg', '')}"


def _given(error: dict) -> object:
    """The value a validation problem is about: None for a missing query parameter (FastAPI
    reports a query model's whole input there, the other parameters sent)."""
    loc = error.get("loc", ())
    if error.get("type") == "missing" and loc and loc[0] == "query":
        return None
    return error.get("input")


def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    """422 with the first problem in the message (the value named) and all in ``errors``."""
    errors = list(exc.errors())
    more = f" (and {len(errors) - 1} more: see errors)" if len(errors) > 1 else ""
    listed = [{"loc": [p if isinstance(p, int) else str(p) for p in error.get("loc", ())],
               "type": str(error.get("type", "")), "msg": str(error.get("msg", "")),
               "input": shown(_given(error))} for error in errors]
    return AsciiJSONResponse({"detail": {"error": "BadRequest", "message": (
        problem(errors[0]) + more if errors else "bad request"), "errors": listed}}, 422)


def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    """Errors as ``{"detail": {"error", "message", ...}}``, FastAPI's own (404, 405) too."""
    if isinstance(exc.detail, dict):
        detail = exc.detail
    elif exc.status_code == 404:
        detail = {"error": "NotFound", "message": f"bad path: {request.url.path!r}; accepted: "
                                                  f"the paths of /openapi.json"}
    elif exc.status_code == 400 and exc.__cause__ is not None:  # FastAPI could not read the
        cause = exc.__cause__                                      # body (not UTF-8, ...)
        detail = {"error": "BadRequest", "message": (
            f"bad body: {type(cause).__name__}: {str(cause)[:_SHOWN]}; accepted: JSON in "
            f"UTF-8, the body /openapi.json documents for {request.method} "
            f"{request.url.path}")}
    elif exc.status_code == 405:
        detail = {"error": "MethodNotAllowed", "message": f"bad method: {request.method} "
                  f"{request.url.path}; accepted: {(exc.headers or {}).get('Allow', '')}"}
    else:
        detail = {"error": type(exc).__name__, "message": str(exc.detail)}
    return AsciiJSONResponse({"detail": detail}, exc.status_code, headers=exc.headers)


def server_error(request: Request, exc: Exception) -> JSONResponse:
    return AsciiJSONResponse({"detail": {"error": "InternalError", "message": (
        f"{type(exc).__name__}: {exc} (a bug in statekit: please report it with the request "
        f"{request.method} {request.url.path})")}}, 500)


def error_responses(*statuses: int) -> dict:
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


QUERY_ERRORS = error_responses(400, 404, 409, 413, 414, 421, 422, 503)
