"""A real Spark standalone cluster on this machine, from the pip-installed PySpark's own jars.

``local_cluster()`` starts one master and ``workers`` workers, each a JVM of its own
(``bin/spark-class org.apache.spark.deploy.master.Master`` and ``...deploy.worker.Worker``,
exactly what ``sbin/start-master.sh`` and ``start-worker.sh`` run, minus the daemonising),
bound to 127.0.0.1 on ports the operating system picks, with their logs and the workers'
scratch space in a temporary directory. It returns once every worker has registered with
the master. A session on ``cluster.master_url`` then runs its tasks in executor JVMs that
the workers start, each with Python workers of its own: the same code path as a cluster of
many machines, on one.

The master and the workers are started through ``statekit.processes.spawn``: they get
SIGTERM when the Python process that started them dies, however it dies (``kill -9``
included), and a worker that stops takes its executors with it (Spark's own shutdown
hook; an executor whose worker is gone exits). ``stop()`` (or leaving the ``with`` block,
normally or by an exception) stops workers, then the master, and deletes the temporary
directory. Linux delivers that signal when the *thread* that started the cluster ends, so
start it from the main thread or from a thread that outlives its use.

A cluster needs a SparkSession of its own (``spark_session(cluster.master_url)``); one
Python process holds one SparkContext, so a process that already runs a ``local[2]`` session
must drive the cluster from a child process.

Example:
    >>> with local_cluster(workers=2, cores=1, memory="1g") as cluster:   # doctest: +SKIP
    ...     spark = spark_session(cluster.master_url, conf=cluster.session_conf())
    ...     spark.range(10).count()
    10
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from subprocess import DEVNULL, STDOUT, Popen, run

from statekit.errors import BadArgument, ClusterStartError, StatekitError
from statekit.processes import ENDED_STATES, process_table, spawn, stop
from statekit.validate import whole_number

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
#: Heap of the master and worker JVMs themselves (they only schedule; executors do the work).
DAEMON_MEMORY = "256m"
_MEMORY = re.compile(r"^[1-9][0-9]*[mg]$")
_MASTER_URL = re.compile(r"Starting Spark master at (spark://\S+)")
_WEB_UI = re.compile(r"(?:MasterWebUI|Bound MasterWebUI).*?(http://[^\s,]+)")


def spark_class() -> Path:
    """``bin/spark-class`` of the pip-installed PySpark."""
    import pyspark

    path = Path(pyspark.__file__).resolve().parent / "bin" / "spark-class"
    if not path.is_file():
        raise StatekitError(f"no {path}: this PySpark has no launcher scripts (a pip-installed "
                            f"pyspark ships them; pyspark-client does not)")
    return path


def _spark_home() -> str:
    """SPARK_HOME for the daemons: the one set, else the mirror statekit's sessions use."""
    from statekit.spark.worker_home import worker_spark_home

    return os.environ.get("SPARK_HOME") or worker_spark_home() or str(spark_class().parents[1])


