"""The benchmarks' results files: one JSON file per benchmark in ``bench/results/<bench>.json``.

A file holds the benchmark's figures (each a value and unit, optionally a ratio against
another figure of the same file and a target), the machine's load average when the run
started and ended, its CPU count, the git commit it ran on (and whether the tree was dirty),
when it finished (UTC), the command line, where the figures come from (``"measured"``, or
``"transcribed from bench/README.md (...)"`` for figures copied from the hand-kept
README), and the benchmark's own details (every repetition, settings) as it printed them.
Files are written whole or not at all (``statekit.atomic.write_atomic``) and validated when
read: a bad file is refused with its path and the field at fault.

Example:
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> run = Run("example")
    >>> path = run.write([
    ...     Figure("baseline read", 2.5, "s"),
    ...     Figure("statekit read", 2.0, "s", baseline="baseline read", ratio=0.8,
    ...            target="ratio <= 1.0"),
    ... ], folder=folder)
    >>> result = read(path)
    >>> result.bench, result.figures[1].met, result.source
    ('example', True, 'measured')
    >>> import shutil; shutil.rmtree(folder)
"""

from __future__ import annotations

import json
import math
import operator
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from statekit.atomic import write_atomic

FORMAT = 1
RESULTS = Path(__file__).resolve().parent / "results"
REPO = Path(__file__).resolve().parent.parent
MEASURED = "measured"
TRANSCRIBED = "transcribed from bench/README.md"
# what the benchmarks write themselves: not a change to the code measured (see ``git_state``)
OUTPUTS = ("bench/results", "bench/README.md", "bench/curves.svg", "bench/curves.png")

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_TARGET = re.compile(r"^(value|ratio) (<=|<|>=|>) (-?[0-9]+(?:\.[0-9]+)?)$")
_OPS = {"<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt}
_TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2})?Z)?$")


class BadResults(ValueError):
    """A results file (or figures about to be written) that does not hold this format."""


def target_met(target: str, value: float | None, ratio: float | None) -> bool | None:
    """Whether ``value`` or ``ratio`` meets ``target`` (``"ratio <= 1.0"``, ``"value < 20"``);
    None when the figure has no such number (not measured).

    Example:
        >>> target_met("ratio <= 1.0", 2.9, 0.98), target_met("value < 20", 21.5, None)
        (True, False)
        >>> print(target_met("ratio >= 0.5", None, None))
        None
    """
    match = _TARGET.match(target)
    if match is None:
        raise BadResults(f"target {target!r}: expected '<value|ratio> <op> <number>' with op "
                         f"one of <=, <, >=, > (e.g. 'ratio <= 1.0')")
    side, op, bound = match.groups()
    operand = value if side == "value" else ratio
    return None if operand is None else _OPS[op](operand, float(bound))


@dataclass(frozen=True)
class Figure:
    """One figure: ``value`` in ``unit``; ``ratio`` against the figure named ``baseline``.

    ``met`` follows from ``target`` (None without one). ``value`` is None when the run
    could not measure it (e.g. CPU time where there is no /proc); a NaN or infinite value or
    ratio (a median of nothing, a division by zero) is stored as None, and its target as not
    judged (``met`` None).
    """

    name: str
    value: float | None
    unit: str
    baseline: str | None = None
    ratio: float | None = None
    target: str | None = None
    met: bool | None = None

    def __post_init__(self) -> None:
        for name in ("value", "ratio"):
            number = getattr(self, name)
            if isinstance(number, float) and not math.isfinite(number):
                object.__setattr__(self, name, None)
        if self.target is not None and self.met is None:
            object.__setattr__(self, "met", target_met(self.target, self.value, self.ratio))


@dataclass(frozen=True)
class Results:
    """A whole results file (see the module's docstring)."""

    bench: str
    figures: list[Figure]
    load_start: list[float | None] | None
    load_end: list[float | None] | None
    cpus: int
    commit: str
    dirty: bool | None
    timestamp: str
    command: str
    source: str = MEASURED
    details: dict = field(default_factory=dict)
    format: int = FORMAT

    def to_json(self) -> str:
        payload = _finite(asdict(self))
        ordered = {"format": payload.pop("format"), **payload}
        return json.dumps(ordered, indent=2, default=str, allow_nan=False) + "\n"


