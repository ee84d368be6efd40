"""The names a person gave their query's columns, read from its plan, for the state's fields.

Spark's state stores do not keep every name of the query:

- a **stream-stream join** keys both sides' stores by a struct of the join key values,
  whose fields Spark names ``field0``, ``field1``, ... (in the order of the join keys);
- an **aggregation** keeps, per group, each aggregate function's *buffer*, named after
  the buffer's own fields: ``avg(delay) AS avg_delay`` is kept as ``sum`` and ``count``,
  ``count(*) AS n`` as ``count``, ``sum(x) AS total`` as ``sum`` (a decimal sum as
  ``sum`` and ``isEmpty``), ``min``/``max`` as ``min``/``max``; a grouping key that is an
  expression (``groupBy((col("v") % 3).alias("k"))``) is kept as ``_groupingexpression``.

The query's plan (``StreamingQuery.explain(extended=True)``) says which names those are:
the physical plan's ``StreamingSymmetricHashJoin [origin#12], [airport#30], ...`` (its
left and right join keys) and ``StateStoreSave [keys], state info [... opId = 0 ...]``
above the aggregate that merges the buffers (``functions=[merge_avg(delay#5), ...],
output=[keys..., sum#35, count#36L, ...]``: the buffer fields, in the store's order), and
the optimized logical plan's ``Aggregate [keys], [..., avg(delay#5) AS avg_delay#10, ...]``
(each aggregate's alias). ``plan_names(text)`` reads them into ``PartNames`` per operator
and part; ``statekit.inspect.flatten.flat_columns`` applies them.

The names given, exactly:

- a join key that is a column (``origin#12``) gets that column's name on its side; a key
  that is an expression (``upper(origin#12)``, or a cast Spark added) keeps ``fieldN``;
- an aggregation's grouping key kept under a name Spark made (``_groupingexpression``)
  gets the alias it has in the query's output;
- the buffer of an aggregate with an alias of its own (``<function>(...) AS <alias>``):
  ``count``, ``min``, ``max`` and a ``sum`` kept as one field are named ``<alias>`` (the
  buffer is the result); every other buffer field is ``<alias>_<buffer field>``
  (``avg_delay_sum``, ``avg_delay_count``, ``total_isEmpty``, ``sd_m2``);
- an ``avg`` kept as a double ``sum`` and a ``count`` also gets ``<alias>``, a column
  statekit *derives* (Spark does not keep it): ``sum / count``, null when ``count`` is 0,
  as Spark's ``Average`` computes its result; other averages (of decimals, of intervals)
  get no derived column;
- Spark keeps one buffer for aggregates that are the same expression
  (``count(*) AS n, count(*) AS n2``): it is named after the first alias; an aggregate used
  only inside another expression (``round(avg(x), 1) AS r``) keeps Spark's buffer names.

Where the plan does not tell (no plan yet, an operator or aggregate function whose buffer
layout statekit cannot place, a plan Spark shortened), the fields keep Spark's names.

Example:
    >>> plan = '''== Optimized Logical Plan ==
    ... +- Aggregate [origin#2], [origin#2, avg(delay#3) AS avg_delay#5, count(1) AS n#6L]
    ... == Physical Plan ==
    ... +- StateStoreSave [origin#2], state info [ checkpoint = file:/ck/state, opId = 0, ver = 4, numPartitions = 3], Update, 0, 0, 2
    ...    +- *(3) HashAggregate(keys=[origin#2], functions=[merge_avg(delay#3), merge_count(1)], output=[origin#2, sum#35, count#36L, count#38L])
    ... '''
    >>> names = plan_names(plan)[0]["default"]
    >>> names.value, names.derived
    (('avg_delay_sum', 'avg_delay_count', 'n'), (Derived(name='avg_delay', sum=0, count=1),))
"""  # noqa: E501

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

PHYSICAL = "== Physical Plan =="
OPTIMIZED = "== Optimized Logical Plan =="

#: buffer fields of the aggregate functions whose layout statekit knows (Spark 4), by name;
#: a function may have more than one layout (a decimal ``sum`` keeps ``isEmpty`` too)
BUFFERS: dict[str, tuple[tuple[str, ...], ...]] = {
    "avg": (("sum", "count"),), "mean": (("sum", "count"),),
    "count": (("count",),),
    "sum": (("sum", "isEmpty"), ("sum",)),
    "min": (("min",),), "max": (("max",),),
    "first": (("first", "valueSet"),), "last": (("last", "valueSet"),),
    **{name: (("n", "avg", "m2"),) for name in (
        "stddev", "stddev_samp", "stddev_pop", "std", "variance", "var_samp", "var_pop")},
}
#: aggregates whose single buffer field is their result
ONE_TO_ONE = ("count", "min", "max", "sum")