class LocalCluster:
    """A standalone master and its workers on 127.0.0.1: see ``local_cluster``."""

    def __init__(self, workers: int = 2, cores: int = 1, memory: str = "1g",
                 executor_memory: str = "512m", timeout: float = 240.0,
                 unshared: Sequence[str | os.PathLike] = ()):
        self.workers = whole_number(workers, "number of workers", minimum=1)
        self.cores = whole_number(cores, "cores per worker", minimum=1)
        for what, value in (("worker memory", memory), ("executor memory", executor_memory)):
            if not isinstance(value, str) or not _MEMORY.match(value):
                raise BadArgument(what, value, "a size like '512m' or '1g'")
        self.memory, self.executor_memory, self.timeout = memory, executor_memory, timeout
        #: folders each worker (with its executors) sees as an empty disk of its own
        self.unshared = [_absolute_folder(folder) for folder in unshared]
        if self.unshared:
            require_unshare()
        #: the temporary directory holding logs (``logs/``) and the workers' scratch (``work/``)
        self.directory: Path | None = None
        #: ``spark://127.0.0.1:PORT`` once started
        self.master_url: str | None = None
        #: the master's web UI (``/json`` there lists workers and applications)
        self.web_url: str | None = None
        self._master: Popen | None = None
        self._workers: list[Popen] = []
        self._logs: list = []

    # --- lifecycle ---------------------------------------------------------------------
    def start(self) -> LocalCluster:
        """Start the master, then the workers; return once all workers are ALIVE."""
        if self._master is not None:
            return self
        self.directory = Path(tempfile.mkdtemp(prefix="statekit-cluster-"))
        (self.directory / "logs").mkdir()
        (self.directory / "work").mkdir()
        try:
            self._master = self._daemon("master", [MASTER_CLASS, "--host", "127.0.0.1",
                                                   "--port", "0", "--webui-port", "0"])
            deadline = time.monotonic() + self.timeout
            self.master_url = self._wait_for_log("master", _MASTER_URL, self._master, deadline)
            web_url = self._wait_for_log("master", _WEB_UI, self._master, deadline)
            self.web_url = web_url.replace("//localhost:", "//127.0.0.1:")
            for i in range(self.workers):
                self._workers.append(self._daemon(f"worker-{i}", [
                    WORKER_CLASS, self.master_url, "--host", "127.0.0.1", "--port", "0",
                    "--webui-port", "0", "--cores", str(self.cores), "--memory", self.memory,
                    "--work-dir", str(self.directory / "work")], prefix=self._private_mounts()))
            self._wait_for_workers(deadline)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, timeout: float = 15.0) -> None:
        """Stop the workers (and so their executors), then the master; delete the temp dir."""
        for proc in self._workers:
            with contextlib.suppress(OSError):
                proc.terminate()
        for proc in [*self._workers, self._master]:
            if proc is not None:
                stop(proc, timeout)
        for log in self._logs:
            log.close()
        self._master, self._workers, self._logs = None, [], []
        if self.directory is not None:
            # An executor JVM may outlive its worker by a moment; wait for it, then clean up.
            deadline = time.monotonic() + timeout
            while self.running_processes() and time.monotonic() < deadline:
                time.sleep(0.2)
            shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # --- what runs -----------------------------------------------------------------------
    def status(self) -> dict:
        """The master's own account (its web UI's ``/json``): workers, apps, cores in use."""
        if self.web_url is None:
            raise StatekitError("the cluster is not running (call start() first)")
        with urllib.request.urlopen(f"{self.web_url}/json", timeout=5) as answer:
            return json.load(answer)

    def alive_workers(self) -> list[dict]:
        """The workers the master counts as ALIVE (id, host, port, cores, memory, ...)."""
        return [w for w in self.status().get("workers", []) if w.get("state") == "ALIVE"]

    def running_processes(self) -> list[int]:
        """Pids of this cluster's processes still running: master, workers, executors and
        their Python workers (any process whose command line or working directory lies in
        the cluster's temporary directory). Empty once the cluster has stopped."""
        if self.directory is None:
            return []
        tag, found = str(self.directory), []
        for pid, info in process_table().items():
            if pid == os.getpid() or info.state in ENDED_STATES:
                continue
            cwd = ""
            with contextlib.suppress(OSError):
                cwd = os.readlink(f"/proc/{pid}/cwd")
            if tag in info.cmdline or cwd.startswith(tag):
                found.append(pid)
        return sorted(found)

    def session_conf(self) -> dict[str, str]:
        """Settings for ``spark_session(master_url, conf=...)``: executors sized to fit."""
        return {"spark.executor.memory": self.executor_memory,
                "spark.executor.cores": str(self.cores),
                "spark.cores.max": str(self.workers * self.cores),
                "spark.driver.memory": "1g",
                "spark.driver.host": "127.0.0.1",
                "spark.driver.bindAddress": "127.0.0.1"}

    # --- internals -----------------------------------------------------------------------
    def _daemon(self, name: str, args: list[str], prefix: Sequence[str] = ()) -> Popen:
        assert self.directory is not None
        env = {**os.environ, "SPARK_HOME": _spark_home(), "SPARK_LOCAL_IP": "127.0.0.1",
               "SPARK_LOG_DIR": str(self.directory / "logs"),
               "SPARK_WORKER_DIR": str(self.directory / "work"),
               "SPARK_DAEMON_MEMORY": DAEMON_MEMORY,
               # tags the JVM with the cluster's directory (see running_processes)
               "SPARK_DAEMON_JAVA_OPTS": f"-Dstatekit.cluster={self.directory}"}
        log = open(self.directory / "logs" / f"{name}.log", "wb")  # noqa: SIM115 - closed in stop
        self._logs.append(log)
        return spawn([*prefix, "bash", str(spark_class()), *args], env=env, stdout=log,
                     stderr=STDOUT, stdin=DEVNULL, cwd=self.directory)

    def _private_mounts(self) -> list[str]:
        """A worker's command prefix: a mount namespace of its own with an empty tmpfs on
        each unshared folder (the folders its executors write, as on a machine's own disk)."""
        if not self.unshared:
            return []
        script = ('set -e; n=$1; shift; for ((i = 0; i < n; i++)); do mkdir -p "$1"; '
                  'mount -t tmpfs statekit-unshared "$1"; shift; done; exec "$@"')
        return ["unshare", "--mount", "--propagation", "private", "bash", "-c", script,
                "private-mounts", str(len(self.unshared)), *self.unshared]

    def _log_text(self, name: str) -> str:
        assert self.directory is not None
        path = self.directory / "logs" / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def _wait_for_log(self, name: str, pattern: re.Pattern, proc: Popen, deadline: float) -> str:
        while True:
            found = pattern.search(self._log_text(name))
            if found:
                return found.group(1)
            self._give_up_if(name, proc, deadline, f"the {name} did not start")
            time.sleep(0.1)

    def _wait_for_workers(self, deadline: float) -> None:
        while True:
            with contextlib.suppress(OSError, urllib.error.URLError, ValueError):
                if len(self.alive_workers()) >= self.workers:
                    return
            for i, proc in enumerate(self._workers):
                self._give_up_if(f"worker-{i}", proc, deadline,
                                 f"{self.workers} workers did not all register with "
                                 f"{self.master_url}")
            time.sleep(0.2)

    def _give_up_if(self, name: str, proc: Popen, deadline: float, what: str) -> None:
        exited = proc.poll() is not None
        if exited or time.monotonic() > deadline:
            tail = "\n".join(self._log_text(name).splitlines()[-20:])
            why = f"exited with code {proc.returncode}" if exited else \
                f"timed out after {self.timeout:.0f} s"
            raise ClusterStartError(f"{what} ({name} {why}); last lines of its log:\n{tail}")

    def __repr__(self) -> str:
        state = "running" if self._master is not None else "stopped"
        return f"LocalCluster({self.master_url!r}, workers={self.workers}, {state})"


