"""Serving on IPv6 (issue 40, item 5): ``::1`` is loopback like 127.0.0.1, a port is picked
and checked in the host's own family, the URL is bracketed (``http://[::1]:8123``), and a
host that is no address of this machine is still statekit's ``BadArgument``.

Real broker, a real instance behind a real uvicorn server on ``[::1]`` (``helpers.serving``);
skipped, with the reason, where this machine cannot bind IPv6 loopback.
"""

from __future__ import annotations

import json
import socket

import httpx
import pytest
from helpers.serving import served

import statekit as sk
from statekit.ports import check_bindable, ephemeral_range, free_port
from statekit.serve.auth import is_loopback
from statekit.serve.client import ServingClient
from statekit.serve.cluster import ServingCluster
from statekit.serve.rest import Server, check_host, create_app

WAIT = 60.0  # seconds a wait on a condition may last at most (each ends long before)


def _why_no_ipv6_loopback() -> str | None:
    """Why this machine cannot listen on ::1 (None when it can)."""
    if not socket.has_ipv6:
        return "this Python has no IPv6 (socket.has_ipv6 is False)"
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as sock:
            sock.bind(("::1", 0))
    except OSError as exc:
        return f"this machine cannot bind ::1 ({exc})"
    return None


pytestmark = pytest.mark.skipif(_why_no_ipv6_loopback() is not None,
                                reason=str(_why_no_ipv6_loopback()))


def test_ipv6_loopback_is_loopback_and_its_ports_are_picked_on_ipv6():
    assert is_loopback("::1") and not is_loopback("::")
    # taken as written, or bracketed as in a URL; no allow_remote needed on loopback
    assert check_host("::1", allow_remote=False) == "::1"
    assert check_host("[::1]", allow_remote=False) == "::1"
    assert check_bindable("::1") == "::1"
    port = free_port("::1")
    low, high = ephemeral_range()
    assert not low <= port <= high
    with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as sock:
        sock.bind(("::1", port))  # free on IPv6, where the server will bind it
    assert port != free_port("::1")


@pytest.mark.parametrize("host", ["::2", "2001:db8::1", "[2001:db8::1]"])
def test_an_ipv6_address_of_no_interface_here_is_named_with_what_is_accepted(host):
    bare = host.strip("[]")
    with pytest.raises(sk.BadArgument) as caught:
        check_host(host, allow_remote=False)
    assert str(caught.value) == (f"bad host: {bare!r}; accepted: a loopback address such as "
                                 f"127.0.0.1 or ::1 (pass allow_remote=True to listen on other "
                                 f"interfaces)")
    with pytest.raises(sk.BadArgument) as caught:
        check_host(host, allow_remote=True)
    said = str(caught.value)
    assert said.startswith(f"bad host: {bare!r}; accepted: an IPv4 or IPv6 address of this "
                           f"machine or a name that resolves to one, e.g. 127.0.0.1 or ::1, or "
                           f"0.0.0.0 or :: for every interface ("), said
    assert "Errno" not in said and "gaierror" not in said, said


def test_a_cluster_on_ipv6_loopback_gets_bracketed_urls_and_no_token(broker, topic_name):
    cluster = ServingCluster(broker, topic_name, instances=2, host="::1")
    cluster.stop()  # built (its arguments checked and ports picked), never started
    assert cluster.host == "::1" and cluster.security.token is None
    for url in [*cluster.urls.values(), *cluster.control_urls.values()]:
        assert url.startswith("http://[::1]:"), url
        port = int(url.rsplit(":", 1)[1])
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as sock:
            sock.bind(("::1", port))


def test_an_instance_served_on_ipv6_loopback_answers_there(hand_log, broker, tmp_path):
    with served(hand_log, broker, tmp_path) as running:
        instance, _ = running["i0"]
        port = free_port("::1")
        url = f"http://[::1]:{port}"
        router = ServingClient({"i0": url}, local=instance)
        server = Server(create_app(instance, router), "::1", port).start()
        try:
            assert server.url == url and server.security.token is None
            assert httpx.get(f"{url}/health").json() == {"status": "ok", "instance": "i0"}
            # statekit's own client over [::1]: a lookup of each partition's key
            with ServingClient({"i0": url}) as client:
                for p in hand_log.players:
                    rows = client.get(hand_log.key(p)).rows
                    assert [row["count"] for row in rows] == [1], rows
            # a plain socket of the IPv6 family reaches it
            with socket.create_connection(("::1", port), timeout=WAIT) as sock:
                sock.sendall(b"GET /health HTTP/1.1\r\nHost: [::1]\r\n"
                             b"Connection: close\r\n\r\n")
                answer = b""
                while chunk := sock.recv(65536):
                    answer += chunk
            head, _, body = answer.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200 OK\r\n"), answer
            assert json.loads(body)["instance"] == "i0"
        finally:
            server.stop()