@dataclass(frozen=True)
class Derived:
    """A column statekit computes from an average's buffer (Spark keeps only the buffer):
    ``sum / count`` of the value fields at these positions, null when ``count`` is 0."""

    name: str
    sum: int
    count: int


@dataclass(frozen=True)
class PartNames:
    """The person's names of one part's fields: entry ``i`` of ``key`` (``value``) names
    the ``i``-th field of Spark's ``key`` (``value``) struct; None, or no entry, keeps
    Spark's name."""

    key: tuple[str | None, ...] = ()
    value: tuple[str | None, ...] = ()
    derived: tuple[Derived, ...] = ()

    def __bool__(self) -> bool:
        return any(self.key) or any(self.value) or bool(self.derived)


# --- reading the plan's text ---------------------------------------------------------------
_CLOSING = {"[": "]", "(": ")", "{": "}"}
_ATTRIBUTE = re.compile(r"^((?:(?!#\d).)+)#\d+L?(?:-T\d+ms)?$")
_NODE_PREFIX = re.compile(r"^[\s:|+\-]*(?:\*\(\d+\)\s*)?~?")
_OP_ID = re.compile(r"\bopId = (\d+)\b")
_AGGREGATES = ("HashAggregate(", "ObjectHashAggregate(", "SortAggregate(")


class _Unreadable(Exception):
    """The plan's text is not as statekit reads it."""


def _enclosed(text: str, start: int) -> tuple[str, int]:
    """The text inside the bracket at ``text[start]`` and the index after its closing one."""
    stack = [_CLOSING[text[start]]]
    for i in range(start + 1, len(text)):
        char = text[i]
        if char in _CLOSING:
            stack.append(_CLOSING[char])
        elif char in ")]}":
            if char != stack.pop():
                raise _Unreadable(text)
            if not stack:
                return text[start + 1:i], i + 1
    raise _Unreadable(text)


def _items(text: str) -> list[str]:
    """A plan's list (``a#1, f(b#2, c), d``) as its items."""
    items, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char in _CLOSING:
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == "," and depth == 0:
            items.append(text[start:i].strip())
            start = i + 1
    last = text[start:].strip()
    if last or items:
        items.append(last)
    if any("more field" in item for item in items):  # Spark shortened the list
        raise _Unreadable(text)
    return items


def _list_after(text: str, marker: str) -> list[str]:
    at = text.find(marker)
    if at < 0:
        raise _Unreadable(text)
    return _items(_enclosed(text, at + len(marker) - 1)[0])


def attribute_name(item: str) -> str | None:
    """The column name of a plan's attribute (``origin#12`` → ``origin``,
    ``ts#4-T10000ms`` → ``ts``); None for an expression (``upper(origin#12)``).

    Example:
        >>> attribute_name("count#38L"), attribute_name("(value#1L % 3)")
        ('count', None)
    """
    found = _ATTRIBUTE.match(item.strip())
    return found.group(1) if found else None


def _aliases(item: str) -> tuple[str, str] | None:
    """``(expression, alias)`` of a plan's ``<expression> AS <alias>#<id>``."""
    at = item.rfind(" AS ")
    if at < 0:
        return None
    name = attribute_name(item[at + 4:])
    return (item[:at].strip(), name) if name is not None else None


def _sections(text: str) -> tuple[list[str], list[str]]:
    """The optimized logical plan's and the physical plan's nodes, one a line, each without
    the tree's drawing (``+- ``, ``:  ``), whole-stage codegen's ``*(n)`` and ``~``."""
    if PHYSICAL not in text:
        raise _Unreadable(text)
    logical, physical = text.split(PHYSICAL, 1)
    logical = logical.split(OPTIMIZED, 1)[-1]
    return ([_NODE_PREFIX.sub("", line) for line in logical.splitlines()],
            [_NODE_PREFIX.sub("", line) for line in physical.splitlines()])


# --- joins ----------------------------------------------------------------------------------
def _join_names(line: str) -> dict[str, PartNames]:
    """A join's parts named by its join keys: ``left``, its stores, ``right``, its stores."""
    start = len("StreamingSymmetricHashJoin ")
    left, after = _enclosed(line, start)
    right, _ = _enclosed(line, after + 2)
    out = {}
    for side, keys in (("left", _items(left)), ("right", _items(right))):
        names = [attribute_name(k) for k in keys]
        given = [n for n in names if n is not None]
        if len(set(given)) != len(given):  # two keys of one name: Spark's fieldN are clearer
            continue
        part = PartNames(key=tuple(names))
        if part:
            for name in (side, f"{side}-keyToNumValues", f"{side}-keyWithIndexToValue"):
                out[name] = part
    return out


