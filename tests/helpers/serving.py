"""Serving instances behind real REST servers on loopback, over a hand-written changelog
(``handlog``): what the serving tests query."""

from __future__ import annotations

import contextlib

from helpers.handlog import HandLog
from statekit.ports import free_port
from statekit.serve.client import ServingClient
from statekit.serve.instance import ServingInstance
from statekit.serve.rest import Server, create_app
from statekit.serve.routing.assignment import assign


@contextlib.contextmanager
def served(log: HandLog, broker, folder, names=("i0",), *, client_timeout: float = 5.0,
           global_tables=()):
    """Instances ``names`` (partitions round-robin, no standbys), each behind its own server
    and router, caught up with the log: name -> (instance, server URL)."""
    plan = assign(log.schema.partitions, list(names), 0)
    urls = {name: f"http://127.0.0.1:{free_port('127.0.0.1')}" for name in names}
    out = {}
    with contextlib.ExitStack() as stack:
        for name in names:
            instance = ServingInstance(name, broker, log.topic, folder, plan, schema=log.schema,
                                       global_tables=global_tables).start()
            stack.callback(instance.close)
            router = ServingClient(urls, local=instance, timeout=client_timeout)
            port = int(urls[name].rsplit(":", 1)[1])
            server = Server(create_app(instance, router), port=port).start()
            stack.callback(server.stop)
            out[name] = instance, urls[name]
        for instance, _ in out.values():
            instance.wait_ready(60)
            for p in instance.roles:
                assert instance.tail.wait_for_batch(p, log.batch, 60).batch == log.batch
        yield out


def one_response(sock) -> tuple[bytes, bytes]:
    """One whole HTTP response read from a raw socket: its head and its ``Content-Length``
    bytes of body. A response may arrive in several segments; reading exactly one keeps the
    next response from being read mid-body."""
    import re

    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"closed before a whole answer: {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(re.search(rb"(?im)^content-length: *([0-9]+)", head).group(1))
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, f"closed within an answer: {data + body!r}"
        body += chunk
    return head, body
