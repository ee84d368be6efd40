"""Solutions that stay hidden in a learner's Run All, and still run in the test suite.

A solution cell starts with the cell magic ``%%solution <exercise id>``; the rest of
the cell is the solution, ending with ``workshop.check(...).require()``. JupyterLab
shows a collapsed cell's first line, which is then only ``%%solution 02.1``.

- In a learner's kernel the body does **not** run: the cell shows a button, "Show
  and run the solution", that prints the code and runs it on demand.
- With ``STATEKIT_SOLUTIONS=1`` in the kernel's environment the body runs in place,
  as if the magic line were not there: the test suite sets it (``conftest.py`` at the
  repository's root), so every solution is run and checked by ``make test``;
  ``make html`` sets it for handouts built ``--solutions``.

The magic is registered when ``statekit.workshop`` is imported in IPython (every
notebook does so in its first cell), or with ``%load_ext statekit.workshop``.

Example:
    >>> solutions_run({"STATEKIT_SOLUTIONS": "1"}), solutions_run({})
    (True, False)
    >>> solutions_run({"STATEKIT_SOLUTIONS": "no"})
    False
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from statekit.errors import BadArgument

#: The environment variable that makes ``%%solution`` cells run in place.
ENV = "STATEKIT_SOLUTIONS"
_ON = {"1", "true", "yes", "on"}


def solutions_run(environ: Mapping[str, str] | None = None) -> bool:
    """True when solution cells run in place (``STATEKIT_SOLUTIONS`` is 1/true/yes/on)."""
    env = os.environ if environ is None else environ
    return env.get(ENV, "").strip().lower() in _ON


def _exercise_id(line: str) -> str:
    from statekit.workshop.registry import EXERCISES, _load

    given = line.strip()
    _load()
    if given not in EXERCISES:
        raise BadArgument("%%solution exercise", given or "(none)", sorted(EXERCISES))
    return given


def run_in(shell, body: str) -> None:
    """Run ``body`` in ``shell``'s namespace as a cell runs: its last expression, if any and
    not None, is displayed; an exception propagates (so the cell around it fails)."""
    import ast

    from IPython.display import display

    tree = ast.parse(shell.transform_cell(body))
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    namespace = shell.user_ns
    exec(compile(tree, "<solution>", "exec"), namespace)
    if last is not None:
        value = eval(compile(ast.Expression(last.value), "<solution>", "eval"), namespace)
        if value is not None:
            display(value)


def register(shell) -> None:
    """Register the ``%%solution`` cell magic on an IPython ``shell``."""

    def solution(line: str, cell: str):
        exercise = _exercise_id(line)
        if solutions_run():
            run_in(shell, cell)
            return None
        from IPython.display import display

        from statekit.widgets.solution import HiddenSolution

        display(HiddenSolution(exercise, cell, lambda body: run_in(shell, body)))
        return None

    shell.register_magic_function(solution, magic_kind="cell", magic_name="solution")


def register_in_ipython() -> bool:
    """Register the magic in the running IPython, if any; True when registered."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    if shell is None:
        return False
    register(shell)
    return True
