"""Restore worker processes: partitions consumed, decoded and written off the calling
interpreter, their listener events sent back to it.

``restore_stores(consumers="processes")`` splits the partitions to read into groups
(``partition_groups``: one per partition, up to ``worker_count``: two per available
CPU) and starts one worker process per group (``RestoreWorkers``). Each worker opens its partitions'
RocksDB stores (each a database of its own), reads each partition with a consumer of
its own, writes and checkpoints the stores as the thread mode does, closes them, and
sends every listener event back over a pipe; the parent hears them one at a time and
re-opens the stores once the workers are done. A worker's error is raised in the
parent with its type and message (``rebuilt_error``); a worker that dies (``kill -9``)
raises ``RestoreWorkerLost``; either way the other workers are stopped and none is
left running.

Each worker is a fresh interpreter (``start_worker``: spawned, never forked, as the
caller is often a Jupyter kernel with a JVM and threads) that imports the restore code
only: not, as multiprocessing's ``spawn`` and ``forkserver`` do, the caller's main
module, whose top level a script may not guard with ``if __name__ == "__main__":``
(it would run again in every worker). The job and the events go over a socket pair
as multiprocessing's pickled messages. On Linux a worker dies with its parent.

Example:
    >>> partition_groups({0: 500, 1: 300, 2: 300}, workers=2)   # the largest first
    [[0], [1, 2]]
    >>> partition_groups({0: 10, 1: 10}, workers=8)             # at most one per partition
    [[0], [1]]
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import pickle
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait

from statekit.errors import RestoreWorkerLost, StatekitError
from statekit.model.connection import KafkaConnection
from statekit.model.query_spec import QuerySpec
from statekit.model.store_schema import PartShape
from statekit.processes import die_with_parent
from statekit.restore.listener import RestoreListener

#: seconds the other workers get to stop at their next chunk (and close their stores)
#: after one failed, before they are terminated
STOP_GRACE_S = 10.0


#: worker processes per available CPU at most: a worker per partition restored 3 partitions
#: of 1M records on 2 CPUs in 3.3 s against 4.1 s for 2 workers (one holding two partitions
#: behind one interpreter's lock), the OS sharing the CPUs out
WORKERS_PER_CPU = 2


def worker_count(partitions: int, cpus: int) -> int:
    """How many worker processes restore ``partitions`` partitions on ``cpus`` CPUs: one per
    partition, at most ``WORKERS_PER_CPU`` per CPU.

    Example:
        >>> worker_count(3, 2), worker_count(8, 2), worker_count(1, 4)
        (3, 4, 1)
    """
    return max(1, min(partitions, WORKERS_PER_CPU * cpus))


def partition_groups(sizes: Mapping[int, int], workers: int) -> list[list[int]]:
    """``sizes``' partitions (partition → records to read) split into at most ``workers``
    groups of about equal records: the largest partition first into the lightest group.
    Each group is sorted; groups are ordered by their first partition."""
    count = max(1, min(workers, len(sizes)))
    groups: list[list[int]] = [[] for _ in range(count)]
    loads = [0] * count
    for p in sorted(sizes, key=lambda q: (-sizes[q], q)):
        lightest = loads.index(min(loads))
        groups[lightest].append(p)
        loads[lightest] += sizes[p]
    return sorted((sorted(g) for g in groups if g), key=lambda g: g[0])


@dataclass(frozen=True)
class WorkerJob:
    """What one worker process restores: ``ranges`` (partition → [start, end) offsets) of
    ``topic`` into the stores ``<directory>/<store_name>/<partition>``."""

    kafka: KafkaConnection
    topic: str
    spec: QuerySpec | PartShape
    store_name: str
    directory: str
    ranges: dict[int, tuple[int, int]]
    to_batch: int | None
    chunk: int

    def describe(self) -> str:
        return f"{self.topic!r} partition{'s' if len(self.ranges) > 1 else ''} " \
               f"{', '.join(map(str, sorted(self.ranges)))}"


class RemoteTraceback(Exception):
    """The traceback of an error raised in a worker process (its ``__cause__`` here)."""

    def __str__(self) -> str:
        return self.args[0] if self.args else ""


class RestoreWorkers:
    """One worker process per job (``start_worker``), and their events (``events``), as a
    context manager: leaving it stops (and if need be terminates) every worker still
    running, and waits for it."""

    def __init__(self, jobs: Sequence[WorkerJob]):
        self._workers: list[tuple[subprocess.Popen, Connection, WorkerJob]] = []
        try:
            for job in jobs:
                self._workers.append((*start_worker(job), job))
        except BaseException:
            self.close()
            raise

    def events(self) -> Iterator[tuple]:
        """Every worker's listener events as they come: ``("batch", partition, last
        offset, records)`` and ``("end", partition, total)``, each partition's in order,
        until every worker is done. Raises a worker's error (with its type and message),
        or ``RestoreWorkerLost`` for a worker that ended without saying it was done."""
        running = {channel: (process, job) for process, channel, job in self._workers}
        while running:
            for channel in wait(list(running)):
                process, job = running[channel]
                try:
                    message = channel.recv()
                except (EOFError, OSError):
                    raise self._lost(process, job) from None
                if message[0] == "done":
                    del running[channel]
                elif message[0] == "error":
                    raise rebuilt_error(message[1], f"the restore worker process (pid "
                                                    f"{process.pid}) of {job.describe()}")
                else:
                    yield message

    @staticmethod
    def _lost(process: subprocess.Popen, job: WorkerJob) -> RestoreWorkerLost:
        try:
            code = process.wait(5)
        except subprocess.TimeoutExpired:
            code = None
        if code is not None and code < 0:
            how = f"was killed by signal {signal.Signals(-code).name}"
        elif code is None:
            how = "closed its pipe but is still running"
        else:
            how = f"exited with code {code} before it finished (its error output tells why)"
        return RestoreWorkerLost(
            f"the restore worker process (pid {process.pid}) of {job.describe()} {how}; its "
            f"stores keep what their checkpoints say: restore again to go on")

    def close(self) -> None:
        """Ask every worker still running to stop at its next chunk (it closes its stores);
        wait ``STOP_GRACE_S`` for them, reading and dropping what they still send; then
        (also when that wait is interrupted) terminate, then kill the rest. Idempotent."""
        workers, self._workers = self._workers, []
        try:
            for process, channel, _ in workers:
                if process.poll() is None:
                    with contextlib.suppress(OSError):   # it is gone already
                        channel.send(("stop",))
            deadline = time.monotonic() + STOP_GRACE_S
            listening = [channel for _, channel, _ in workers]
            while listening and time.monotonic() < deadline:
                for channel in wait(listening, timeout=max(0.0, deadline - time.monotonic())):
                    try:
                        channel.recv()   # dropped: a worker blocked on a full pipe goes on
                    except (EOFError, OSError):   # it exited (or closed its end to exit)
                        listening.remove(channel)
        finally:
            for process, channel, _ in workers:
                if process.poll() is None:
                    process.terminate()
                    try:
                        process.wait(5)
                    except subprocess.TimeoutExpired:
                        process.kill()
                process.wait()
                channel.close()

    def __enter__(self) -> RestoreWorkers:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def start_worker(job: WorkerJob) -> tuple[subprocess.Popen, Connection]:
    """A fresh interpreter (``sys.executable``, with this one's ``sys.path``, as
    multiprocessing's ``spawn`` gives it) running ``serve`` on one end of a socket pair,
    and the other end, over which ``job`` is sent. It imports the restore code, not the
    caller's main module; on Linux it dies with this process."""
    here, there = socket.socketpair()
    paths = [p or os.getcwd() for p in sys.path]
    try:
        process = subprocess.Popen(
            [sys.executable, "-c", _WORKER_MAIN, json.dumps(paths), str(there.fileno())],
            pass_fds=(there.fileno(),), stdin=subprocess.DEVNULL)
    except BaseException:
        here.close()
        raise
    finally:
        there.close()   # the worker holds its end: its death reads as end of file here
    channel = Connection(here.detach())
    with contextlib.suppress(OSError):   # it died already: events() names it
        channel.send(job)
    return process, channel


#: what a worker's interpreter runs: the parent's import path, then ``serve``
_WORKER_MAIN = ("import json, sys; sys.path[:] = json.loads(sys.argv[1]); "
                "from statekit.restore.worker import serve; serve(int(sys.argv[2]))")


class _Forward(RestoreListener):
    """The worker's listener: each event sent to the parent (one at a time: a lock)."""

    def __init__(self, channel: Connection):
        self.channel, self.lock = channel, threading.Lock()

    def on_batch_restored(self, partition: int, batch_end_offset: int, n: int) -> None:
        with self.lock:
            self.channel.send(("batch", partition, batch_end_offset, n))

    def on_restore_end(self, partition: int, total: int) -> None:
        with self.lock:
            self.channel.send(("end", partition, total))


def serve(fd: int) -> None:  # pragma: no cover - runs in the worker process
    """A worker process's body: the job from the socket ``fd``, restored
    (``readers.restore_group``) while each listener event is sent back, then
    ``("done",)``, or ``("error", ...)``, once its stores are closed. Anything from
    the parent (a stop, or its end) stops it at the next chunk, unfinished."""
    die_with_parent()
    channel = Connection(fd)
    try:
        job = channel.recv()
        from statekit.restore.readers import restore_group

        restore_group(job, _Forward(channel), stopped=channel.poll)
    except EOFError:
        return   # the parent is gone before it said what to do
    except BaseException as exc:   # every kind goes to the parent, which raises it
        message = ("error", error_payload(exc))
    else:
        message = ("done",)
    try:
        channel.send(message)
    except OSError:
        pass   # the parent is gone or stopped listening: nobody to tell
    finally:
        channel.close()


def error_payload(exc: BaseException) -> dict:
    """What a worker sends of its error: the pickled error where it pickles back, else its
    type's name and message; its notes and traceback text either way."""
    try:
        pickled = pickle.dumps(exc)
        pickle.loads(pickled)
    except Exception:   # e.g. an error whose __init__ takes other arguments than its args
        pickled = None
    return {"pickled": pickled, "module": type(exc).__module__,
            "type": type(exc).__qualname__, "message": str(exc),
            "notes": list(getattr(exc, "__notes__", ())),
            "traceback": "".join(traceback.format_exception(exc))}


def rebuilt_error(payload: dict, where: str) -> BaseException:
    """The worker's error again, of the same type with the same message (re-created by
    type name where it did not pickle), noting ``where`` it was raised; its traceback
    there is its ``__cause__``.

    Example:
        >>> from statekit.errors import BadArgument
        >>> err = rebuilt_error(error_payload(BadArgument("chunk", 0, "a whole number")),
        ...                     "worker 1")
        >>> type(err).__name__, str(err), err.__notes__
        ('BadArgument', 'bad chunk: 0; accepted: a whole number', ['(raised in worker 1)'])
    """
    error = None
    if payload["pickled"] is not None:
        try:
            error = pickle.loads(payload["pickled"])
        except Exception:
            error = None
    if error is None:
        error = _by_type_name(payload["module"], payload["type"], payload["message"])
        for note in payload["notes"]:
            error.add_note(note)
    error.add_note(f"(raised in {where})")
    error.__cause__ = RemoteTraceback(payload["traceback"])
    return error


def _by_type_name(module: str, qualname: str, message: str) -> BaseException:
    """An error of the type ``module.qualname`` whose ``str`` is ``message``, made without
    its ``__init__`` (which may take other arguments); a StatekitError naming the type
    where that type cannot be imported here."""
    try:
        found: object = importlib.import_module(module)
        for part in qualname.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError):
        found = None
    if not (isinstance(found, type) and issubclass(found, BaseException)):
        return StatekitError(f"{module}.{qualname}: {message}")
    error = found.__new__(found)
    error.args = (message,)
    return error