def _absolute_folder(folder: str | os.PathLike) -> str:
    if not isinstance(folder, (str, os.PathLike)) or not os.path.isabs(folder):
        raise BadArgument("unshared folder", folder, "an absolute path")
    return os.path.normpath(folder)


def require_unshare() -> None:
    """Raise ClusterStartError unless this process may give a worker its own mounts
    (Linux ``unshare --mount``: root, or CAP_SYS_ADMIN)."""
    if shutil.which("unshare") is None:
        raise ClusterStartError("unshared folders need util-linux's `unshare` (not found)")
    done = run(["unshare", "--mount", "true"], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise ClusterStartError("unshared folders need a mount namespace per worker, and "
                                f"`unshare --mount` is not permitted here: {done.stderr.strip()}"
                                " (run as root, or without unshared folders)")


def local_cluster(workers: int = 2, cores: int = 1, memory: str = "1g", *,
                  executor_memory: str = "512m", timeout: float = 240.0,
                  unshared: Sequence[str | os.PathLike] = ()) -> LocalCluster:
    """Start a standalone cluster of ``workers`` workers with ``cores`` cores and ``memory``
    each; returns it running (use it in a ``with`` block, or call ``stop()``).

    ``executor_memory`` is what ``session_conf()`` asks for each executor (it must fit in a
    worker's ``memory``). ``unshared``: absolute folders that each worker and its executors
    see as an empty disk of their own (a tmpfs in a mount namespace of the worker's; Linux,
    as root), while this process sees the real folder: machines without a shared file
    system, e.g. to see what a checkpoint there does.

    Example:
        >>> cluster = local_cluster()                     # doctest: +SKIP
        >>> cluster.master_url                            # doctest: +SKIP
        'spark://127.0.0.1:41577'
        >>> cluster.stop()                                # doctest: +SKIP
    """
    return LocalCluster(workers, cores, memory, executor_memory, timeout, unshared).start()