def _finite(x: Any) -> Any:
    """``x`` with every NaN or infinite float inside it replaced by None (strict JSON)."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_finite(v) for v in x]
    return x


def load_average() -> list[float | None] | None:
    """The 1-, 5- and 15-minute load average, rounded; None where the OS has none."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def git_state(repo: Path = REPO) -> tuple[str, bool | None]:
    """(short commit, dirty) of ``repo``; ``("unknown", None)`` when it is not a git repo.

    Dirty means a tracked or untracked file differs from the commit, the benchmarks' own
    outputs (``OUTPUTS``: results files, this README, the curves chart) aside.
    """
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=repo,
                                capture_output=True, text=True, timeout=30, check=True)
        status = subprocess.run(["git", "status", "--porcelain", "--", ".",
                                 *(f":(exclude){p}" for p in OUTPUTS)], cwd=repo,
                                capture_output=True, text=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError):
        return "unknown", None
    return commit.stdout.strip() or "unknown", bool(status.stdout.strip())


def command_line() -> str:
    """This process's command line as typed (``python -m bench --only snapshot``)."""
    argv = list(getattr(sys, "orig_argv", sys.argv))
    if argv:
        argv[0] = Path(argv[0]).name
    return shlex.join(argv)


class Run:
    """One run of benchmark ``bench``: the load average when created, figures at the end.

    Create it when the benchmark starts; ``write`` its figures when it ends.
    """

    def __init__(self, bench: str) -> None:
        if not _NAME.match(bench):
            raise BadResults(f"benchmark name {bench!r}: letters, digits, '_', '.', '-' only "
                             f"(it names the file bench/results/<name>.json)")
        self.bench = bench
        self.load_start = load_average()

    def results(self, figures: list[Figure], details: Mapping[str, Any] | None = None
                ) -> Results:
        commit, dirty = git_state()
        return Results(bench=self.bench, figures=list(figures), load_start=self.load_start,
                       load_end=load_average(), cpus=os.cpu_count() or 0, commit=commit,
                       dirty=dirty, command=command_line(), details=dict(details or {}),
                       timestamp=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))

    def write(self, figures: list[Figure], details: Mapping[str, Any] | None = None,
              folder: Path = RESULTS) -> Path:
        """Validate and write ``bench/results/<bench>.json`` atomically; its path."""
        return write(self.results(figures, details), folder)


def write(results: Results, folder: Path = RESULTS) -> Path:
    """Write ``results`` to ``folder/<bench>.json`` (validated first, atomically)."""
    path = Path(folder) / f"{results.bench}.json"
    text = results.to_json()
    parse(json.loads(text), str(path))  # what is written must read back
    write_atomic(path, text)
    return path


def read(path: str | os.PathLike) -> Results:
    """Read and validate one results file; ``BadResults`` names the file and the field."""
    path = Path(path)
    try:
        payload = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadResults(f"{path}: not a readable JSON file ({exc})") from None
    results = parse(payload, str(path))
    if results.bench != path.stem:
        raise BadResults(f"{path}: field 'bench' is {results.bench!r}, but the file is named "
                         f"for {path.stem!r}")
    return results


def read_all(folder: Path = RESULTS) -> dict[str, Results]:
    """Every ``*.json`` of ``folder`` by benchmark name, each validated."""
    return {p.stem: read(p) for p in sorted(Path(folder).glob("*.json"))}


# --- validation ---------------------------------------------------------------------------
def _is_number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def _check(ok: bool, where: str, name: str, expected: str, value: Any) -> None:
    if not ok:
        raise BadResults(f"{where}: field {name!r} must be {expected}; got {value!r}")


def _load(where: str, name: str, value: Any) -> list[float | None] | None:
    ok = value is None or (isinstance(value, list) and len(value) == 3
                           and all(v is None or _is_number(v) for v in value))
    _check(ok, where, name, "null or [1-min, 5-min, 15-min] load averages (numbers or null)",
           value)
    return value


