"""A serving instance's REST answer read back: a result, or the statekit error it carries.

An instance answers JSON (a ``QueryResult``) or, for a whole table, an Arrow IPC stream
(``ARROW_STREAM``); an error answer names its kind (``PartitionUnavailable``,
``PositionNotReached``...), which ``decode_response`` raises again on the caller's side.

Example:
    >>> ARROW_STREAM
    'application/vnd.apache.arrow.stream'
"""

from __future__ import annotations

from urllib.parse import urlsplit

from statekit.errors import (
    BadArgument,
    InstanceDown,
    PartitionNotHeld,
    PartitionUnavailable,
    PositionNotReached,
    ResultTooLarge,
    StatekitError,
)
from statekit.serve.results import MAX_LIMIT, QueryResult, TableResult
from statekit.serve.transport import Reply

ARROW_STREAM = "application/vnd.apache.arrow.stream"


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
