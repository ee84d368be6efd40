"""statekit's own HTTP calls to serving instances: one urllib3 pool per caller.

The routing client and the cluster speak to the instances' REST API on every
routed lookup, so the client's cost per request counts: urllib3 (the pool under
``requests`` and pip: keep-alive, thread-safe, no retries unless asked) spends
about half of what httpx spends per call on loopback (``bench/serving.py``
measures both). ``Reply`` carries what the callers read of an answer, and
``HttpError`` is the one exception a failed call raises.

Example:
    >>> pool = HttpPool(timeout=5.0)
    >>> reply = pool.get(f"{url}/health")                                # doctest: +SKIP
    >>> reply.status, reply.json()["status"]                              # doctest: +SKIP
    (200, 'ok')
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlencode

import urllib3

#: What a failed call raises: no connection, a timeout, a broken answer.
HttpError = urllib3.exceptions.HTTPError


@dataclass(frozen=True)
class Reply:
    """One HTTP answer: the URL asked, its status, content type and body."""

    url: str
    status: int
    content_type: str
    content: bytes

    def json(self) -> object:
        """The body as JSON (``ValueError`` when it is not)."""
        return json.loads(self.content)

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")


def _text(value: object) -> object:
    return ("true" if value else "false") if isinstance(value, bool) else value


class HttpPool:
    """Keep-alive connections to the instances (up to ``maxsize`` per instance).

    Args:
        timeout: seconds to connect and, separately, to wait for the answer.
        maxsize: connections kept per instance (threads asking one instance at once).
    """

    def __init__(self, timeout: float = 5.0, maxsize: int = 32):
        self._pool = urllib3.PoolManager(maxsize=maxsize, retries=False,
                                         timeout=urllib3.Timeout(connect=timeout, read=timeout))

    def get(self, url: str, params: Mapping[str, object] | None = None,
            timeout: float | None = None) -> Reply:
        """``GET url?params`` (None values left out, booleans as ``true`` / ``false``)."""
        if params:
            query = urlencode({k: _text(v) for k, v in params.items() if v is not None})
            url = f"{url}?{query}" if query else url
        return self._call("GET", url, None, timeout)

    def post_json(self, url: str, body: object, timeout: float | None = None) -> Reply:
        """``POST url`` with ``body`` as JSON."""
        return self._call("POST", url, json.dumps(body).encode(), timeout)

    def _call(self, method: str, url: str, body: bytes | None, timeout: float | None
              ) -> Reply:
        extra = {} if timeout is None else {"timeout": urllib3.Timeout(connect=timeout,
                                                                       read=timeout)}
        headers = {"Content-Type": "application/json"} if body is not None else None
        response = self._pool.request(method, url, body=body, headers=headers, **extra)
        return Reply(url, response.status, response.headers.get("content-type", ""),
                     response.data)

    def close(self) -> None:
        self._pool.clear()
