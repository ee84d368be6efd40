"""A request body that never ends (issue 40, item 5): a request has ``body_timeout`` seconds,
once its head came, to send its whole body; past that it gets a JSON 408 naming the bound and
the bytes that came, and its connection is closed. A body declared over ``MAX_BODY`` is a 413
at once.

Real broker, a real instance behind real uvicorn servers on loopback (``helpers.serving``),
real sockets: each wait is on a condition (an answer, a closed connection) within ``WAIT``.
"""

from __future__ import annotations

import contextlib
import json
import math
import socket
import time

import httpx
import pytest
from helpers.serving import one_response, served

import statekit as sk
from statekit.options.security import ServingSecurity
from statekit.serve.rest import MAX_BODY, Server, create_app, create_control_app

WAIT = 60.0  # seconds a wait on a condition may last at most (each ends long before)
BOUND = 1.0  # the body_timeout of the servers below
SECRET = "s3cret-token-nobody-may-see"
PART = b'{"assignment": '  # the first 15 bytes of an assignment's body


@contextlib.contextmanager
def slow_served(hand_log, broker, folder, make_app=create_app, **options):
    """An instance behind a server of ``make_app`` with ``body_timeout=BOUND``: (instance,
    server)."""
    with served(hand_log, broker, folder) as running:
        instance, _ = running["i0"]
        server = Server(make_app(instance), **{"body_timeout": BOUND, **options}).start()
        try:
            yield instance, server
        finally:
            server.stop()


