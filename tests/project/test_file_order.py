"""The order the two test processes take files in: longest first, unknown files after."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from helpers.file_order import (
    SECONDS_FILE,
    LongestFilesFirst,
    read_seconds,
    seconds_per_file,
    sorted_longest_first,
    write_seconds,
)


def test_files_without_a_figure_keep_their_order_after_the_timed_ones():
    seconds = {"tests/b.py": 10.0, "notebooks/x.ipynb": 300.0, "tests/a.py": 10.0}
    files = ["tests/new2.py", "tests/a.py", "tests/new1.py", "tests/b.py", "notebooks/x.ipynb"]
    assert sorted_longest_first(files, seconds) == [
        "notebooks/x.ipynb", "tests/a.py", "tests/b.py", "tests/new2.py", "tests/new1.py"]


def test_no_figures_leave_the_collection_as_it_was():
    files = ["tests/c.py", "tests/a.py", "tests/b.py"]
    assert sorted_longest_first(files, {}) == files


def test_the_plugin_moves_whole_files_and_keeps_each_files_tests_in_order():
    ids = ["tests/a.py::t1", "tests/a.py::t2", "tests/b.py::t1", "notebooks/n.ipynb::n",
           "tests/a.py::t3"]
    items = [SimpleNamespace(nodeid=nodeid) for nodeid in ids]
    LongestFilesFirst({"notebooks/n.ipynb": 60.0, "tests/b.py": 5.0}).pytest_collection_modifyitems(
        items)
    assert [item.nodeid for item in items] == [
        "notebooks/n.ipynb::n", "tests/b.py::t1", "tests/a.py::t1", "tests/a.py::t2",
        "tests/a.py::t3"]


def test_a_runs_times_become_seconds_per_file_and_read_back(tmp_path: Path):
    times = tmp_path / "test-times.tsv"
    times.write_text("tests/a.py::t1\ttests\t1.25\n"
                     "tests/a.py::t2[x\ty]\ttests\t2.50\n"   # a tab inside a parameter id
                     "notebooks/n.ipynb::n.ipynb\tnotebooks\t40.00\n", encoding="utf-8")
    seconds = seconds_per_file(times)
    assert seconds == {"tests/a.py": 3.75, "notebooks/n.ipynb": 40.0}
    written = tmp_path / "file_seconds.tsv"
    write_seconds(seconds, written)
    assert written.read_text(encoding="utf-8").splitlines() == [
        "notebooks/n.ipynb\t40", "tests/a.py\t4"]
    assert read_seconds(written) == {"notebooks/n.ipynb": 40.0, "tests/a.py": 4.0}
    assert read_seconds(tmp_path / "missing.tsv") == {}


def test_the_committed_seconds_name_test_files_and_notebooks():
    seconds = read_seconds(SECONDS_FILE)
    assert seconds, f"{SECONDS_FILE} is empty"
    assert all(name.endswith((".py", ".ipynb")) and value >= 0 for name, value in seconds.items())
    assert any(name.startswith("notebooks/") for name in seconds)
