"""Running aggregates per key, with no window: unbounded state, or bounded by a TTL.

Without a window, a streaming aggregation keeps one state row per key forever:
every new key adds a row and nothing ever removes one — the unbounded state the
seeds warn about. Spark's remedy for that shape is a **TTL**: with
``transformWithState`` a state variable can expire a set time (processing time)
after its last update, and Spark removes it. ``RunningAggregate`` is that
processor: one value state ``agg`` per key holding the aggregation buffer, with a
TTL, emitting the key's aggregates on every update (output mode ``update``).

The buffer has one field per aggregate (``count``, ``sum``, ``min``, ``max`` of
the column's type) and two for an average (``<name>_sum``, ``<name>_count``);
nulls are skipped as in SQL. ``statekit.spark_state.state_reader`` reads it back through
Spark's State Data Source (``stateVarName="agg"``) with the same final values a
plain aggregation would give.

Example:
    >>> from statekit.model.query_spec import QuerySpec
    >>> spec = QuerySpec(keys=["player"], window=None, aggregates=["count", "avg(score)"],
    ...                  ttl="10 minutes")
    >>> buffer_fields(spec, {"score": "bigint"})
    [('count', 'bigint'), ('avg_score_sum', 'double'), ('avg_score_count', 'bigint')]
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping

import pandas as pd
from pyspark.sql.streaming.stateful_processor import StatefulProcessor

from statekit.model.query_spec import QuerySpec

STATE_NAME = "agg"


def buffer_fields(spec: QuerySpec, column_types: Mapping[str, str]) -> list[tuple[str, str]]:
    """The aggregation buffer's (field, Spark type) pairs for ``spec``."""
    fields = []
    for agg in spec.aggregates:
        if agg.function == "count":
            fields.append((agg.name, "bigint"))
        elif agg.function == "avg":
            fields += [(f"{agg.name}_sum", "double"), (f"{agg.name}_count", "bigint")]
        elif agg.function == "sum":
            kind = column_types[agg.column]
            fields.append((agg.name, "bigint" if kind in ("int", "bigint", "smallint",
                                                          "tinyint") else "double"))
        else:
            fields.append((agg.name, column_types[agg.column]))
    return fields


def output_schema(spec: QuerySpec, key_types: Mapping[str, str],
                  column_types: Mapping[str, str]) -> str:
    """The DDL of the rows the processor emits: the keys, then the final aggregates."""
    finals = []
    for agg in spec.aggregates:
        if agg.function == "count":
            finals.append((agg.name, "bigint"))
        elif agg.function == "avg":
            finals.append((agg.name, "double"))
        else:
            finals.append(dict(buffer_fields(QuerySpec(spec.keys, None, [agg]), column_types)
                               ).popitem())
    cols = [(k, key_types[k]) for k in spec.keys] + finals
    return ", ".join(f"`{name}` {kind}" for name, kind in cols)


def _plain(value: object) -> object:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return value.item() if hasattr(value, "item") else value


class RunningAggregate(StatefulProcessor):
    """The running aggregate of one key in a value state with a TTL (see the module doc)."""

    def __init__(self, spec: QuerySpec, buffer: list[tuple[str, str]]):
        self.spec, self.buffer = spec, buffer

    def init(self, handle) -> None:
        schema = ", ".join(f"`{name}` {kind}" for name, kind in self.buffer)
        self.state = handle.getValueState(STATE_NAME, schema, self.spec.ttl_ms)

    def handleInputRows(self, key, rows: Iterator[pd.DataFrame], timerValues
                        ) -> Iterator[pd.DataFrame]:
        names = [name for name, _ in self.buffer]
        current = dict(zip(names, self.state.get(), strict=True)) if self.state.exists() \
            else dict.fromkeys(names)
        for frame in rows:
            for agg in self.spec.aggregates:
                name = agg.name
                if agg.function == "count":
                    n = len(frame) if agg.column is None else int(frame[agg.column].count())
                    current[name] = (current[name] or 0) + n
                    continue
                values = frame[agg.column].dropna()
                if values.empty:
                    continue
                if agg.function == "avg":
                    current[f"{name}_sum"] = (current[f"{name}_sum"] or 0.0) + float(values.sum())
                    current[f"{name}_count"] = (current[f"{name}_count"] or 0) + len(values)
                elif agg.function == "sum":
                    total = _plain(values.sum())
                    current[name] = total if current[name] is None else current[name] + total
                else:
                    found = _plain(values.min() if agg.function == "min" else values.max())
                    pick = min if agg.function == "min" else max
                    current[name] = found if current[name] is None else pick(current[name], found)
        self.state.update(tuple(_plain(current[n]) for n in names))
        row = dict(zip(self.spec.keys, key, strict=True))
        for agg in self.spec.aggregates:
            if agg.function == "avg":
                count = current[f"{agg.name}_count"]
                row[agg.name] = current[f"{agg.name}_sum"] / count if count else None
            else:
                row[agg.name] = current[agg.name]
        yield pd.DataFrame([row])

    def close(self) -> None:
        pass
