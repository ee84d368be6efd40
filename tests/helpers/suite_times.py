"""Where the suite's time goes: each test's time written as it ends, the time per folder at the end.

Two pytest plugins (``tests/conftest.py`` registers them). ``CpuMeter`` runs where the tests
run (each pytest-xdist worker, or the one process): it measures the CPU seconds each test
costs (setup to teardown) in the test process and every process below it (Spark's JVM and
its Python workers, brokers, notebook kernels, JupyterLab and Chromium, drill workers), and
hands the figure on in the test's report. ``SuiteTimes`` runs where the reports arrive:
every test's setup, call and teardown seconds and its CPU seconds are appended to
``build/test-times.tsv`` as the test ends (``node id``, ``folder``, ``CPU seconds``,
``seconds``), so a run that is stopped or still going can be read too; the run ends with the
seconds and CPU seconds spent in each folder (``tests/serve``, ``notebooks``, ``statekit`` for
the docstring examples), slowest first. ``--durations=10`` (Makefile) prints the ten slowest
tests. On busy cores a test's seconds stretch with what runs beside it; its CPU seconds much
less, so they say where cutting work shortens the suite.

Example:
    >>> folder_of("tests/serve/test_rest.py::test_get")
    'tests/serve'
    >>> folder_of("notebooks/01_state_store_basics.ipynb::01_state_store_basics.ipynb")
    'notebooks'
"""

from __future__ import annotations

import os
import time
from collections import defaultdict
from pathlib import Path

import pytest

from statekit.processes import descendants, process_table

#: the file of the times, relative to the directory pytest runs in (the repository's root)
TIMES_FILE = Path("build") / "test-times.tsv"


def folder_of(nodeid: str) -> str:
    """The folder a test's time is counted in: ``tests/<folder>`` or the top folder."""
    parts = nodeid.split("::", 1)[0].split("/")
    if parts[0] == "tests" and len(parts) > 2:
        return "/".join(parts[:2])
    return parts[0] if len(parts) > 1 else "."


#: the name of the user property a test's report carries its CPU seconds in
CPU_PROPERTY = "cpu_seconds"


def tree_cpu_seconds(root: int | None = None) -> float:
    """CPU seconds (user + system) used so far by ``root`` (default: this process), the
    children it has reaped, and every process still running below it with theirs.

    A process that outlives its parent (the JVM of a worker killed with kill -9, of a kernel
    shut down) leaves the tree and takes its seconds along: such tests get a low bound, and a
    test during which an earlier test's orphan leaves may even get less than zero.

    Example:
        >>> 0 < tree_cpu_seconds() <= tree_cpu_seconds()
        True
    """
    root = os.getpid() if root is None else root
    table = process_table(commands=False)
    if root not in table:   # no /proc: this process alone
        times = os.times()
        return times.user + times.system + times.children_user + times.children_system
    return table[root].cpu_s + sum(table[pid].cpu_s for pid in descendants(root, table))


class CpuMeter:
    """Measures each test's CPU seconds, setup to teardown, in the process the tests run in;
    the teardown report carries them (``CPU_PROPERTY``) to ``SuiteTimes``."""

    def __init__(self) -> None:
        self._at_start: dict[str, float] = {}

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item) -> None:
        self._at_start[item.nodeid] = tree_cpu_seconds()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item, call):
        if call.when == "teardown" and item.nodeid in self._at_start:
            used = tree_cpu_seconds() - self._at_start.pop(item.nodeid)
            item.user_properties.append((CPU_PROPERTY, round(used, 2)))
        return (yield)


def cpu_of(report) -> float | None:
    """The CPU seconds ``report`` carries, or None (a report from before ``CpuMeter``)."""
    for name, value in getattr(report, "user_properties", ()):
        if name == CPU_PROPERTY:
            return float(value)
    return None


class SuiteTimes:
    """Collects every test's seconds (setup + call + teardown) and CPU seconds by folder."""

    def __init__(self, path: Path = TIMES_FILE) -> None:
        self.path = path
        self.by_test: dict[str, float] = defaultdict(float)
        self.cpu_by_test: dict[str, float] = {}
        self.started = time.monotonic()
        self._file = None

    def pytest_sessionstart(self, session) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = self.path.open("w", encoding="utf-8")
        self.started = time.monotonic()

    def pytest_runtest_logreport(self, report) -> None:
        self.by_test[report.nodeid] += report.duration
        if report.when != "teardown":
            return
        cpu = cpu_of(report)
        if cpu is not None:
            self.cpu_by_test[report.nodeid] = cpu
        if self._file is not None:
            cpu_text = "" if cpu is None else f"{cpu:.2f}"
            self._file.write(f"{report.nodeid}\t{folder_of(report.nodeid)}\t{cpu_text}\t"
                             f"{self.by_test[report.nodeid]:.2f}\n")
            self._file.flush()

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.by_test:
            return
        folders: dict[str, list[float]] = defaultdict(list)
        cpu: dict[str, float] = defaultdict(float)
        for nodeid, seconds in self.by_test.items():
            folders[folder_of(nodeid)].append(seconds)
            cpu[folder_of(nodeid)] += self.cpu_by_test.get(nodeid, 0.0)
        write = terminalreporter.write_line
        terminalreporter.section("time per folder")
        write(f"{'seconds':>10}  {'CPU s':>8}  {'tests':>5}")
        for folder, times in sorted(folders.items(), key=lambda kv: -sum(kv[1])):
            write(f"{sum(times):8.1f} s  {cpu[folder]:8.1f}  {len(times):5d}  {folder}")
        wall = time.monotonic() - self.started
        write(f"{sum(cpu.values()):8.1f} CPU seconds of the tests and the processes below them")
        write(f"{wall:8.1f} s  wall time of the session ({TIMES_FILE} has every test's time)")

    def pytest_unconfigure(self, config) -> None:
        if self._file is not None:
            self._file.close()