def parse(payload: Any, where: str) -> Results:
    """``Results`` from a decoded results file; ``where`` names it in errors."""
    _check(isinstance(payload, dict), where, "(top level)", "a JSON object", type(payload))
    required = ("format", "bench", "figures", "load_start", "load_end", "cpus", "commit",
                "dirty", "timestamp", "command", "source")
    for name in required:
        if name not in payload:
            raise BadResults(f"{where}: field {name!r} is missing (a results file has "
                             f"{', '.join(required)} and optionally details)")
    unknown = set(payload) - {*required, "details"}
    if unknown:
        raise BadResults(f"{where}: unknown field(s) {sorted(unknown)}")
    _check(type(payload["format"]) is int and payload["format"] == FORMAT, where,
           "format", f"{FORMAT} (the only version this code reads)", payload["format"])
    _check(isinstance(payload["bench"], str) and bool(_NAME.match(payload["bench"])), where,
           "bench", "a benchmark name (letters, digits, '_', '.', '-')", payload["bench"])
    _check(isinstance(payload["cpus"], int) and not isinstance(payload["cpus"], bool)
           and payload["cpus"] > 0, where, "cpus", "a positive integer", payload["cpus"])
    _check(isinstance(payload["commit"], str) and bool(payload["commit"]), where, "commit",
           "a short commit hash or 'unknown'", payload["commit"])
    _check(payload["dirty"] is None or isinstance(payload["dirty"], bool), where, "dirty",
           "true, false or null (not known)", payload["dirty"])
    _check(isinstance(payload["timestamp"], str) and bool(_TIMESTAMP.match(payload["timestamp"])),
           where, "timestamp", "a UTC time 'YYYY-MM-DDTHH:MM:SSZ' (or a date 'YYYY-MM-DD' "
           "when only the day is known)", payload["timestamp"])
    _check(isinstance(payload["command"], str) and bool(payload["command"]), where, "command",
           "the command line, a non-empty string", payload["command"])
    source = payload["source"]
    _check(isinstance(source, str) and (source == MEASURED or source.startswith(TRANSCRIBED)),
           where, "source", f"{MEASURED!r} or {TRANSCRIBED + ' (measured ...)'!r}", source)
    details = payload.get("details", {})
    _check(isinstance(details, dict), where, "details", "a JSON object", type(details))
    figures = payload["figures"]
    _check(isinstance(figures, list) and bool(figures), where, "figures",
           "a non-empty list of figures", figures)
    parsed = [_figure(f, f"{where}: figures[{i}]") for i, f in enumerate(figures)]
    names = [f.name for f in parsed]
    for i, f in enumerate(parsed):
        if names.count(f.name) > 1:
            raise BadResults(f"{where}: figures[{i}]: field 'name' {f.name!r} is not unique")
        if f.baseline is not None and f.baseline not in names:
            raise BadResults(f"{where}: figures[{i}]: field 'baseline' {f.baseline!r} names no "
                             f"figure of this file (figures: {names})")
    return Results(bench=payload["bench"], figures=parsed,
                   load_start=_load(where, "load_start", payload["load_start"]),
                   load_end=_load(where, "load_end", payload["load_end"]),
                   cpus=payload["cpus"], commit=payload["commit"], dirty=payload["dirty"],
                   timestamp=payload["timestamp"], command=payload["command"], source=source,
                   details=details, format=payload["format"])


def _figure(f: Any, where: str) -> Figure:
    _check(isinstance(f, dict), where, "(figure)", "a JSON object", type(f))
    fields = ("name", "value", "unit", "baseline", "ratio", "target", "met")
    for name in fields:
        if name not in f:
            raise BadResults(f"{where}: field {name!r} is missing (a figure has "
                             f"{', '.join(fields)}; null where there is none)")
    unknown = set(f) - set(fields)
    if unknown:
        raise BadResults(f"{where}: unknown field(s) {sorted(unknown)}")
    _check(isinstance(f["name"], str) and bool(f["name"]), where, "name", "a non-empty string",
           f["name"])
    _check(f["value"] is None or _is_number(f["value"]), where, "value",
           "a finite number or null", f["value"])
    _check(isinstance(f["unit"], str), where, "unit", "a string ('' for none)", f["unit"])
    _check(f["baseline"] is None or (isinstance(f["baseline"], str) and bool(f["baseline"])),
           where, "baseline", "null or the name of another figure", f["baseline"])
    _check(f["ratio"] is None or _is_number(f["ratio"]), where, "ratio",
           "a finite number or null", f["ratio"])
    _check(f["baseline"] is None or f["ratio"] is not None, where, "ratio",
           "a number when there is a baseline", f["ratio"])
    _check(f["target"] is None or isinstance(f["target"], str), where, "target",
           "null or '<value|ratio> <op> <number>'", f["target"])
    _check(f["met"] is None or isinstance(f["met"], bool), where, "met", "true, false or null",
           f["met"])
    if f["target"] is None:
        _check(f["met"] is None, where, "met", "null when there is no target", f["met"])
        return Figure(**f)
    try:
        met = target_met(f["target"], f["value"], f["ratio"])
    except BadResults as exc:
        raise BadResults(f"{where}: field 'target': {exc}") from None
    _check(f["met"] == met, where, "met", f"{json.dumps(met)} ({f['target']} with value "
           f"{f['value']} and ratio {f['ratio']})", f["met"])
    return Figure(**f)
