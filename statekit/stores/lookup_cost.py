"""What a lookup costs: state kept in local RocksDB, against state kept in a service.

Kafka Streams keeps state next to the processing (a local RocksDB per task, restored from
its changelog) so that a record's lookup is a local read. The alternative is an external
store or cache (a database, Redis, a REST service): no local state to restore or size,
one copy shared by every application, but a network round trip per lookup.
``KeyValueService`` is such a service on 127.0.0.1 (HTTP, one key per GET, keep-alive);
``lookup_costs`` times the same lookups against it, against a local RocksDB
(``rocksdict``, the library under statekit's local stores) and against a Python dict.
Loopback is the cheapest network there is: a real one adds its latency to every lookup.

Example:
    >>> costs = lookup_costs({"p07": "42"}, ["p07"] * 200, repeat=1)
    >>> list(costs["where"])
    ['Python dict', 'local RocksDB', 'service over HTTP (loopback)']
"""

from __future__ import annotations

import http.client
import socket
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import quote, unquote

import pandas as pd

from statekit.errors import BadArgument
from statekit.validate import whole_number

COLUMNS = ["where", "lookups", "seconds", "us_per_lookup"]
WHERE = ("Python dict", "local RocksDB", "service over HTTP (loopback)")


class KeyValueService:
    """A key-value service on 127.0.0.1: ``GET /<key>`` answers the value (404 when
    absent). Starts on construction; ``close()`` (or ``with``) stops it.

    Example:
        >>> with KeyValueService({"p07": "42"}) as service:
        ...     service.port > 0
        True
    """

    def __init__(self, values: Mapping[str, str]):
        data = {str(k): str(v).encode() for k, v in values.items()}

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive: one connection for many lookups
            disable_nagle_algorithm = True  # else each small answer waits for a delayed ACK

            def do_GET(self):  # noqa: N802 - the http.server name
                body = data.get(unquote(self.path[1:]))
                self.send_response(200 if body is not None else 404)
                self.send_header("Content-Length", str(len(body or b"")))
                self.end_headers()
                self.wfile.write(body or b"")

            def log_message(self, *args):  # quiet
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def client(self) -> RemoteLookup:
        """A client holding one keep-alive connection."""
        return RemoteLookup(self.port)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> KeyValueService:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class RemoteLookup:
    """``get(key)`` over HTTP from a ``KeyValueService`` (None when absent)."""

    def __init__(self, port: int):
        self._conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        self._conn.connect()
        self._conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def get(self, key: str) -> str | None:
        self._conn.request("GET", "/" + quote(key, safe=""))
        response = self._conn.getresponse()
        body = response.read()
        return body.decode() if response.status == 200 else None

    def close(self) -> None:
        self._conn.close()


def _timed(get, keys: Sequence[str], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for key in keys:
            get(key)
        best = min(best, time.perf_counter() - start)
    return best


def lookup_costs(values: Mapping[str, str], keys: Sequence[str], repeat: int = 3
                 ) -> pd.DataFrame:
    """Time ``keys`` looked up one by one in a dict, a local RocksDB and a
    ``KeyValueService``, each holding ``values``: one row per place (``WHERE``), with
    ``lookups``, ``seconds`` (the best of ``repeat`` runs) and ``us_per_lookup``.

    Raises:
        BadArgument: no keys, or a key not in ``values`` (every lookup must find a value).
    """
    from rocksdict import Rdict

    keys = [str(k) for k in keys]
    repeat = whole_number(repeat, "repeat", minimum=1)
    values = {str(k): str(v) for k, v in values.items()}
    if not keys:
        raise BadArgument("keys", keys, "one or more keys to look up")
    unknown = next((k for k in keys if k not in values), None)
    if unknown is not None:
        raise BadArgument("key", unknown, "a key of values (every lookup finds a value)")
    seconds = {WHERE[0]: _timed(values.get, keys, repeat)}
    with tempfile.TemporaryDirectory(prefix="statekit-lookup-") as folder:
        db = Rdict(folder)
        try:
            for k, v in values.items():
                db[k.encode()] = v.encode()
            seconds[WHERE[1]] = _timed(lambda k: db.get(k.encode()), keys, repeat)
        finally:
            db.close()
    with KeyValueService(values) as service:
        client = service.client()
        try:
            seconds[WHERE[2]] = _timed(client.get, keys, repeat)
        finally:
            client.close()
    return pd.DataFrame([{"where": w, "lookups": len(keys), "seconds": s,
                          "us_per_lookup": s / len(keys) * 1e6} for w, s in seconds.items()],
                        columns=COLUMNS)
