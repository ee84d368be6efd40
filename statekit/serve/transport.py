"""statekit's own HTTP calls to serving instances: kept-alive standard-library connections.

The routing client and the cluster speak to the instances' REST API on every
routed lookup, so the client's cost per request counts. ``HttpPool`` keeps idle
keep-alive ``http.client`` connections per instance (thread-safe, at most
``maxsize`` each) and adds nothing else to a call: on loopback a request costs
~0.17 ms of client time where urllib3 spent ~0.35 ms (its URL handling
re-encodes the whole query, a JSON key included, twice per request) and httpx
more (``bench/serving.py`` measures all three). A kept connection the server
has closed meanwhile (uvicorn closes idle ones after 5 s) is seen before it is
used, and a request that still meets a closed kept connection is sent once
more on a new one: nothing was answered on the old one. ``Reply`` carries what
the callers read of an answer, and ``HttpError`` is the one exception a call
that got no answer raises.

Given a ``token``, every request carries it (``Authorization: Bearer``), and a
401 answer raises ``TokenRefused`` naming the instance that refused it;
https:// URLs are verified against ``verify`` (a CA file or an
``ssl.SSLContext``; the system's trust store without one). See
``statekit.serve.auth``.

Example:
    >>> pool = HttpPool(timeout=5.0)
    >>> reply = pool.get(f"{url}/health")                                # doctest: +SKIP
    >>> reply.status, reply.json()["status"]                              # doctest: +SKIP
    (200, 'ok')
"""

from __future__ import annotations

import http.client
import json
import os
import select
import ssl
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlencode, urlsplit

from statekit.errors import BadArgument
from statekit.serve.auth import bearer, client_context, refused

#: What a failed call raises: the standard library's own errors of a call that got no answer.
_FAILED = (OSError, http.client.HTTPException)
#: A kept connection the server closed: the request is sent once more on a new connection.
_CLOSED = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError,
           ConnectionAbortedError)


class HttpError(ConnectionError):
    """A call that got no answer: no connection, a timeout, a broken or cut-off reply."""


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


def _closed(conn: http.client.HTTPConnection) -> bool:
    """True when a kept connection cannot carry a request: no socket, or the server has
    closed it (an idle keep-alive socket that is readable has met its end)."""
    if conn.sock is None:
        return True
    try:
        if hasattr(select, "poll"):  # no limit on the descriptor's number, unlike select()
            poller = select.poll()
            poller.register(conn.sock, select.POLLIN)
            return bool(poller.poll(0))
        return bool(select.select([conn.sock], [], [], 0)[0])
    except (OSError, ValueError):
        return True


class HttpPool:
    """Keep-alive connections to the instances (up to ``maxsize`` idle ones per instance).

    Args:
        timeout: seconds to connect and, separately, to wait for each part of the answer.
        maxsize: idle connections kept per instance (threads asking one instance at once
            each take their own; those beyond it are closed after their call).
        token: sent with every request as ``Authorization: Bearer <token>``.
        verify: how https:// instances' certificates are checked: a CA file (PEM) or an
            ``ssl.SSLContext``; None: the system's trust store.
    """

    def __init__(self, timeout: float = 5.0, maxsize: int = 32, *, token: str | None = None,
                 verify: str | os.PathLike | ssl.SSLContext | None = None):
        self.timeout, self.maxsize = timeout, maxsize
        self._headers = bearer(token)
        self._context = client_context(verify)
        self._idle: dict[tuple[str, str, int], list[http.client.HTTPConnection]] = {}
        self._lock = threading.Lock()

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

    # --- one call -------------------------------------------------------------------------
    def _call(self, method: str, url: str, body: bytes | None, timeout: float | None
              ) -> Reply:
        where, target = _split(url)
        headers = {**self._headers, "Content-Type": "application/json"} if body is not None \
            else self._headers
        limit = self.timeout if timeout is None else timeout
        conn, kept = self._take(where)
        try:
            try:
                status, kind, content, reusable = _exchange(conn, method, target, body,
                                                            headers, limit)
            except _CLOSED:
                if not kept:
                    raise
                conn.close()  # closed by the server between our check and the request
                conn, kept = self._new(where), False
                status, kind, content, reusable = _exchange(conn, method, target, body,
                                                            headers, limit)
        except _FAILED as exc:
            conn.close()
            raise HttpError(f"{method} {url}: {type(exc).__name__}: {exc}") from exc
        if reusable:
            self._give_back(where, conn)
        else:
            conn.close()
        if status == 401:
            raise refused(method, url, content, bool(self._headers))
        return Reply(url, status, kind, content)

    def _take(self, where: tuple[str, str, int]) -> tuple[http.client.HTTPConnection, bool]:
        """An idle connection to ``where`` that is still open (True), or a new one (False)."""
        while True:
            with self._lock:
                idle = self._idle.get(where)
                conn = idle.pop() if idle else None
            if conn is None:
                return self._new(where), False
            if not _closed(conn):
                return conn, True
            conn.close()

    def _new(self, where: tuple[str, str, int]) -> http.client.HTTPConnection:
        scheme, host, port = where
        if scheme != "https":
            return http.client.HTTPConnection(host, port, timeout=self.timeout)
        if self._context is None:  # the system's trust store, loaded once, when first needed
            self._context = ssl.create_default_context()
        return http.client.HTTPSConnection(host, port, timeout=self.timeout,
                                           context=self._context)

    def _give_back(self, where: tuple[str, str, int], conn: http.client.HTTPConnection
                   ) -> None:
        with self._lock:
            idle = self._idle.setdefault(where, [])
            if len(idle) < self.maxsize:
                idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        """Close every idle connection (the pool stays usable: new ones are opened)."""
        with self._lock:
            idle, self._idle = self._idle, {}
        for conns in idle.values():
            for conn in conns:
                conn.close()


def _split(url: str) -> tuple[tuple[str, str, int], str]:
    """``url`` as (scheme, host, port) and the request target (path and query)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BadArgument("url", url, "an http:// or https:// URL with a host, e.g. "
                                      "http://127.0.0.1:8123/health")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return (parts.scheme, parts.hostname, port), target


def _exchange(conn: http.client.HTTPConnection, method: str, target: str,
              body: bytes | None, headers: dict, timeout: float
              ) -> tuple[int, str, bytes, bool]:
    """Send one request and read its whole answer (each step within ``timeout`` seconds):
    status, content type, body, and whether the connection may carry another request."""
    if conn.timeout != timeout:
        conn.timeout = timeout
        if conn.sock is not None:
            conn.sock.settimeout(timeout)
    conn.request(method, target, body=body, headers=headers)
    response = conn.getresponse()
    content = response.read()
    kind = response.getheader("content-type", "")
    return response.status, kind, content, not response.will_close
