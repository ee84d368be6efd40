"""A uvicorn server for a REST app (``create_app``): on a background thread or in the
foreground, on loopback unless remote serving is asked for (then with a token, and TLS when
given certificates).

Example:
    >>> check_host("127.0.0.1", allow_remote=False)
    '127.0.0.1'
    >>> check_host("0.0.0.0", allow_remote=False)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    statekit.errors.BadArgument: bad host: '0.0.0.0'; accepted: a loopback address ...
"""

from __future__ import annotations

import functools
import threading
import time

from fastapi import FastAPI

from statekit.errors import BadArgument
from statekit.options.security import ServingSecurity
from statekit.ports import check_bindable, free_port
from statekit.serve.auth import announce, arm, is_loopback, settle
from statekit.serve.rest.limits import BODY_TIMEOUT, HEADER_TIMEOUT
from statekit.serve.rest.protocol import SERVER_OPTIONS
from statekit.validate import timeout_seconds


def check_host(host: str, allow_remote: bool) -> str:
    """``host`` when it is a loopback address (IPv4 or IPv6), or another address of this
    machine when remote serving is asked for (``ports.check_bindable``). An IPv6 address may
    come bracketed as in a URL (``[::1]``): it is returned bare (``::1``)."""
    if isinstance(host, str) and host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not is_loopback(host) and not allow_remote:
        raise BadArgument("host", host, "a loopback address such as 127.0.0.1 or ::1 (pass "
                                        "allow_remote=True to listen on other interfaces)")
    return check_bindable(host)


class Server:
    """A uvicorn server for ``app``: on a background thread (``start``, ``stop``) or in the
    foreground (``run``).

    Bound beyond loopback (``allow_remote=True``) it answers only calls with the token:
    ``security.token``, or one generated and printed with the URL at ``start``. With
    ``security.certfile`` / ``keyfile`` it serves HTTPS. ``url`` is the URL to use from
    this machine (an IPv6 host bracketed: ``http://[::1]:8123``); ``security`` what it
    checks. A connection has ``header_timeout`` seconds to send a request's head, and a
    request ``body_timeout`` seconds more for its body (``StatekitHttpProtocol``: a JSON 408
    past either).

    Example:
        >>> server = Server(app, "0.0.0.0", allow_remote=True).start()  # doctest: +SKIP
        statekit serving on http://127.0.0.1:8123 needs its token (generated): ...
        >>> Server(app, "::1", body_timeout=5).start().url               # doctest: +SKIP
        'http://[::1]:8123'
    """

    def __init__(self, app: FastAPI, host: str = "127.0.0.1", port: int = 0, *,
                 allow_remote: bool = False, security: ServingSecurity | None = None,
                 header_timeout: float = HEADER_TIMEOUT, body_timeout: float = BODY_TIMEOUT):
        import uvicorn

        bounds = {"header_timeout": timeout_seconds(header_timeout, "header_timeout"),
                  "body_timeout": timeout_seconds(body_timeout, "body_timeout")}
        self.host = check_host(host, allow_remote)
        self.port = port or free_port(self.host)
        self.security, self._generated = settle(self.host, security)
        arm(app, self.security)
        # a request's head must come within header_timeout s, its body within body_timeout s
        # more (StatekitHttpProtocol)
        http = functools.partial(SERVER_OPTIONS["http"], **bounds)
        config = uvicorn.Config(app, host=self.host, port=self.port,
                                **{**SERVER_OPTIONS, "http": http},
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