def _head(port: int, framing: bytes, headers: bytes = b"") -> socket.socket:
    """A connection that sent the head of ``POST /assignment`` with ``framing`` (its
    Content-Length or Transfer-Encoding header)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
    sock.sendall(b"POST /assignment HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 + headers + framing + b"\r\n\r\n")
    return sock


def _half_sent(port: int, chunked: bool = False) -> socket.socket:
    """A connection that sent a head and the first 15 bytes of a body of 1,000 (or of a
    first chunk), and then nothing."""
    if chunked:
        sock = _head(port, b"Transfer-Encoding: chunked")
        sock.sendall(b"%x\r\n%s\r\n" % (len(PART), PART))
    else:
        sock = _head(port, b"Content-Length: 1000")
        sock.sendall(PART)
    return sock


def _closed_after(sock: socket.socket) -> bytes:
    """What the server sent before it closed ``sock`` (``WAIT`` s at most)."""
    sock.settimeout(WAIT)
    got = b""
    while chunk := sock.recv(65536):
        got += chunk
    return got


def _answer(sock: socket.socket) -> tuple[bytes, bytes, dict]:
    """One whole answer read from ``sock``: its status line, head and JSON body."""
    head, body = one_response(sock)
    return head.split(b"\r\n", 1)[0], head, json.loads(body)


def _timed_out(answer: bytes, came: str, bound: str = f"{BOUND:g} s") -> None:
    """``answer`` is the whole 408 of a body not all sent within ``bound``, then a close."""
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408 Request Timeout\r\n"), answer
    assert b"\r\nconnection: close" in head, answer
    assert json.loads(body)["detail"] == {"error": "RequestTimeout", "message": (
        f"bad request: its body was not all sent within {bound} of its head ({came} came); "
        f"accepted: a whole body within {bound} of the request's head")}


def _assignment_body(instance, url: str) -> bytes:
    return json.dumps({"assignment": instance.assignment.to_dict(), "urls": {"i0": url}},
                      indent=2).encode()


# --- 1. a half-sent body -------------------------------------------------------------------
@pytest.mark.parametrize("make_app", [create_app, create_control_app], ids=["data", "control"])
def test_a_half_sent_body_gets_408_naming_its_deadline_and_the_bytes_that_came(
        hand_log, broker, tmp_path, make_app):
    with slow_served(hand_log, broker, tmp_path, make_app) as (instance, server):
        before = instance.assignment
        with _half_sent(server.port) as sock:
            _timed_out(_closed_after(sock), "15 of 1,000 bytes")
        with _half_sent(server.port, chunked=True) as sock:
            _timed_out(_closed_after(sock), "15 bytes, in chunks,")
        with _head(server.port, b"Content-Length: 40") as sock:  # its head only
            _timed_out(_closed_after(sock), "0 of 40 bytes")
        assert instance.assignment is before  # nothing half-sent was taken
        assert httpx.get(f"{server.url}/health").json()["status"] == "ok"


# --- 2. many at once -----------------------------------------------------------------------
def test_two_hundred_half_sent_bodies_are_all_closed_while_whole_requests_are_answered(
        hand_log, broker, tmp_path):
    bound = 3.0  # long enough for the whole requests below to come while they are open
    with slow_served(hand_log, broker, tmp_path, body_timeout=bound) as (instance, server):
        half = [_half_sent(server.port, chunked=n % 2 == 1) for n in range(200)]
        try:
            # meanwhile: a lookup-free GET and a whole POST with a body, on other connections
            assert httpx.get(f"{server.url}/health").json()["instance"] == "i0"
            answer = httpx.post(f"{server.url}/assignment",
                                content=_assignment_body(instance, server.url),
                                headers={"content-type": "application/json"})
            assert answer.status_code == 200 and answer.json()["instance"] == "i0", answer.text
            # a body declared over the limit is refused for its size, not waited for
            with _head(server.port, b"Content-Length: %d" % (MAX_BODY + 1)) as sock:
                status, _, said = _answer(sock)
                assert status.startswith(b"HTTP/1.1 413 "), status
                assert said["detail"] == {"error": "RequestTooLarge", "message": (
                    f"bad body: content-length '{MAX_BODY + 1}'; accepted: at most "
                    f"{MAX_BODY} bytes")}
                assert _closed_after(sock) == b""
            for n, sock in enumerate(half):
                came = "15 bytes, in chunks," if n % 2 else "15 of 1,000 bytes"
                _timed_out(_closed_after(sock), came, f"{bound:g} s")
        finally:
            for sock in half:
                sock.close()
        assert httpx.get(f"{server.url}/health").status_code == 200


# --- 3. whole bodies still work ------------------------------------------------------------
def test_a_whole_body_is_taken_and_its_connection_kept_past_the_deadline(hand_log, broker,
                                                                         tmp_path):
    with slow_served(hand_log, broker, tmp_path) as (instance, server):
        body = _assignment_body(instance, server.url)
        answer = httpx.post(f"{server.url}/assignment", content=body,
                            headers={"content-type": "application/json"})
        assert answer.status_code == 200 and answer.json()["instance"] == "i0", answer.text
        with _head(server.port, b"Content-Length: %d" % len(body)) as sock:
            sock.sendall(body[:20])  # in two parts
            sock.sendall(body[20:])
            status, _, said = _answer(sock)
            assert status == b"HTTP/1.1 200 OK" and said["instance"] == "i0", said
            # the body came whole: no deadline is left running on the connection, which
            # still answers the next request after the bound has passed (keep-alive: 5 s)
            time.sleep(2 * BOUND)
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            status, _, said = _answer(sock)
            assert status == b"HTTP/1.1 200 OK" and said["status"] == "ok", said


# --- 4. a body trickled after its answer ----------------------------------------------------
def _trickled_until_closed(sock: socket.socket) -> bytes:
    """A byte sent on ``sock`` every 0.2 s until the server closes it (``WAIT`` s at most);
    what the server sent meanwhile."""
    sock.settimeout(0.2)
    got, give_up = b"", time.monotonic() + WAIT
    while time.monotonic() < give_up:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            chunk = None
        except ConnectionResetError:
            return got
        if chunk == b"":
            return got
        if chunk is not None:
            got += chunk
            continue
        try:
            sock.sendall(b" ")
        except (ConnectionResetError, BrokenPipeError):
            return got
    raise AssertionError(f"still open after {WAIT:g} s of a byte every 0.2 s; sent {got!r}")


def test_a_body_still_trickling_after_its_request_was_answered_is_cut_off(hand_log, broker,
                                                                          tmp_path):
    security = ServingSecurity(token=SECRET)
    with slow_served(hand_log, broker, tmp_path, security=security) as (_, server), \
            _head(server.port, b"Content-Length: 1000") as sock:
        # refused for its token before its body was read (401, keep-alive), then a byte of
        # the body now and then: each one used to hold the connection open for good
        status, _, said = _answer(sock)
        assert status == b"HTTP/1.1 401 Unauthorized" and \
            said["detail"]["error"] == "MissingToken", said
        assert _trickled_until_closed(sock) == b""  # closed, no answer after the one it had


# --- 5. the setting ------------------------------------------------------------------------
@pytest.mark.parametrize("bound", [0, -1, "10", True, None, math.nan, math.inf])
def test_a_body_timeout_that_is_no_positive_number_is_refused(bound):
    with pytest.raises(sk.BadArgument) as caught:
        Server(create_app, body_timeout=bound)  # checked before the app is looked at
    assert str(caught.value) == (f"bad body_timeout: {bound!r}; accepted: a number of "
                                 f"seconds > 0")
