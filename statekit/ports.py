"""Free TCP ports for the servers statekit starts: the broker, serving instances, Spark Connect.

A port is picked here and bound later by another process, so between the two anyone may take
it. The usual pick, binding port 0, gets a port from the kernel's *ephemeral* range
(``/proc/sys/net/ipv4/ip_local_port_range``, 32768–60999 on Linux), the same range the kernel
gives every outgoing connection its local port from: on a machine busy with Kafka clients and
Spark, one of those took a serving instance's port before it bound it ("address already in
use"). ``free_port`` picks at random outside that range instead, where only a program that
asks for a port by number gets one, checks that it can bind it now, and never hands out the
same port twice in one process.

Example:
    >>> port = free_port()
    >>> low, high = ephemeral_range()
    >>> not low <= port <= high and port != free_port()
    True
"""

from __future__ import annotations

import contextlib
import errno
import random
import socket
import threading
from pathlib import Path

from statekit.errors import BadArgument

#: where Linux keeps the range it picks outgoing connections' local ports from
EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
#: the range when the file is not there (Linux's default; IANA's is 49152–65535)
DEFAULT_EPHEMERAL = (32768, 60999)
#: the lowest port picked: below it lie the well-known and most registered services' ports
LOWEST = 10_000
_TRIES = 200

_handed_out: set[int] = set()
_lock = threading.Lock()


def ephemeral_range(path: Path = EPHEMERAL_RANGE_FILE) -> tuple[int, int]:
    """The kernel's range of ports for outgoing connections (inclusive), or Linux's default.

    Example:
        >>> low, high = ephemeral_range(Path("/nonexistent"))
        >>> (low, high)
        (32768, 60999)
    """
    try:
        low, high = (int(part) for part in path.read_text().split())
    except (OSError, ValueError):
        return DEFAULT_EPHEMERAL
    return (low, high) if 0 < low <= high <= 65535 else DEFAULT_EPHEMERAL


def candidate_ranges(ephemeral: tuple[int, int]) -> list[range]:
    """The port ranges ``free_port`` picks from: from ``LOWEST`` up to 65535, without
    ``ephemeral``.

    Example:
        >>> candidate_ranges((32768, 60999))
        [range(10000, 32768), range(61000, 65536)]
        >>> candidate_ranges((1024, 65535))
        []
    """
    low, high = ephemeral
    ranges = [range(LOWEST, min(low, 65536)), range(max(high + 1, LOWEST), 65536)]
    return [r for r in ranges if len(r)]


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that nobody listens on now, outside the ephemeral range and not
    handed out before by this process (the kernel's own pick when none such can be bound).
    The port is free on each address ``host`` resolves to, IPv4 or IPv6, as the server will
    bind it (``listen_addresses``); a host this machine cannot listen on is a BadArgument
    (``check_bindable``'s)."""
    addresses = _resolved(host, "host")
    ranges = candidate_ranges(ephemeral_range())
    with _lock:
        for _ in range(_TRIES if ranges else 0):
            span = random.choices(ranges, weights=[len(r) for r in ranges])[0]
            port = random.choice(span)
            if port not in _handed_out and _bindable(addresses, port):
                _handed_out.add(port)
                return port
        for _ in range(_TRIES):
            with contextlib.ExitStack() as held:
                port = _bind(addresses, 0, held)
            if port not in _handed_out and _bindable(addresses, port):
                _handed_out.add(port)
                return port
    raise OSError(errno.EADDRINUSE, f"no free port on {host!r} after {2 * _TRIES} tries")


def listen_addresses(host: str) -> list[tuple[socket.AddressFamily, tuple]]:
    """The addresses a server listening on ``host`` binds, as asyncio's ``create_server``
    (uvicorn's) binds them: each one ``host`` resolves to (``socket.getaddrinfo``), with its
    family; ``""`` is every interface of both families. An unknown name raises
    ``socket.gaierror`` (``check_bindable`` words it).

    Example:
        >>> [(family.name, address) for family, address in listen_addresses("::1")]
        [('AF_INET6', ('::1', 0, 0, 0))]
    """
    found = socket.getaddrinfo(host or None, 0, type=socket.SOCK_STREAM,
                               flags=socket.AI_PASSIVE)
    return list(dict.fromkeys((family, address) for family, _, _, _, address in found))


def check_bindable(host: str, what: str = "host") -> str:
    """``host`` when a listener can bind it here (each address it resolves to, IPv4 or IPv6,
    as ``free_port`` binds it), else BadArgument naming it, what is accepted and why the
    system refused it.

    Example:
        >>> check_bindable("127.0.0.1")
        '127.0.0.1'
        >>> check_bindable("my laptop")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        statekit.errors.BadArgument: bad host: 'my laptop'; accepted: an IPv4 or IPv6 address of \
this machine or a name that resolves to one, e.g. 127.0.0.1 or ::1, or 0.0.0.0 or :: for every \
interface (...)
    """
    addresses = _resolved(host, what)
    try:
        with contextlib.ExitStack() as held:
            _bind(addresses, 0, held)
    except OSError as exc:
        raise _refused(host, what, exc) from None
    return host


def _resolved(host: str, what: str) -> list[tuple[socket.AddressFamily, tuple]]:
    """``listen_addresses(host)``, or BadArgument when ``host`` resolves to none."""
    try:
        return listen_addresses(host)
    except (OSError, TypeError, ValueError) as exc:  # OSError: socket.gaierror too;
        raise _refused(host, what, exc) from None     # ValueError: UnicodeError too


def _refused(host: object, what: str, exc: Exception) -> BadArgument:
    reason = getattr(exc, "strerror", None) or str(exc)
    return BadArgument(what, host, f"an IPv4 or IPv6 address of this machine or a name that "
                                   f"resolves to one, e.g. 127.0.0.1 or ::1, or 0.0.0.0 or :: "
                                   f"for every interface ({reason})")


def _bind(addresses: list[tuple[socket.AddressFamily, tuple]], port: int,
          held: contextlib.ExitStack) -> int:
    """Bind a listener of ``port`` on each of ``addresses``, held open by ``held`` (IPv6 ones
    IPv6 only, and a family this machine makes no sockets of skipped, as asyncio does); the
    port the first one bound (port 0: the kernel's pick). OSError when any bind fails or
    none was made."""
    first = None
    for family, address in addresses:
        try:
            sock = held.enter_context(socket.socket(family, socket.SOCK_STREAM))
        except OSError:  # e.g. IPv6 disabled: asyncio's create_server skips it too
            continue
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind((address[0], port, *address[2:]))  # IPv6: its flow and scope kept
        first = first or sock.getsockname()[1]
    if first is None:
        raise OSError(errno.EAFNOSUPPORT, "this machine makes no sockets of its family")
    return first


def _bindable(addresses: list[tuple[socket.AddressFamily, tuple]], port: int) -> bool:
    """Whether a listener could bind ``port`` on each of ``addresses`` now (no SO_REUSEADDR:
    a port still in TIME_WAIT counts as taken)."""
    try:
        with contextlib.ExitStack() as held:
            _bind(addresses, port, held)
    except OSError:
        return False
    return True
