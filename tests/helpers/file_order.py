"""The order the test processes take the suite's files in: the longest first.

``make test`` hands whole files to its ``TEST_WORKERS`` pytest-xdist workers (``--dist
loadfile``), each the next file in the collection's order as it finishes one. Left to
pytest-xdist, files go by their number of tests, most first: the notebooks (one test each)
and the browser runs (four tests, four minutes) came last, and one worker ran them alone
while the other had nothing left. Taken longest first (the classic longest-processing-time
rule), the long files start at once and the short ones fill the gaps at the end.

The seconds are ``tests/file_seconds.tsv`` (``path<TAB>seconds``), written from a whole
run's ``build/test-times.tsv`` by ``python tests/helpers/file_order.py`` (``make
test-order``). A file it does not name yet keeps its place after those it names. The order
decides nothing but scheduling: each file still runs whole in one process.

Example:
    >>> seconds = {"tests/b.py": 9.0, "tests/a.py": 90.0}
    >>> sorted_longest_first(["tests/c.py", "tests/b.py", "tests/a.py"], seconds)
    ['tests/a.py', 'tests/b.py', 'tests/c.py']
"""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path

#: the committed seconds each test file took in a whole run
SECONDS_FILE = Path(__file__).resolve().parents[1] / "file_seconds.tsv"


def file_of(nodeid: str) -> str:
    """The file a test id belongs to: ``tests/serve/test_rest.py::test_get`` → its path."""
    return nodeid.split("::", 1)[0]


def read_seconds(path: Path = SECONDS_FILE) -> dict[str, float]:
    """``path``'s seconds per file; empty when there is no such file."""
    if not path.exists():
        return {}
    seconds = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        name, _, value = line.partition("\t")
        if name and value:
            seconds[name] = float(value)
    return seconds


def sorted_longest_first(files: Iterable[str], seconds: Mapping[str, float]) -> list[str]:
    """``files``, longest first by ``seconds``; files without a figure after, in their order."""
    files = list(files)
    position = {name: i for i, name in enumerate(files)}
    return sorted(files, key=lambda name: (name not in seconds, -seconds.get(name, 0.0),
                                           position[name]))


class LongestFilesFirst:
    """A pytest plugin for xdist's workers: the collected items reordered, file by file."""

    def __init__(self, seconds: Mapping[str, float]) -> None:
        self.seconds = seconds

    def pytest_collection_modifyitems(self, items) -> None:
        by_file: dict[str, list] = defaultdict(list)
        for item in items:
            by_file[file_of(item.nodeid)].append(item)
        order = sorted_longest_first(by_file, self.seconds)
        items[:] = [item for name in order for item in by_file[name]]


def seconds_per_file(times_tsv: Path) -> dict[str, float]:
    """Each file's seconds summed from ``build/test-times.tsv`` (``node id, folder, CPU s, s``)."""
    seconds: dict[str, float] = defaultdict(float)
    for line in times_tsv.read_text(encoding="utf-8").splitlines():
        nodeid, _, rest = line.partition("\t")
        value = rest.rpartition("\t")[2]
        if nodeid and value:
            seconds[file_of(nodeid)] += float(value)
    return dict(seconds)


def write_seconds(seconds: Mapping[str, float], path: Path = SECONDS_FILE) -> None:
    """``seconds`` as ``path``, longest first, whole seconds."""
    lines = [f"{name}\t{value:.0f}" for name, value in
             sorted(seconds.items(), key=lambda item: (-item[1], item[0]))]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    source = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("build") / "test-times.tsv"
    write_seconds(seconds_per_file(source))
    print(f"{SECONDS_FILE}: {len(read_seconds())} files, from {source}")
