"""One name per readable part of every stateful operator of a query.

A query may hold several stateful operators, and two of them may each have a part named
``default`` (an aggregation's store and a deduplication's), so a part's full name carries
its operator: ``"<operator_id>/<name>"`` (``"0/default"``, ``"1/left"``,
``"3/sessions"``). Where a name is unique in the query, the name alone is accepted too
(``"left"``); so is Spark's own name of transformWithState's timers.

Example:
    >>> from statekit.inspect.operators import operator_parts
    >>> parts = (operator_parts(0, "stateStoreSave", ["default"], None)
    ...          + operator_parts(1, "dedupeWithinWatermark", ["default"], None))
    >>> [part_id(p) for p in parts]
    ['0/default', '1/default']
    >>> find_part(parts, "1/default").operator
    'dedupeWithinWatermark'
    >>> find_part(parts, "default")
    Traceback (most recent call last):
    ...
    statekit.errors.BadArgument: bad part: 'default'; accepted: a part of the query: 0/default, \
1/default (a name alone only where one operator has it)
"""

from __future__ import annotations

from collections.abc import Sequence

from statekit.errors import BadArgument
from statekit.inspect.operators import Part


def part_id(part: Part) -> str:
    """A part's full name in its query: ``"<operator_id>/<name>"``."""
    return f"{part.operator_id}/{part.name}"


def find_part(parts: Sequence[Part], wanted: object) -> Part:
    """The part ``wanted`` names (a full name, or a name only one operator has).

    Raises BadArgument naming ``wanted`` and every full name the query has.
    """
    if isinstance(wanted, str):
        for part in parts:
            if wanted == part_id(part) or wanted in (f"{part.operator_id}/{n}"
                                                       for n in part.names):
                return part
        named = [p for p in parts if wanted in p.names]
        if len(named) == 1:
            return named[0]
    shown = ", ".join(part_id(p) for p in parts) or "(none: no batch has committed state)"
    raise BadArgument("part", wanted, f"a part of the query: {shown} (a name alone only where "
                                      f"one operator has it)")
