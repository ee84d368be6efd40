"""statekit.ports: free ports outside the kernel's ephemeral range, never handed out twice."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from statekit import ports


def test_ports_are_outside_the_ephemeral_range_bindable_and_distinct():
    low, high = ports.ephemeral_range()
    picked = [ports.free_port() for _ in range(200)]
    assert len(set(picked)) == len(picked)
    assert all(ports.LOWEST <= port <= 65535 and not low <= port <= high for port in picked)
    for port in picked[:20]:   # a listener can bind each now
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_a_port_someone_listens_on_is_not_handed_out(monkeypatch: pytest.MonkeyPatch):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        # only the busy port and one free one to pick from: the free one is picked every time
        choices = iter([taken] * 5 + [taken + 1 if taken < 65535 else taken - 1])
        monkeypatch.setattr(ports.random, "choice", lambda span: next(choices))
        monkeypatch.setattr(ports, "_handed_out", set())
        assert ports.free_port() != taken


def test_no_room_outside_the_range_falls_back_to_the_kernels_pick(
        monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(ports, "ephemeral_range", lambda: (1024, 65535))
    port = ports.free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))


@pytest.mark.parametrize("text", ["", "abc def", "40000", "60999 32768", "0 100", "1 70000",
                                  "\xff\xfe"])
def test_an_unreadable_or_impossible_range_file_means_linuxs_default(tmp_path: Path, text: str):
    path = tmp_path / "ip_local_port_range"
    path.write_text(text, encoding="latin-1")
    assert ports.ephemeral_range(path) == ports.DEFAULT_EPHEMERAL


@pytest.mark.parametrize("text", ["32768\t60999\n", " 32768 60999", "32768    60999"])
def test_the_range_file_as_linux_writes_it(tmp_path: Path, text: str):
    path = tmp_path / "ip_local_port_range"
    path.write_text(text)
    assert ports.ephemeral_range(path) == (32768, 60999)


def test_candidate_ranges_leave_out_exactly_the_ephemeral_range():
    ranges = ports.candidate_ranges((20000, 50000))
    assert ranges == [range(ports.LOWEST, 20000), range(50001, 65536)]
    assert ports.candidate_ranges((5000, 8000)) == [range(ports.LOWEST, 65536)]
