"""The order of categories on a chart: known ones first in their order, names read naturally.

Example:
    >>> ordered_values(["b", "x", "a", "b"], ["a", "b"])
    ['a', 'b', 'x']
    >>> sorted(["i10", "i2"], key=natural_key)
    ['i2', 'i10']
"""

from __future__ import annotations

from collections.abc import Sequence


def ordered_values(values: Sequence[str], known: Sequence[str]) -> list[str]:
    """The distinct ``values``: those of ``known`` first in its order, then the rest as seen."""
    present = list(dict.fromkeys(values))
    return [v for v in known if v in present] + [v for v in present if v not in known]


def natural_key(name: str) -> tuple:
    """Sort key putting ``i2`` before ``i10``."""
    digits = "".join(c for c in name if c.isdigit())
    stem = name.rstrip("0123456789")
    return (stem, int(digits) if digits and name.endswith(digits) else -1, name)
