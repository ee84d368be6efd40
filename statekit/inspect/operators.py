"""Stateful operators and the parts of their state that Spark's State Data Source reads.

Spark names a stateful operator in its state metadata (``state-metadata``'s
``operatorName``); statekit gives each a *kind* and lists its readable *parts*, each one
read with its own options of the ``statestore`` reader:

- ``aggregation`` (``stateStoreSave``), ``session_window``
  (``sessionWindowStateStoreSaveExec``), ``deduplication`` (``dedupe``,
  ``dedupeWithinWatermark``), ``group_state`` (``flatMapGroupsWithState``,
  ``applyInPandasWithState``) and ``other`` (any other name): a *store* per state store,
  usually just ``default`` (reader option ``storeName``);
- ``join`` (``symmetricHashJoin``): the *join sides* ``left`` and ``right`` (the buffered
  input rows of each side: option ``joinSide``), and a *store* for each of its four state
  stores (``left-keyToNumValues``, ``left-keyWithIndexToValue`` and the right ones);
- ``transform_with_state`` (``transformWithStateExec``, ``transformWithStateInPandasExec``,
  ``transformWithStateInPySparkExec``): a *state variable* for each of its variables
  (option ``stateVarName``; value, list and map state) and the *timers*
  (``readRegisteredTimers``).

The timers of a transformWithState operator are named ``timers``, unless a state variable
has that name; then they keep Spark's name (``$procTimers_keyToTimestamp`` or
``$eventTimers_keyToTimestamp``), which is always accepted too.

Example:
    >>> kind_of("dedupeWithinWatermark")
    'deduplication'
    >>> parts = operator_parts(1, "symmetricHashJoin", ["left-keyToNumValues",
    ...     "left-keyWithIndexToValue", "right-keyToNumValues", "right-keyWithIndexToValue"], None)
    >>> [(p.what, p.name) for p in parts][:3]
    [('join side', 'left'), ('join side', 'right'), ('store', 'left-keyToNumValues')]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from statekit.inspect import limits

KINDS = {
    "stateStoreSave": "aggregation",
    "sessionWindowStateStoreSaveExec": "session_window",
    "dedupe": "deduplication",
    "dedupeWithinWatermark": "deduplication",
    "symmetricHashJoin": "join",
    "flatMapGroupsWithState": "group_state",
    "applyInPandasWithState": "group_state",
    "transformWithStateExec": "transform_with_state",
    "transformWithStateInPandasExec": "transform_with_state",
    "transformWithStateInPySparkExec": "transform_with_state",
}
TIMER_VARIABLE_TYPE = "TimerState"
TIMERS = "timers"


def kind_of(operator_name: str) -> str:
    """statekit's kind for one of Spark's operator names (``"other"`` when unknown)."""
    return KINDS.get(operator_name, "other")


@dataclass(frozen=True)
class Part:
    """One readable part of an operator's state, and how Spark's reader reaches it."""

    operator_id: int
    #: Spark's operator name
    operator: str
    kind: str
    #: ``"store"``, ``"join side"``, ``"state variable"`` or ``"timers"``
    what: str
    #: the name it is asked for by (``default``, ``left``, a state variable's name, ``timers``)
    name: str
    #: the Spark store that holds it (its files: ``state/<operator>/<partition>[/<store>]``)
    store: str
    #: the ``statestore`` reader's options that select it
    options: tuple[tuple[str, str], ...]
    #: ``ValueState``, ``ListState``, ``MapState`` or ``TimerState`` (transformWithState only)
    variable_type: str | None = None
    #: True when the state variable has a TTL (transformWithState only)
    ttl: bool | None = None
    #: Spark's own name when ``name`` is an alias (the timers)
    spark_name: str | None = None

    @property
    def names(self) -> tuple[str, ...]:
        """Every name this part answers to."""
        return (self.name,) if self.spark_name is None else (self.name, self.spark_name)

    def changes_limit(self) -> limits.UnsupportedRead | None:
        """Why Spark's reader cannot give this part's change feed (None when it can, as far as
        the part's kind tells: the store's files may still lack delta files)."""
        if self.what == "join side":
            return limits.join_side_changes(self.name, self.operator_id)
        if self.what == "timers":
            return limits.timer_changes(self.name, self.operator_id)
        return None


def operator_parts(operator_id: int, operator: str, stores: Sequence[str],
                   properties: dict | None) -> list[Part]:
    """The readable parts of one operator, from its rows in Spark's state metadata."""
    kind = kind_of(operator)
    parts = []
    if kind == "join":
        for side in ("left", "right"):
            parts.append(Part(operator_id, operator, kind, "join side", side,
                              f"{side}-keyWithIndexToValue", (("joinSide", side),)))
    if kind == "transform_with_state":
        variables = list((properties or {}).get("stateVariables") or [])
        user = {v.get("stateName") for v in variables
                if v.get("stateVariableType") != TIMER_VARIABLE_TYPE}
        for var in variables:
            name, var_type = str(var.get("stateName")), var.get("stateVariableType")
            store = stores[0] if stores else "default"
            if var_type == TIMER_VARIABLE_TYPE:
                alias = TIMERS if TIMERS not in user else name
                parts.append(Part(operator_id, operator, kind, "timers", alias, store,
                                  (("readRegisteredTimers", "true"),), var_type,
                                  bool(var.get("ttlEnabled")),
                                  None if alias == name else name))
            else:
                parts.append(Part(operator_id, operator, kind, "state variable", name, store,
                                  (("stateVarName", name),), var_type,
                                  bool(var.get("ttlEnabled"))))
        return parts
    for store in stores:
        parts.append(Part(operator_id, operator, kind, "store", store, store,
                          (("storeName", store),)))
    return parts
