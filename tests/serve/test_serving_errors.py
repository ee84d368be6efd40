"""Serving as a hostile user tries it (issue 40, item 5): every error is statekit's own, names
the bad value and what is accepted, and never shows a secret.

Real broker, real instances behind real uvicorn servers on loopback (``helpers.serving``);
a cluster's arguments are checked as ``ServingCluster`` is built, before any process starts.
"""

from __future__ import annotations

import json
import socket

import httpx
import pytest
from helpers.serving import one_response, served

import statekit as sk
from statekit.options.security import ServingSecurity
from statekit.options.serve import ServeOptions
from statekit.serve.client import ServingClient
from statekit.serve.cluster import ServingCluster
from statekit.serve.rest import HEADER_TIMEOUT, MAX_BODY_DEPTH, Server, create_app

SECRET = "s3cret-token-nobody-may-see"
WAIT = 60.0  # seconds a wait on a condition may last at most (each ends long before)


def detail(response: httpx.Response, status: int) -> dict:
    assert response.status_code == status, (response.status_code, response.text)
    return response.json()["detail"]


def built(broker, topic: str, **arguments) -> ServingCluster:
    """A cluster built (its arguments checked), never started; its temp folder removed."""
    cluster = ServingCluster(broker, topic, **arguments)
    cluster.stop()
    return cluster


# --- 1. a secret is never shown -----------------------------------------------------------
@pytest.mark.parametrize("given", [{"token": SECRET}, {"token": SECRET, "cafile": None}, SECRET],
                         ids=["dict", "dict-of-two", "bare-token"])
def test_a_security_that_is_not_a_serving_security_is_refused_without_its_secret(
        broker, topic_name, given):
    for build in (lambda: built(broker, topic_name, security=given),
                  lambda: ServeOptions(security=given)):
        with pytest.raises(sk.BadArgument) as caught:
            build()
        said = str(caught.value)
        assert SECRET not in said and "s3cret" not in said and SECRET not in repr(
            caught.value.value), said
        assert said.startswith("bad security: '<a "), said
        assert said.endswith("accepted: a ServingSecurity(token, certfile, keyfile, cafile) "
                             "or None, e.g. ServingSecurity(token=...)"), said
        if isinstance(given, dict):
            assert "token" in said, said  # the keys are named, the values not
    # the right input, given as options or as the keyword, is taken (and still hidden)
    security = ServingSecurity(token=SECRET)
    for cluster in (built(broker, topic_name, security=security),
                    built(broker, topic_name, options=ServeOptions(security=security))):
        assert cluster.security.token == SECRET and SECRET not in repr(cluster.options)


# --- 2. a host that is no address of this machine ----------------------------------------------
@pytest.mark.parametrize("host", ["my laptop", "no-such-host.invalid", "203.0.113.7",
                                  "2001:db8::1", "x" * 70])
def test_a_host_this_machine_cannot_listen_on_is_named_with_what_is_accepted(broker,
                                                                             topic_name, host):
    with pytest.raises(sk.BadArgument) as caught:
        built(broker, topic_name, host=host, allow_remote=True)
    said = str(caught.value)
    assert said.startswith(f"bad host: {host!r}; accepted: an IPv4 or IPv6 address of this "
                           f"machine or a name that resolves to one, e.g. 127.0.0.1 or ::1, or "
                           f"0.0.0.0 or :: for every interface ("), said
    with pytest.raises(sk.BadArgument, match=f"bad host: {host!r}"):
        Server(create_app, host, allow_remote=True)  # checked before the app is looked at


def test_the_hosts_a_machine_listens_on_are_taken_however_written(broker, topic_name):
    for host, remote in (("0.0.0.0", True), ("localhost", False), ("127.0.0.1", False)):
        assert built(broker, topic_name, host=host, allow_remote=remote).host == host


# --- 6. standbys that do not fit ----------------------------------------------------------------
@pytest.mark.parametrize("standbys", [5, 2, -1, 1.5, "1"])
def test_standbys_beyond_the_other_instances_are_refused_like_negative_ones(broker,
                                                                            topic_name,
                                                                            standbys):
    with pytest.raises(sk.BadArgument) as caught:
        built(broker, topic_name, instances=2, standbys=standbys)
    assert str(caught.value) == (f"bad standbys: {standbys!r}; accepted: a number of "
                                 f"standbys from 0 to 1 (each on another of the 2 instances)")


def test_standbys_that_fit_are_kept_and_the_default_fits_any_instance_count(broker,
                                                                            topic_name):
    assert built(broker, topic_name, instances=3, standbys=2).standby_count == 2
    assert built(broker, topic_name, instances=2, standbys=0).standby_count == 0
    assert built(broker, topic_name, instances=2).standby_count == 1
    assert built(broker, topic_name, instances=1).standby_count == 0


# --- 7. a client of no instance ------------------------------------------------------------
@pytest.mark.parametrize("urls", [{}, [], "http://127.0.0.1:8123", {"": "http://x:1"},
                                  {"i0": 8123}])
def test_a_client_of_no_instance_is_refused_up_front(urls):
    with pytest.raises(sk.BadArgument) as caught:
        ServingClient(urls)
    assert str(caught.value) == (f"bad urls: {urls!r}; accepted: a dict of one or more "
                                 f"instance names to their base URLs, e.g. "
                                 f"{{'i0': 'http://127.0.0.1:8123'}} (ServingCluster.urls)")


