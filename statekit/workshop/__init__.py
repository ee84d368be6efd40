"""The workshop's exercises: ``check(id, answer)`` says what is right or wrong in an answer.

Every notebook ends with exercises — predict then run, build, debug, review
questions — each with a cell for the learner, a check, and a solution hidden by
default (a collapsed cell that ends with ``.require()``, so the test suite runs
every solution). ``exercises()`` lists them all.

Example:
    >>> from statekit import workshop
    >>> workshop.check("00.1", "a").status
    'wrong'
"""

from __future__ import annotations

from statekit._lazy import lazy_exports

__getattr__, __dir__ = lazy_exports(__name__, {
    "check": "statekit.workshop.registry",
    "exercises": "statekit.workshop.registry",
    "Verdict": "statekit.workshop.verdict",
    "NotSolved": "statekit.workshop.verdict",
    "Choices": "statekit.workshop.choices",
})

__all__ = ["Choices", "NotSolved", "Verdict", "check", "exercises"]
