"""The notebooks' exercises as a learner meets them (no Spark: the notebooks are read, not run).

- Solutions stay out of a learner's Run All: a ``%%solution <id>`` cell runs only with
  ``STATEKIT_SOLUTIONS=1`` (the suite, via the root ``conftest.py``) and otherwise shows
  a button; collapsed, its first line gives nothing away.
- Every registered exercise has its heading, its learner cell and exactly one solution
  that ends with ``.require()``; no other cell requires anything.
- Multiple-choice options are a markdown list with the very texts the check judges.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
from IPython.core.interactiveshell import InteractiveShell

from statekit.errors import BadArgument
from statekit.widgets.solution import HiddenSolution
from statekit.workshop import magic
from statekit.workshop.registry import EXERCISES, _load

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
_load()


def cells(path: Path):
    return nbformat.read(path, as_version=4).cells


# ----------------------------------------------------------------------- the magic
@pytest.fixture
def shell(monkeypatch):
    ip = InteractiveShell()
    magic.register(ip)
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda *objs, **_: shown.extend(objs))
    ip.user_ns["shown"] = shown
    ip.run_cell("from statekit import workshop")
    yield ip
    ip.cleanup()


SOLVED = '%%solution 00.1\nletter = "b"\nworkshop.check("00.1", letter).require()\n'


def test_a_learner_run_does_not_run_the_solution_and_a_button_does(shell, monkeypatch):
    monkeypatch.setenv(magic.ENV, "0")
    result = shell.run_cell(SOLVED)
    assert result.success and "letter" not in shell.user_ns
    [panel] = shell.user_ns["shown"]
    assert isinstance(panel, HiddenSolution) and "00.1" in panel.note.value
    panel.button.click()
    assert shell.user_ns["letter"] == "b" and panel.button.disabled
    assert shell.user_ns["shown"][-1].right  # the solution's verdict, displayed


@pytest.mark.parametrize("value", ["1", "true", "YES"])
def test_the_suite_runs_the_solution_in_place(shell, monkeypatch, value):
    monkeypatch.setenv(magic.ENV, value)
    assert shell.run_cell(SOLVED).success
    assert shell.user_ns["letter"] == "b"
    [verdict] = shell.user_ns["shown"]
    assert verdict.right


def test_a_wrong_solution_fails_its_cell(shell, monkeypatch):
    monkeypatch.setenv(magic.ENV, "1")
    result = shell.run_cell('%%solution 00.1\nworkshop.check("00.1", "a").require()\n')
    assert type(result.error_in_exec).__name__ == "NotSolved"


def test_an_unknown_exercise_is_named(shell, monkeypatch):
    monkeypatch.setenv(magic.ENV, "1")
    result = shell.run_cell("%%solution 99.9\nx = 1\n")
    assert isinstance(result.error_in_exec, BadArgument) and "99.9" in str(result.error_in_exec)
    assert "x" not in shell.user_ns


def test_the_root_conftest_turns_solutions_on_for_the_suite():
    assert magic.solutions_run()


# ----------------------------------------------------------------------- the notebooks
def _exercise_cells(path: Path) -> dict[str, dict]:
    """Exercise id → its heading cell, learner cells and solution cells."""
    found: dict[str, dict] = {}
    current = None
    for cell in cells(path):
        heading = re.search(r"^###\s+Exercise\s+(\d\d\.\d+)\b", cell.source, re.MULTILINE)
        if cell.cell_type == "markdown" and heading:
            current = heading.group(1)
            found[current] = {"heading": cell.source, "learner": [], "solutions": []}
        elif cell.cell_type == "code" and current is not None:
            kind = "solutions" if cell.source.startswith("%%solution") else "learner"
            found[current][kind].append(cell)
    return found


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_exercise_has_one_hidden_solution_that_run_all_skips(path):
    found = _exercise_cells(path)
    registered = sorted(e.id for e in EXERCISES.values() if e.notebook == path.stem)
    assert sorted(found) == registered
    for exercise, parts in found.items():
        [solution] = parts["solutions"]
        assert solution.source.splitlines()[0] == f"%%solution {exercise}"
        assert "solution" in solution.metadata.get("tags", [])
        assert solution.metadata.get("jupyter", {}).get("source_hidden") is True
        assert re.search(rf'workshop\.check\("{exercise}"[\s\S]*\.require\(\)',
                         solution.source), exercise
        learner = "\n".join(c.source for c in parts["learner"])
        assert f'workshop.check("{exercise}", answer' in learner, exercise
        assert "answer = ..." in learner, exercise
    for cell in cells(path):
        if not cell.source.startswith("%%solution"):
            assert ".require()" not in cell.source, cell.source[:200]


def _options(markdown: str) -> dict[str, str]:
    """The ``- a) text`` items of a markdown cell (continuation lines joined)."""
    options, letter = {}, None
    for line in markdown.splitlines():
        item = re.match(r"^[-*]\s+([a-z])\)\s+(.*)$", line)
        if item:
            letter = item.group(1)
            options[letter] = item.group(2)
        elif letter and line.startswith("  ") and line.strip():
            options[letter] += " " + line.strip()
        else:
            letter = None
    return options


def _plain(text: str) -> str:
    return re.sub(r"\s+", " ", text.replace("`", "").replace("*", "")).strip().lower()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_multiple_choice_options_are_a_list_of_the_checked_texts(path):
    found = _exercise_cells(path)
    for exercise, parts in found.items():
        choices = EXERCISES[exercise].choices
        bare = [line for line in parts["heading"].splitlines()
                if re.match(r"^[a-z]\)\s", line)]
        assert not bare, f"{exercise}: options outside a list render as one paragraph: {bare}"
        if choices is None:
            continue
        listed = _options(parts["heading"])
        assert sorted(listed) == sorted(choices.options), exercise
        for key, text in choices.options.items():
            assert _plain(listed[key]) == _plain(text), (exercise, key)


def _assigned(source: str) -> set[str]:
    """Names a cell binds at its top level (``x = ...``, ``x, y = ...``, ``def x``)."""
    names = set()
    for line in source.splitlines():
        target = re.match(r"([A-Za-z_][\w, ]*?)\s*=(?!=)", line)
        if target:
            names |= {n.strip() for n in target.group(1).split(",") if n.strip()}
        defined = re.match(r"(?:def|class)\s+(\w+)", line)
        if defined:
            names.add(defined.group(1))
    return names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_solution_revealed_after_run_all_reads_no_name_a_later_cell_rebinds(path):
    """A learner presses a solution's button after Run All: every name it reads must still
    hold what its exercise measured (04.1 and 05.1 once read a `measured` a later exercise
    had replaced, and raised TypeError)."""
    code = [c.source for c in cells(path) if c.cell_type == "code"]
    for i, source in enumerate(code):
        if not source.startswith("%%solution"):
            continue
        read = set(re.findall(r"(?<![\w.])([A-Za-z_]\w*)\b(?!\s*=[^=])", source.split("\n", 1)[1]))
        later = set().union(*(_assigned(s) for s in code[i + 1:] if not s.startswith(
            "%%solution"))) - {"answer"}
        assert not read & later - _assigned(source), (
            f"{path.stem}: the solution `{source.splitlines()[0]}` reads "
            f"{sorted(read & later - _assigned(source))}, which a later cell rebinds")
