"""Each statekit module is one concept, about 400 lines at the most (issue 40).

A module over ``MAX_LINES`` states in its docstring why it is kept whole, with the marker
``Kept whole:`` and a sentence of reason; otherwise it is split by concept.

Example of a docstring that passes::

    \"\"\"The broker's log format.

    Kept whole: one record layout read and written field by field; split, each half would
    need the other's offsets.
    \"\"\"
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "statekit"
#: The most lines a module may have without a stated reason.
MAX_LINES = 420
#: The phrase a module's docstring uses to state why it is longer.
MARKER = "Kept whole:"


def oversized_without_reason(package: Path = PACKAGE) -> list[str]:
    """``path (n lines)`` of every module over ``MAX_LINES`` whose docstring lacks ``MARKER``."""
    found = []
    for path in sorted(package.rglob("*.py")):
        text = path.read_text()
        lines = len(text.splitlines())
        if lines <= MAX_LINES:
            continue
        docstring = ast.get_docstring(ast.parse(text, str(path))) or ""
        if MARKER not in docstring:
            found.append(f"{path.relative_to(package.parent)} ({lines} lines)")
    return found


def test_no_module_is_over_the_limit_without_a_stated_reason():
    too_long = oversized_without_reason()
    assert not too_long, (
        f"over {MAX_LINES} lines: split by concept, or state in the docstring "
        f"'{MARKER} <reason>':\n" + "\n".join(too_long))


def test_the_check_sees_a_long_module_and_its_reason(tmp_path):
    body = "x = 1\n" * (MAX_LINES + 1)
    (tmp_path / "long.py").write_text('"""A long one."""\n' + body)
    (tmp_path / "kept.py").write_text(f'"""A long one.\n\n{MARKER} one table."""\n' + body)
    (tmp_path / "short.py").write_text('"""A short one."""\n')
    expected = f"{tmp_path.name}/long.py ({MAX_LINES + 2} lines)"
    assert oversized_without_reason(tmp_path) == [expected]
