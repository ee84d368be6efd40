"""statekit's HTTP pool against a real HTTP server on loopback (the standard library's, in a
thread): keep-alive reuse, a connection the server closed, refusals, timeouts, bad URLs."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest

from statekit.errors import BadArgument
from statekit.ports import free_port
from statekit.serve import transport
from statekit.serve.transport import HttpError, HttpPool


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive

    def setup(self) -> None:  # once per connection
        super().setup()
        self.server.connections += 1

    def log_message(self, *args) -> None:
        pass

    def _answer(self, status: int, body: dict, close: bool = False) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        if close:  # keep-alive promised, then the connection closed (as an idle timeout does)
            self.close_connection = True

    def do_GET(self) -> None:  # noqa: N802
        url = urlsplit(self.path)
        if url.path == "/slow":
            time.sleep(1.0)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        self._answer(404 if url.path == "/missing" else 200,
                     {"path": url.path, "query": query}, close=url.path == "/bye")

    def do_POST(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self._answer(200, {"type": self.headers["Content-Type"], "body": json.loads(body)})


@pytest.fixture()
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.connections = 0
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd, f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_get_sends_the_query_and_keeps_one_connection_alive(server):
    httpd, url = server
    pool = HttpPool(timeout=5.0)
    key = {"player": "p 07/ü", "window_start": "2026-01-05T10:00Z"}
    for _ in range(5):
        reply = pool.get(f"{url}/stores/counts/get",
                         {"key": json.dumps(key), "local": True, "min_batch": None})
        assert reply.status == 200 and reply.content_type == "application/json"
        assert reply.json() == {"path": "/stores/counts/get",
                                "query": {"key": json.dumps(key), "local": "true"}}
    assert httpd.connections == 1  # five calls, one kept-alive connection
    assert pool.get(f"{url}/missing").status == 404  # an answer, not an error
    pool.close()


def test_post_json_sends_a_json_body(server):
    _, url = server
    reply = HttpPool().post_json(f"{url}/assignment", {"version": 2, "active": {"0": "i1"}})
    assert reply.json() == {"type": "application/json",
                            "body": {"version": 2, "active": {"0": "i1"}}}


def test_a_connection_the_server_closed_is_replaced_without_an_error(server, monkeypatch):
    httpd, url = server
    pool = HttpPool()
    assert pool.get(f"{url}/bye").status == 200  # the server closes it after answering
    time.sleep(0.1)
    assert pool.get(f"{url}/x").json()["path"] == "/x"  # seen closed: a new connection
    # closed between the pool's check and the request: sent once more on a new one
    monkeypatch.setattr(transport, "_closed", lambda conn: False)
    assert pool.get(f"{url}/bye").status == 200  # on the second connection, closed after it
    time.sleep(0.1)
    assert pool.get(f"{url}/y").json()["path"] == "/y"  # the second fails, a third answers
    assert httpd.connections == 3


def test_no_answer_is_an_http_error_naming_the_url():
    url = f"http://127.0.0.1:{free_port('127.0.0.1')}/health"  # nobody listens there
    with pytest.raises(HttpError, match=rf"GET {url}: ConnectionRefusedError"):
        HttpPool(timeout=2.0).get(url)


def test_a_slow_answer_times_out_with_an_http_error(server):
    _, url = server
    pool = HttpPool(timeout=5.0)
    started = time.monotonic()
    with pytest.raises(HttpError, match=r"GET .*/slow: (TimeoutError|timeout)"):
        pool.get(f"{url}/slow", timeout=0.2)
    assert time.monotonic() - started < 0.9
    assert pool.get(f"{url}/x").status == 200  # the pool's own timeout is back


@pytest.mark.parametrize("url", ["ftp://127.0.0.1/x", "127.0.0.1:8123/health", "http:///x"])
def test_a_bad_url_is_named(url):
    with pytest.raises(BadArgument, match="an http:// or https:// URL with a host"):
        HttpPool().get(url)
