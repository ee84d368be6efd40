"""Review questions: one right choice, and for every choice why it is right or wrong.

The notebook shows the options as a list (``- a) …``); ``options`` here are the
same texts, and a test keeps the two in step. An answer is read with
``statekit.workshop.answers.letter``: ``"b"``, ``"B"``, ``"(b)"``, ``"b) …"``.

Example:
    >>> q = Choices({"a": "the input topic", "b": "its checkpoint"}, right="b",
    ...             why={"a": "Kafka keeps the input, not the state",
    ...                  "b": "state files per partition and version"})
    >>> [p.ok for p in q.judge("b")], [p.ok for p in q.judge(" (B) ")]
    ([True], [True])
    >>> q.judge("z")[0].text
    "'z' is not one of the choices: a, b"
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from statekit.workshop.answers import letter
from statekit.workshop.verdict import Point


@dataclass(frozen=True)
class Choices:
    """A multiple-choice question: the choices by letter, the right one, and why each."""

    options: Mapping[str, str]
    right: str
    why: Mapping[str, str]

    def judge(self, answer: object) -> list[Point]:
        said = letter(answer)
        if said not in self.options:
            return [Point(False, f"{answer!r} is not one of the choices: "
                                 f"{', '.join(self.options)}")]
        return [Point(said == self.right, f"{said}) {self.why[said]}")]
