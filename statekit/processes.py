"""Child processes that never outlive the process that started them, and the process table.

Every process statekit starts (the embedded broker, drill workers, serving
instances) is started through ``spawn``: on Linux the kernel sends the child
SIGTERM the moment its parent dies, however it dies (``kill -9`` included,
``PR_SET_PDEATHSIG``), so a crashed notebook kernel or test run leaves no orphan
behind. ``stop`` ends one politely, then firmly.

``available_cpus`` tells how many CPUs this process may run on, and
``processes_supported`` whether worker processes handed a socket (a large restore's)
run here at all.

``process_table`` reads Linux's process table once (pid, parent, state, CPU seconds,
command line of every process, from ``/proc/<pid>/stat`` and ``cmdline``); ``descendants``
walks it from a root and ``is_alive`` tells a running process from an ended one (gone, or a
zombie not yet reaped). The parent comes from each process's own ``stat``, never from
``/proc/<pid>/task/<tid>/children``: that file lists a thread's children only while the
thread lives, so a walk of a JVM's threads misses the children of a thread that is exiting
as it is read (the kernel moves them to another thread afterwards; its documentation calls
the file reliable only for stopped processes).

Example:
    >>> proc = spawn([sys.executable, "-c", "import time; time.sleep(60)"])
    >>> proc.pid in descendants(os.getpid()) and is_alive(proc.pid)
    True
    >>> stop(proc, timeout=5)
    >>> proc.poll() is not None and not is_alive(proc.pid)
    True
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

PR_SET_PDEATHSIG = 1
PROC = Path("/proc")
#: states of ``/proc/<pid>/stat`` of a process that has ended (zombie, dead)
ENDED_STATES = frozenset("ZX")


def processes_supported() -> bool:
    """Whether worker processes handed a socket (a restore's) run here: on Linux and macOS
    (``posix``), whose ``subprocess`` hands a worker its end of the socket pair
    (``pass_fds``)."""
    return os.name == "posix"


def available_cpus() -> int:
    """How many CPUs this process may run on (its affinity where the OS tells, else
    ``os.cpu_count()``).

    Example:
        >>> available_cpus() >= 1
        True
    """
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:   # not on Linux
        return os.cpu_count() or 1


def die_with_parent() -> None:  # pragma: no cover - runs in the child, before exec
    """Ask Linux to SIGTERM this process when its parent dies (no-op elsewhere)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def spawn(args: Sequence[str], **popen) -> subprocess.Popen:
    """``subprocess.Popen(args, **popen)`` for a child that dies with this process."""
    if os.name == "posix":
        popen.setdefault("preexec_fn", die_with_parent)
    return subprocess.Popen(list(args), **popen)


def stop(proc: subprocess.Popen, timeout: float = 5.0) -> None:
    """SIGTERM ``proc``, SIGKILL it after ``timeout`` seconds; wait for it. Idempotent."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout)


class ProcessInfo(NamedTuple):
    """One process of the table: what ``/proc/<pid>/stat`` and ``cmdline`` say of it."""

    pid: int
    ppid: int
    state: str
    #: user + system CPU seconds of the process and of its children it has reaped
    cpu_s: float
    #: the arguments joined by spaces ("" for a kernel thread or a zombie)
    cmdline: str


def process_info(pid: int, commands: bool = True) -> ProcessInfo | None:
    """``pid``'s entry of the process table, or None when there is none (ended, not Linux);
    without ``commands`` its ``cmdline`` is left unread ("")."""
    try:
        stat = (PROC / str(pid) / "stat").read_text(errors="replace")
        args = (PROC / str(pid) / "cmdline").read_bytes() if commands else b""
    except OSError:  # ended meanwhile, or no /proc
        return None
    # the command name, in parentheses, may hold spaces and parentheses: split after the last
    fields = stat[stat.rindex(")") + 2:].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return ProcessInfo(pid, int(fields[1]), fields[0],
                       sum(int(x) for x in fields[11:15]) / ticks,
                       args.replace(b"\0", b" ").decode(errors="replace").strip())


def process_table(commands: bool = True) -> dict[int, ProcessInfo]:
    """Every process this user can see: pid → ``ProcessInfo`` (empty where there is no
    ``/proc``). One read of each process, not a consistent snapshot: a process that ends
    while the table is read is left out. Without ``commands`` no command line is read (half
    the reads, for a caller that needs parents and CPU seconds only)."""
    try:
        pids = [int(entry) for entry in os.listdir(PROC) if entry.isdigit()]
    except OSError:
        return {}
    table = {}
    for pid in pids:
        info = process_info(pid, commands)
        if info is not None:
            table[pid] = info
    return table


def descendants(root: int, table: dict[int, ProcessInfo] | None = None) -> list[int]:
    """The pids of ``root``'s children, theirs and so on (``root`` itself left out), from
    ``table`` (default: read now), parents before their children.

    Example:
        >>> descendants(os.getpid(), {}) == []
        True
    """
    table = process_table() if table is None else table
    children: dict[int, list[int]] = {}
    for info in table.values():
        children.setdefault(info.ppid, []).append(info.pid)
    found, todo, seen = [], [root], {root}
    while todo:
        for child in sorted(children.get(todo.pop(0), [])):
            if child not in seen:  # a pid reused while the table was read cannot loop
                seen.add(child)
                found.append(child)
                todo.append(child)
    return found


def is_alive(pid: int) -> bool:
    """True while ``pid`` runs: False once it has ended, reaped or not (a zombie)."""
    info = process_info(pid)
    return info is not None and info.state not in ENDED_STATES
