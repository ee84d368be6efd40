"""The leaderboard's ranking: the ``k`` rows with the largest value, nulls last, ties by key.

Example:
    >>> top([{"p": "b", "n": 3}, {"p": "a", "n": 3}], 1, "n", ["p"])
    [{'p': 'a', 'n': 3}]
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping, Sequence


def top(rows: Iterable[Mapping], k: int, by: str, keys: Sequence[str]) -> list[dict]:
    """The ``k`` rows with the largest ``by``: nulls last, ties by the group keys' text.

    Example:
        >>> top([{"p": "b", "n": 3}, {"p": "a", "n": 3}, {"p": "c", "n": None},
        ...      {"p": "d", "n": 1}], 3, "n", ["p"])
        [{'p': 'a', 'n': 3}, {'p': 'b', 'n': 3}, {'p': 'd', 'n': 1}]
    """
    return heapq.nsmallest(k, rows, key=lambda row: rank(row.get(by), row, keys))


def rank(value: object, group: Mapping, keys: Sequence[str]) -> tuple:
    """Where a row ranks in ``top``: by ``value``, largest first, nulls last, then by its keys'
    text."""
    return (value is None, -value if value is not None else 0,
            tuple(str(group.get(key)) for key in keys))