# --- 3. a forwarded error is the owner's own ----------------------------------------------
def test_a_bad_by_on_an_instance_holding_nothing_says_what_the_owner_says(hand_log, broker,
                                                                          tmp_path):
    with served(hand_log, broker, tmp_path, ("i0", "i1", "i2")) as running:
        (i0, url0), (i2, url2) = running["i0"], running["i2"]
        assert not i2.roles and i0.roles  # 2 partitions: i2 holds none, forwards it all
        ask = {"window_start": "2026-01-05T10:00Z", "k": 3, "by": "nope"}
        store = i0.tail.store_name
        own = detail(httpx.get(f"{url0}/stores/{store}/top_k",
                               params={**ask, "local": "true"}), 400)
        assert own == {"error": "BadArgument",
                       "message": "bad top_k by: 'nope'; accepted: count"}
        for url in (url2, url0):  # forwarded (all of it, or in part): the same words
            assert detail(httpx.get(f"{url}/stores/{store}/top_k", params=ask), 400) == own
        with ServingClient({n: u for n, (_, u) in running.items()}) as client:  # Python too
            with pytest.raises(sk.BadArgument) as caught:
                client.top_k("2026-01-05T10:00Z", 3, "nope")
            assert str(caught.value) == own["message"]
            # a right name, and a client of one instance, answer from every partition
            rows = client.top_k("2026-01-05T10:00Z", 3, "count").rows
            assert len(rows) == 2 and all(row["count"] == 1 for row in rows)
        answer = httpx.get(f"{url2}/stores/{store}/top_k", params={**ask, "by": "count"})
        assert answer.status_code == 200 and len(answer.json()["rows"]) == 2


# --- 4. a body nested too deep ------------------------------------------------------------
def test_a_deeply_nested_assignment_body_is_named_with_what_is_accepted(hand_log, broker, tmp_path):
    with served(hand_log, broker, tmp_path) as running:
        instance, url = running["i0"]
        before = instance.assignment
        deep = '{"assignment": ' + "[" * 5000 + "]" * 5000 + ', "urls": {}}'
        sends = [{"content": deep.encode()},                              # content-length
                 {"content": iter([deep[:100].encode(), deep[100:].encode()])}]  # chunks
        for send in sends:
            said = detail(httpx.post(f"{url}/assignment", headers={
                "content-type": "application/json"}, **send), 422)
            assert said == {"error": "BadRequest", "message": (
                f"bad body: JSON nested 5,001 deep; accepted: JSON nested at most "
                f"{MAX_BODY_DEPTH} deep, the body /openapi.json documents for "
                f"POST /assignment")}
        said = detail(httpx.post(f"{url}/assignment", content=b'{"assignment": "\xff"}',
                                 headers={"content-type": "application/json"}), 400)
        assert said["error"] == "BadRequest" and said["message"].startswith(
            "bad body: UnicodeDecodeError: "), said
        assert said["message"].endswith("accepted: JSON in UTF-8, the body /openapi.json "
                                        "documents for POST /assignment"), said
        assert instance.assignment is before
        # the right body, sent in chunks, is taken
        body = json.dumps({"assignment": before.to_dict(), "urls": {"i0": url}}, indent=2)
        answer = httpx.post(f"{url}/assignment", content=iter([body[:50].encode(),
                                                               body[50:].encode()]),
                            headers={"content-type": "application/json"})
        assert answer.status_code == 200 and answer.json()["instance"] == "i0", answer.text


# --- 5. a request head that never ends ----------------------------------------------------
def _closed_after(sock: socket.socket) -> bytes:
    """What the server sent before it closed ``sock`` (``WAIT`` s at most)."""
    sock.settimeout(WAIT)
    got = b""
    while chunk := sock.recv(65536):
        got += chunk
    return got


def _half_sent(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ")
    return sock


def _timed_out(answer: bytes, bound: str) -> None:
    """``answer`` is the 408 of a request head not all sent within ``bound``."""
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408 Request Timeout\r\n"), answer
    assert json.loads(body)["detail"] == {"error": "RequestTimeout", "message": (
        f"bad request: its head (request line and headers) was not all sent within {bound}; "
        f"accepted: a whole request head within {bound} of its first byte")}


def test_three_hundred_half_sent_requests_are_answered_408_and_closed(hand_log, broker, tmp_path):
    with served(hand_log, broker, tmp_path) as running:
        _, url = running["i0"]
        port = int(url.rsplit(":", 1)[1])
        half = [_half_sent(port) for _ in range(300)]
        silent = [socket.create_connection(("127.0.0.1", port)) for _ in range(5)]
        # meanwhile a whole request sent in two parts is answered, on a connection that
        # stays open for the next one
        with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as sock:
            for _ in range(2):
                sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
                sock.sendall(b"X-Part: two\r\n\r\n")
                assert one_response(sock)[0].startswith(b"HTTP/1.1 200 OK\r\n")
        for sock in half:
            _timed_out(_closed_after(sock), f"{HEADER_TIMEOUT:g} s")
            sock.close()
        for sock in silent:
            assert _closed_after(sock) == b""  # nothing asked, nothing answered
            sock.close()
        assert httpx.get(f"{url}/health").status_code == 200


def test_a_server_takes_its_own_header_timeout_and_refuses_one_that_is_no_positive_number(
        hand_log, broker, tmp_path):
    for bound in (0, -1, "10", True):
        with pytest.raises(sk.BadArgument, match=rf"bad header_timeout: {bound!r}; accepted: a "
                                                 rf"number of seconds > 0"):
            Server(create_app, header_timeout=bound)
    with served(hand_log, broker, tmp_path) as running:
        instance, _ = running["i0"]
        server = Server(create_app(instance), header_timeout=0.5).start()
        try:
            with _half_sent(server.port) as sock:
                _timed_out(_closed_after(sock), "0.5 s")
        finally:
            server.stop()
