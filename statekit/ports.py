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
    handed out before by this process (the kernel's own pick when none such can be bound)."""
    ranges = candidate_ranges(ephemeral_range())
    with _lock:
        for _ in range(_TRIES if ranges else 0):
            span = random.choices(ranges, weights=[len(r) for r in ranges])[0]
            port = random.choice(span)
            if port not in _handed_out and _bindable(host, port):
                _handed_out.add(port)
                return port
        while True:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                sock.bind((host, 0))
                port = sock.getsockname()[1]
            if port not in _handed_out:
                _handed_out.add(port)
                return port


def check_bindable(host: str, what: str = "host") -> str:
    """``host`` when a listener can bind it here (as ``free_port`` binds: IPv4), else
    BadArgument naming it, what is accepted and why the system refused it.

    Example:
        >>> check_bindable("127.0.0.1")
        '127.0.0.1'
        >>> check_bindable("my laptop")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        statekit.errors.BadArgument: bad host: 'my laptop'; accepted: an IPv4 address of this \
machine or a name that resolves to one, e.g. 127.0.0.1, or 0.0.0.0 for every interface (...)
    """
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((host, 0))
    except (OSError, TypeError, UnicodeError) as exc:  # OSError: socket.gaierror too
        reason = getattr(exc, "strerror", None) or str(exc)
        raise BadArgument(what, host, f"an IPv4 address of this machine or a name that "
                                      f"resolves to one, e.g. 127.0.0.1, or 0.0.0.0 for every "
                                      f"interface ({reason})") from None
    return host


def _bindable(host: str, port: int) -> bool:
    """Whether a listener could bind ``port`` on ``host`` now (no SO_REUSEADDR: a port still
    in TIME_WAIT counts as taken)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True
