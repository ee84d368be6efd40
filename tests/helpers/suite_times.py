"""Where the suite's time goes: each test's time written as it ends, the time per folder at the end.

A pytest plugin (``tests/conftest.py`` registers it). Every test's setup, call and teardown
seconds are appended to ``build/test-times.tsv`` as the test ends (``node id``, ``folder``,
``seconds``), so a run that is stopped or still going can be read too; the run ends with the
seconds spent in each folder (``tests/serve``, ``notebooks``, ``statekit`` for the docstring
examples), slowest first. ``--durations=10`` (Makefile) prints the ten slowest tests.

Example:
    >>> folder_of("tests/serve/test_rest.py::test_get")
    'tests/serve'
    >>> folder_of("notebooks/01_state_store_basics.ipynb::01_state_store_basics.ipynb")
    'notebooks'
"""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path

import pytest

#: the file of the times, relative to the directory pytest runs in (the repository's root)
TIMES_FILE = Path("build") / "test-times.tsv"


def folder_of(nodeid: str) -> str:
    """The folder a test's time is counted in: ``tests/<folder>`` or the top folder."""
    parts = nodeid.split("::", 1)[0].split("/")
    if parts[0] == "tests" and len(parts) > 2:
        return "/".join(parts[:2])
    return parts[0] if len(parts) > 1 else "."


class SuiteTimes:
    """Collects every test's seconds (setup + call + teardown) by folder."""

    def __init__(self, path: Path = TIMES_FILE) -> None:
        self.path = path
        self.by_test: dict[str, float] = defaultdict(float)
        self.started = time.monotonic()
        self._file = None

    def pytest_sessionstart(self, session) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = self.path.open("w", encoding="utf-8")
        self.started = time.monotonic()

    def pytest_runtest_logreport(self, report) -> None:
        self.by_test[report.nodeid] += report.duration
        if report.when == "teardown" and self._file is not None:
            self._file.write(f"{report.nodeid}\t{folder_of(report.nodeid)}\t"
                             f"{self.by_test[report.nodeid]:.2f}\n")
            self._file.flush()

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.by_test:
            return
        folders: dict[str, list[float]] = defaultdict(list)
        for nodeid, seconds in self.by_test.items():
            folders[folder_of(nodeid)].append(seconds)
        write = terminalreporter.write_line
        terminalreporter.section("time per folder")
        for folder, times in sorted(folders.items(), key=lambda kv: -sum(kv[1])):
            write(f"{sum(times):8.1f} s  {len(times):5d} tests  {folder}")
        wall = time.monotonic() - self.started
        write(f"{wall:8.1f} s  wall time of the session ({TIMES_FILE} has every test's time)")

    def pytest_unconfigure(self, config) -> None:
        if self._file is not None:
            self._file.close()
