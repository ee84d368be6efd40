"""What a workshop check says about an answer: right, wrong or not answered, point by point.

A ``Verdict`` renders itself in a notebook (a short list: ✓ what is right, ✗ what
is wrong and why) and as text. Solution cells end with ``.require()``, which
raises unless the answer is right, so the test suite proves every exercise can
be solved; a learner's unanswered cell only reminds them what to do.

Example:
    >>> v = Verdict("02.1", "A session store", "wrong",
    ...             (Point(True, "sessions are keyed by player"),
    ...              Point(False, "the gap is 10 minutes; the exercise asks for 30")))
    >>> print(v)
    02.1 A session store: not yet
      ✓ sessions are keyed by player
      ✗ the gap is 10 minutes; the exercise asks for 30
    >>> v.require()
    Traceback (most recent call last):
    ...
    statekit.errors.NotSolved: 02.1 A session store: not yet
      ✓ sessions are keyed by player
      ✗ the gap is 10 minutes; the exercise asks for 30
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Literal

from statekit.errors import NotSolved

Status = Literal["right", "wrong", "unanswered"]
_SAID = {"right": "right", "wrong": "not yet", "unanswered": "not answered yet"}
_COLOR = {"right": "#1a7f37", "wrong": "#b35900", "unanswered": "#57606a"}


@dataclass(frozen=True)
class Point:
    """One thing a check looked at: whether it holds, and what to say about it."""

    ok: bool
    text: str


#: the HTML glyph of a point right (True) or wrong (False): drawn by any font, coloured
_GLYPH = {True: "<b style='color:#2e7d32'>&#x2713;</b>",
          False: "<b style='color:#c62828'>&#x2717;</b>"}


@dataclass(frozen=True)
class Verdict:
    """A check's answer: the exercise, its status and the points behind it."""

    exercise: str
    title: str
    status: Status
    points: tuple[Point, ...] = ()

    @property
    def right(self) -> bool:
        return self.status == "right"

    def require(self) -> Verdict:
        """This verdict when the answer is right, else ``NotSolved`` (for solution cells)."""
        if not self.right:
            raise NotSolved(str(self))
        return self

    def __str__(self) -> str:
        lines = [f"{self.exercise} {self.title}: {_SAID[self.status]}"]
        lines += [f"  {'✓' if p.ok else '✗'} {p.text}" for p in self.points]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        """A short coloured list; ✓ and ✗ (in every common font, unlike ✅ and ❌, which draw
        as empty boxes where no emoji font is installed)."""
        color = _COLOR[self.status]
        items = "".join(
            f"<li style='list-style:none'>{_GLYPH[p.ok]} {html.escape(p.text)}</li>"
            for p in self.points)
        return (f"<div style='border-left:4px solid {color};padding-left:8px'>"
                f"<b>{html.escape(self.exercise)} {html.escape(self.title)}</b>: "
                f"<span style='color:{color}'>{_SAID[self.status]}</span>"
                f"<ul style='margin:4px 0;padding-left:4px'>{items}</ul></div>")

    def __repr__(self) -> str:
        return str(self)
