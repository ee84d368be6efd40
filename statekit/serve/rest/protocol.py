"""uvicorn's HTTP protocol as statekit's REST servers run it: its own refusals JSON too, a
request head or body that is not all sent in time refused, and a plain lookup answered as soon
as its headers are read (``StatekitHttpProtocol``).

Example:
    >>> SERVER_OPTIONS["http"] is StatekitHttpProtocol
    True
"""

from __future__ import annotations

import asyncio
import json

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from statekit.serve.rest.limits import BODY_TIMEOUT, HEADER_TIMEOUT, MAX_REQUEST_LINE, MAX_URL


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
    see ``fast_lookup.AnswerNow``) is written as soon as its headers are read: no ASGI task,
    middleware or response object, the lookup's whole cost in the web stack halved. Anything else —
    another path or method, a body, a request behind another one, a wait, a forwarded key,
    every error — goes to the app, whose answers are the documented ones.

    A request's head (request line and headers) must arrive within ``header_timeout``
    seconds of its first byte (a new connection's first one: of the connection), as Go's
    ``ReadHeaderTimeout``: uvicorn bounds only the idle time between requests, so a client
    sending half a head (or a byte now and then) held its connection open for good. Past
    the bound a half-sent request gets a JSON 408 and the connection is closed; a connection
    that sent nothing is closed.

    Its body, likewise, must arrive within ``body_timeout`` seconds of its head's end (a
    client that declared ``Content-Length: 1000`` and sent 10 bytes held the connection, and
    the request's task, for good; so did one trickling a body the app had already answered).
    Past the bound the request gets a JSON 408 naming the bytes that came (the connection
    closed alone when its answer was already sent); time the server itself holds the body
    back (a pipelined request waiting its turn) does not count. A request without a body
    arms no timer."""

    def __init__(self, *args, header_timeout: float = HEADER_TIMEOUT,
                 body_timeout: float = BODY_TIMEOUT, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.header_timeout = header_timeout
        self.body_timeout = body_timeout
        self._head_deadline: asyncio.TimerHandle | None = None
        self._head_begun = False  # a request's first bytes came, its head is not complete
        self._body_deadline: asyncio.TimerHandle | None = None
        self._body_pending = False  # a request's head came, its body is not complete
        self._body_received = 0

    def connection_made(self, transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_head_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head_deadline()
        self._disarm_body_deadline()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        # armed only when a body is still to come once these bytes are read: a request
        # without a body ends in the same call (on_message_complete), arming nothing
        if self._body_pending and self._body_deadline is None and \
                not self.transport.is_closing():
            self._body_deadline = self.loop.call_later(self.body_timeout, self._body_timed_out)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._head_begun = True
        if self._head_deadline is None:  # a new connection's deadline runs from its start
            self._arm_head_deadline()

    def _arm_head_deadline(self) -> None:
        self._head_deadline = self.loop.call_later(self.header_timeout, self._head_timed_out)

    def _disarm_head_deadline(self) -> None:
        self._head_begun = False
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _head_timed_out(self) -> None:
        """408 for a half-sent request head; the connection closed either way."""
        self._head_deadline = None
        if self.transport.is_closing():
            return
        if not self._head_begun:
            self.transport.close()
            return
        bound = f"{self.header_timeout:g} s"
        self._send_error(408, {"error": "RequestTimeout", "message": (
            f"bad request: its head (request line and headers) was not all sent within "
            f"{bound}; accepted: a whole request head within {bound} of its first byte")})

    def on_headers_complete(self) -> None:
        self._disarm_head_deadline()
        # a websocket taken up has no body: the connection is another protocol's then
        upgrade = self.parser.should_upgrade() and self._should_upgrade()
        self._body_pending, self._body_received = not upgrade, 0
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

    def on_body(self, body: bytes) -> None:
        self._body_received += len(body)
        super().on_body(body)

    def on_message_complete(self) -> None:
        self._disarm_body_deadline()
        super().on_message_complete()

    def _disarm_body_deadline(self) -> None:
        self._body_pending = False
        if self._body_deadline is not None:
            self._body_deadline.cancel()
            self._body_deadline = None

    def _body_timed_out(self) -> None:
        """408 for a body not all sent in time (the connection closed alone when the request
        was already answered); the deadline runs again while the server holds the body back."""
        self._body_deadline = None
        if self.transport.is_closing() or not self._body_pending:
            return
        if self.flow.read_paused:  # a pipelined request waits its turn: not the client's delay
            self._body_deadline = self.loop.call_later(self.body_timeout, self._body_timed_out)
            return
        cycle = self.cycle
        if getattr(cycle, "response_started", True):
            self.transport.close()
            return
        cycle.disconnected = True  # the app's receive() gets http.disconnect, its send nothing
        cycle.message_event.set()
        length = dict(self.headers).get(b"content-length", b"").decode("latin-1")
        came = f"{self._body_received:,} of {int(length):,} bytes" if length.isascii() and \
            length.isdigit() else \
            f"{self._body_received:,} bytes, in chunks,"
        bound = f"{self.body_timeout:g} s"
        self._send_error(408, {"error": "RequestTimeout", "message": (
            f"bad request: its body was not all sent within {bound} of its head ({came} "
            f"came); accepted: a whole body within {bound} of the request's head")})

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
        self._send_error(status, detail)

    def _send_error(self, status: int, detail: dict) -> None:
        """Write the JSON error ``detail`` with ``status`` and close the connection."""
        body = json.dumps({"detail": detail}).encode("ascii")
        phrase = {400: b"Bad Request", 408: b"Request Timeout", 414: b"URI Too Long"}[status]
        self.transport.write(b"".join([
            b"HTTP/1.1 %d %s\r\n" % (status, phrase),
            b"content-type: application/json\r\n",
            b"content-length: %d\r\n" % len(body), b"connection: close\r\n\r\n", body]))
        self.transport.close()


#: How every statekit REST server runs uvicorn (``Server`` and the instance processes).
SERVER_OPTIONS = {"http": StatekitHttpProtocol, "h11_max_incomplete_event_size": MAX_REQUEST_LINE,
                  "log_level": "warning", "access_log": False, "lifespan": "off",
                  "proxy_headers": False}