# --- aggregations ---------------------------------------------------------------------------
def _split(functions: Sequence[str], buffer: Sequence[str]) -> list[tuple[str, ...]]:
    """Each function's buffer fields: known layouts matched from both ends, at most one
    function of a layout statekit does not know taking what is left between them."""
    names = [f[:f.index("(")] if "(" in f else f for f in functions]
    unknown = [i for i, n in enumerate(names) if n not in BUFFERS]
    if len(unknown) > 1:
        raise _Unreadable(str(functions))
    split: list[tuple[str, ...] | None] = [None] * len(functions)
    cut = unknown[0] if unknown else len(functions)
    at = 0
    for i in range(cut):
        layout = next((b for b in BUFFERS[names[i]] if tuple(buffer[at:at + len(b)]) == b),
                      None)
        if layout is None:
            raise _Unreadable(str(functions))
        split[i], at = layout, at + len(layout)
    end = len(buffer)
    for i in range(len(functions) - 1, cut, -1):
        layout = next((b for b in BUFFERS[names[i]]
                       if end - len(b) >= at and tuple(buffer[end - len(b):end]) == b), None)
        if layout is None:
            raise _Unreadable(str(functions))
        split[i], end = layout, end - len(layout)
    if unknown:
        if end <= at:
            raise _Unreadable(str(functions))
        split[cut] = tuple(buffer[at:end])
    elif at != end:
        raise _Unreadable(str(functions))
    return split  # type: ignore[return-value]


def _aggregation_names(save: str, merge: str, logical: Sequence[str]) -> PartNames:
    keys = _list_after(save, "StateStoreSave [")
    marker = "keys=[" if "keys=[" in merge else "key=["
    if _list_after(merge, marker) != keys:
        raise _Unreadable(merge)
    functions = [f.removeprefix("merge_") for f in _list_after(merge, "functions=[")]
    output = _list_after(merge, "output=[")
    if output[:len(keys)] != keys:
        raise _Unreadable(merge)
    buffer = [attribute_name(item) for item in output[len(keys):]]
    if None in buffer:
        raise _Unreadable(merge)
    split = _split(functions, buffer)  # type: ignore[arg-type]
    results = _results(logical, keys)
    aliases: dict[str, str] = {}
    for expression, alias in filter(None, map(_aliases, results)):
        aliases.setdefault(expression, alias)
    key_names = tuple(aliases.get(k) if attribute_name(k) is not None
                      and attribute_name(k).startswith("_groupingexpression") else None
                      for k in keys)
    value: list[str | None] = []
    derived = []
    for function, fields in zip(functions, split, strict=True):
        alias = aliases.get(function)
        kind = function[:function.index("(")] if "(" in function else function
        if alias is None:
            value += [None] * len(fields)
        elif kind in ONE_TO_ONE and len(fields) == 1:
            value.append(alias)
        else:
            if kind in ("avg", "mean") and fields == ("sum", "count"):
                derived.append(Derived(alias, len(value), len(value) + 1))
            value += [f"{alias}_{field}" for field in fields]
    return PartNames(key=key_names, value=tuple(value), derived=tuple(derived))


def _results(logical: Sequence[str], keys: list[str]) -> list[str]:
    """The result expressions of the logical ``Aggregate`` grouped by ``keys``."""
    for line in logical:
        if line.startswith("Aggregate ["):
            grouping, after = _enclosed(line, len("Aggregate "))
            if _items(grouping) == keys:
                return _items(_enclosed(line, after + 2)[0])
    return []


# --- the plan -------------------------------------------------------------------------------
def plan_names(text: str) -> dict[int, dict[str, PartNames]] | None:
    """The person's names of each operator's parts, from a streaming query's
    ``explain(extended=True)`` text: operator id → part name → ``PartNames``. Operators and
    parts the plan names nothing of are left out (they keep Spark's names); None when the
    text holds no physical plan (``"No physical plan. Waiting for data."``).

    Example:
        >>> plan_names("No physical plan. Waiting for data.") is None
        True
    """
    try:
        logical, physical = _sections(text)
    except _Unreadable:
        return None
    out: dict[int, dict[str, PartNames]] = {}
    for i, line in enumerate(physical):
        op = _OP_ID.search(line)
        if op is None:
            continue
        try:
            if line.startswith("StreamingSymmetricHashJoin ["):
                parts = _join_names(line)
            elif line.startswith("StateStoreSave ["):
                merge = next((m for m in physical[i + 1:] if m.startswith(_AGGREGATES)), "")
                names = _aggregation_names(line, merge, logical)
                parts = {"default": names} if names else {}
            else:
                continue
        except (_Unreadable, ValueError, IndexError):
            continue
        if parts:
            out[int(op.group(1))] = parts
    return out
