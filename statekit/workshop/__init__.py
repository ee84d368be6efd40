"""The workshop's exercises: ``check(id, answer)`` says what is right or wrong in an answer.

Every notebook ends with exercises — predict then run, build, debug, review
questions — each with a cell for the learner, a check, and a solution: a
collapsed cell that starts with ``%%solution <id>`` (``statekit.workshop.magic``),
which a learner's Run All does not run (a button shows and runs it on demand) and
the test suite does (it ends with ``.require()``, so every solution is checked).
``exercises()`` lists them all.

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
    "NotSolved": "statekit.errors",
    "Choices": "statekit.workshop.choices",
})

__all__ = ["Choices", "NotSolved", "Verdict", "check", "exercises"]


def load_ipython_extension(shell) -> None:
    """``%load_ext statekit.workshop``: register the ``%%solution`` cell magic."""
    from statekit.workshop.magic import register

    register(shell)


def _register_in_ipython() -> None:
    import sys

    if "IPython" in sys.modules:  # only where IPython already runs: never import it for this
        from statekit.workshop.magic import register_in_ipython

        register_in_ipython()


_register_in_ipython()
