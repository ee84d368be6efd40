"""The console of the Spark driver JVM statekit starts: everything it prints, less known chatter.

The JVM (and the Python workers whose output Spark passes on through it) write to the
JVM's stdout and stderr. A few of those lines are harmless chatter that a notebook shows
as red stderr under whatever cell runs: the JVM's ``WARNING: Using incubator modules:
jdk.incubator.vector`` (Spark 4's launcher always adds that module), Spark's log-level
banner, and the ``print()`` lines of PySpark's transformWithStateInPandas Python workers.
``KNOWN_NOISE`` names them, once: ``spark_session`` drops them from the JVM's console
(``forward``) and ``make html`` drops them from handouts. Every other line is passed on
as it is, to this process's own stdout or stderr file descriptor (1 or 2), where the JVM
would have written it: a terminal, or in Jupyter the kernel's captured output that shows
under the running cell.

Example:
    >>> harmless("WARNING: Using incubator modules: jdk.incubator.vector")
    True
    >>> harmless("WARNING: Using incubator modules: jdk.incubator.vector, jdk.incubator.foo")
    False
    >>> harmless("26/11/25 05:50:01 ERROR Executor: Exception in task 0.0")
    False
"""

from __future__ import annotations

import contextlib
import os
import re
import threading

#: Harmless lines the JVM and Spark's Python workers print (each pattern matches a whole line,
#: without its line end): the JVM's module warning and Spark's log-level banner at start-up;
#: the prints of PySpark's transformWithState driver-side Python worker
#: (``transform_with_state_driver_worker``), blank lines included.
KNOWN_NOISE = (
    re.compile(r"^WARNING: Using incubator modules: jdk\.incubator\.vector$"),
    re.compile(r'^Setting default log level to "\w+"\.$'),
    re.compile(r"^To adjust logging level use sc\.setLogLevel\(newLevel\)\..*$"),
    re.compile(r"^(Starting )?Streaming TransformWithStateInPandas Python worker\b.*$"),
    re.compile(r"^\s*$"),
)


def harmless(line: str) -> bool:
    """True when ``line`` (without its line end) is one ``KNOWN_NOISE`` names."""
    return any(pattern.match(line) for pattern in KNOWN_NOISE)


def forward(pipe: int, fd: int, name: str) -> threading.Thread:
    """Start a daemon thread that reads the pipe whose read end is file descriptor ``pipe``
    (it closes it) to its end and writes each line that is not ``harmless`` to file
    descriptor ``fd``; returns the thread.

    The thread always drains the pipe (a JVM blocked on a full pipe would stop): a line it
    cannot decode is passed on as it is, and one it cannot write (``fd`` closed) is lost.
    """
    thread = threading.Thread(target=_pump, args=(pipe, fd), name=name, daemon=True)
    thread.start()
    return thread


def _pump(pipe: int, fd: int) -> None:
    with open(pipe, "rb") as lines:
        for raw in iter(lines.readline, b""):
            if harmless(raw.decode("utf-8", "replace").rstrip("\r\n")):
                continue
            with contextlib.suppress(OSError):
                _write_all(fd, raw)


def _write_all(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data):]
