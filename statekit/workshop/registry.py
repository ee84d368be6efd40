"""The workshop's exercises by id, and ``check``: an answer in, a ``Verdict`` out.

Each notebook's exercises live in one module of this package (``topics()``); a
check is a function of the learner's answer (plus what the notebook measured,
by keyword) that returns ``Point``s. ``check`` turns those into a verdict: an
answer left as ``...`` (or None) is *not answered yet* and never raises, so a
notebook runs top to bottom before anyone has answered.

Example:
    >>> check("00.1", ...)
    00.1 Where does Spark keep its state?: not answered yet
      ✗ replace ... with your answer, then run the cell again
    >>> check("00.1", "b").right
    True
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pandas as pd

from statekit.errors import BadArgument
from statekit.workshop.choices import Choices
from statekit.workshop.verdict import Point, Verdict

#: Modules of this package that hold no exercises; every other module is a topic.
MACHINERY = frozenset({"answers", "choices", "handouts", "leaderboard", "magic", "measure",
                       "registry", "verdict"})


def topics() -> list[str]:
    """The modules holding the exercises, one per notebook (imported on first ``check``)."""
    package = importlib.import_module("statekit.workshop")
    return sorted(f"statekit.workshop.{m.name}" for m in pkgutil.iter_modules(package.__path__)
                  if m.name not in MACHINERY and not m.name.startswith("_"))


@dataclass(frozen=True)
class Exercise:
    """One exercise: its id (``<notebook>.<n>``), title, notebook, and its check."""

    id: str
    title: str
    notebook: str
    kind: str  # "predict", "build", "debug" or "review"
    check: Callable[..., Sequence[Point]]
    #: The options of a multiple-choice exercise (the notebook lists the same texts).
    choices: Choices | None = None


EXERCISES: dict[str, Exercise] = {}
_KINDS = ("predict", "build", "debug", "review")


def exercise(id: str, title: str, notebook: str, kind: str, choices: Choices | None = None
             ) -> Callable[[Callable[..., Sequence[Point]]], Callable[..., Sequence[Point]]]:
    """Register a check under ``id`` (a decorator, used by the topic modules); ``choices``
    when the answer is one of a question's lettered options."""
    if kind not in _KINDS:
        raise BadArgument("exercise kind", kind, _KINDS)

    def register(fn: Callable[..., Sequence[Point]]) -> Callable[..., Sequence[Point]]:
        if id in EXERCISES:
            raise ValueError(f"exercise {id} is registered twice")
        EXERCISES[id] = Exercise(id, title, notebook, kind, fn, choices)
        return fn

    return register


def review(id: str, title: str, notebook: str, choices: Choices, kind: str = "review"
           ) -> Choices:
    """Register a multiple-choice exercise judged by ``choices`` alone; returns ``choices``."""
    exercise(id, title, notebook, kind, choices)(lambda answer: choices.judge(answer))
    return choices


def _load() -> None:
    for module in topics():
        importlib.import_module(module)


def check(exercise_id: str, answer: object, **measured: object) -> Verdict:
    """What is right and wrong in ``answer`` to exercise ``exercise_id``.

    ``measured`` passes what the notebook computed (the check compares a prediction
    with it, or reads a learner's query through it).
    """
    _load()
    found = EXERCISES.get(exercise_id)
    if found is None:
        raise BadArgument("exercise", exercise_id, sorted(EXERCISES))
    if answer is ... or answer is None:
        return Verdict(found.id, found.title, "unanswered",
                       (Point(False, "replace ... with your answer, then run the cell again"),))
    points = tuple(found.check(answer, **measured))
    status = "right" if points and all(p.ok for p in points) else "wrong"
    return Verdict(found.id, found.title, status, points)


def exercises() -> pd.DataFrame:
    """Every exercise: id, title, notebook, kind (one row each, in id order)."""
    _load()
    rows = [{"id": e.id, "title": e.title, "notebook": e.notebook, "kind": e.kind}
            for e in sorted(EXERCISES.values(), key=lambda e: e.id)]
    return pd.DataFrame(rows, columns=["id", "title", "notebook", "kind"])
