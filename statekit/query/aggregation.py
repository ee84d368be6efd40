"""The aggregation a ``QuerySpec`` describes, over parsed events (still streaming).

Example:
    >>> spec = QuerySpec(keys=["player"], window=tumbling("1 hour"))     # doctest: +SKIP
    >>> plan = aggregate(events, spec)                                  # doctest: +SKIP
"""

from __future__ import annotations

from pyspark.sql import DataFrame

from statekit.durations import spark_interval
from statekit.errors import BadArgument
from statekit.model.query_spec import QuerySpec
from statekit.query.parsing import require_types


def aggregate(events: DataFrame, spec: QuerySpec) -> DataFrame:
    """The aggregation of ``spec`` over parsed events (still streaming).

    Time and session windows: a watermarked ``groupBy(window, keys)``. A running
    aggregate (no window): ``groupBy(keys)`` — its state only grows — or, with a TTL,
    ``transformWithStateInPandas`` with ``statekit.spark_state.running_aggregate.RunningAggregate``.
    """
    missing = [c for c in spec.input_columns if c not in events.columns]
    if missing:
        raise BadArgument("column", missing[0], events.columns)
    require_types(events.schema, spec)
    aggs = [a.column_expr() for a in spec.aggregates]
    if spec.kind == "running" and spec.ttl is None:
        return events.groupBy(*spec.keys).agg(*aggs)
    if spec.kind == "running":
        from statekit.spark_state.running_aggregate import (
            RunningAggregate,
            buffer_fields,
            output_schema,
        )

        types = {f.name: f.dataType.simpleString() for f in events.schema.fields}
        processor = RunningAggregate(spec, buffer_fields(spec, types))
        return events.groupBy(*spec.keys).transformWithStateInPandas(
            processor, output_schema(spec, types, types), "Update", "ProcessingTime")
    return (events.withWatermark(spec.event_time, spark_interval(spec.watermark))
            .groupBy(spec.window.column(spec.event_time), *spec.keys)
            .agg(*aggs))
