"""The streaming DataFrame a ``Processor`` runs as: what ``start_processor`` starts and what
``statekit.check_restart`` rehearses on a checkpoint before it does.

``processor_frame`` checks the processor's declarations and the arguments, reads the source
(malformed events kept aside as ``start_query`` does), groups it by the keys and hands it to
Spark's ``transformWithStateInPandas``; nothing runs yet.

Example:
    >>> frame = processor_frame("games", SessionTracker(gap="30 minutes"),  # doctest: +SKIP
    ...                         keys=["player"], event_time="ts", watermark="10 minutes",
    ...                         event_schema=games.schema, kafka=broker)
    >>> frame.frame.isStreaming, frame.run.output_mode                      # doctest: +SKIP
    (True, 'append')
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from statekit.durations import spark_interval
from statekit.errors import BadArgument
from statekit.model.query_spec import DEFAULT_MAX_EVENT_TIME_AHEAD
from statekit.options.base import route, settle
from statekit.options.query import RunOptions, SourceOptions
from statekit.processor.processor import Plan, Processor, plan_of
from statekit.processor.runner import ProcessorRunner
from statekit.query.source import source_events

#: The column metadata Spark sets on an event-time column by ``withWatermark``.
WATERMARK_METADATA = "spark.watermarkDelayMs"
OUTPUT_MODES = {"append": "Append", "update": "Update"}
#: ``start_processor``'s keyword shortcuts, each to where it goes (the field of that name):
#: ``source`` (``SourceOptions``), ``run`` (``RunOptions``; a processor keeps no changelog)
#: or ``time`` (how far an event time may lie ahead of its record)
SHORTCUTS: dict[str, str] = {**dict.fromkeys(SourceOptions.field_names(), "source"),
                             **dict.fromkeys(("name", "checkpoint", "trigger", "sink",
                                              "output_mode"), "run"),
                             "max_event_time_ahead": "time"}


@dataclass(frozen=True)
class ProcessorFrame:
    """A processor ready to start: its streaming ``frame``, the ``malformed`` events' side
    output, its ``plan``, how it runs (``run``, name and output mode settled) and its
    ``spark`` session."""

    frame: DataFrame
    malformed: DataFrame | None
    plan: Plan
    run: RunOptions
    spark: SparkSession


def processor_frame(
    source: str | DataFrame,
    processor: Processor,
    *,
    keys: Sequence[str] | str,
    event_time: str | None = None,
    watermark: str | None = None,
    source_options: SourceOptions | None = None,
    run: RunOptions | None = None,
    spark: SparkSession | None = None,
    **shortcuts: Any,
) -> ProcessorFrame:
    """``processor`` over ``source`` grouped by ``keys``, as ``start_processor`` (whose
    arguments these are) would start it. BadArgument for a wrong declaration or argument."""
    from statekit.spark.session import spark_session

    routed = route(shortcuts, SHORTCUTS, "start_processor")
    options = settle(source_options, SourceOptions, routed.get("source", {}), "source_options")
    run = settle(run, RunOptions, routed.get("run", {}), "run")
    max_ahead = routed.get("time", {}).get("max_event_time_ahead", DEFAULT_MAX_EVENT_TIME_AHEAD)
    if run.changelog or run.store_name != RunOptions.store_name:
        raise BadArgument("changelog of a processor", run.changelog or run.store_name,
                          "none: a processor's stores keep no changelog (RunOptions' "
                          "changelog and store_name left out)")
    run = replace(run, name=run.name or "processor", output_mode=run.output_mode or "append")
    keys = [keys] if isinstance(keys, str) else list(keys)
    if not keys or not all(isinstance(k, str) for k in keys):
        raise BadArgument("keys", keys, "one or more column names (the grouping key)")
    plan = plan_of(processor, keys)
    if watermark is not None and event_time is None:
        raise BadArgument("event_time", None, "the event-time column the watermark follows")
    if plan.time == "event" and watermark is None and not (
            isinstance(source, DataFrame) and _has_watermark(source)):
        why = (f"punctuation {plan.punctuations[0][0]!r}" if plan.punctuations else
               "its window and session stores" if plan.stores else "it")
        raise BadArgument("watermark", None,
                          f"a watermark delay such as '10 minutes' (with event_time=): "
                          f"{type(processor).__name__} runs on event time, and {why} follow "
                          "the watermark (Spark's event-time clock); or a source DataFrame "
                          "with withWatermark applied")
    if isinstance(source, str) and options.event_schema is None:
        raise BadArgument("event_schema", None,
                          f"the JSON events' schema of topic {source!r} (Spark DDL)")
    spark = spark or spark_session()
    required = list(dict.fromkeys([*keys, *([event_time] if event_time else []),
                                   *options.required_fields]))
    events, malformed = source_events(
        source, spark, options, required, event_time=event_time,
        max_event_time_ahead=max_ahead if event_time else None)
    for column in required:
        if column not in events.columns:
            raise BadArgument("column", column, events.columns)
    if watermark is not None:
        events = events.withWatermark(event_time, spark_interval(watermark))
    grouped = events.groupBy(*keys).transformWithStateInPandas(
        ProcessorRunner(processor, plan), plan.output_ddl, OUTPUT_MODES[run.output_mode],
        plan.time_mode)
    return ProcessorFrame(grouped, malformed, plan, run, spark)


def _has_watermark(frame: DataFrame) -> bool:
    return any(WATERMARK_METADATA in (f.metadata or {}) for f in frame.schema.fields)
