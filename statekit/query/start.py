"""``start_query``: start a stateful windowed aggregation over a Kafka topic (or any
streaming DataFrame) and get its ``StatefulQuery``.

It reads JSON events (``statekit.query.source``), keeps malformed events aside (the null
rule: ``statekit.query.parsing``), applies the event-time watermark, groups by window and
keys (``statekit.query.aggregation``) and runs the aggregation with Spark's RocksDB state
store, after checking that the checkpoint's state fits the query
(``statekit.query.restart_check``). Its keyword shortcuts are routed by ``SHORTCUTS``.

Example:
    >>> q = start_query("games", keys=["player"], window=tumbling("10 minutes"),
    ...                 aggregates=["count", "sum(score)"], kafka=broker)  # doctest: +SKIP
    >>> q.wait_until_drained()                                            # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from typing import Any

from confluent_kafka import KafkaException
from pyspark.sql import DataFrame, SparkSession

from statekit.changelog.naming import changelog_topic
from statekit.changelog.writer import ChangelogWriter
from statekit.errors import BadArgument, StatekitError
from statekit.model.query_spec import Aggregate, QuerySpec
from statekit.options.base import route, settle
from statekit.options.query import RunOptions, SourceOptions
from statekit.query.aggregation import aggregate
from statekit.query.input_replay import FileInput, KafkaInput, record_start
from statekit.query.restart_check import record_query, require_restartable, session_settings
from statekit.query.run_start import Started, new_run, start_recorded
from statekit.query.source import source_events
from statekit.query.stateful import StatefulQuery
from statekit.spark.progress_listener import follow

_SPEC_ARGUMENTS = ("keys", "window", "aggregates", "event_time", "watermark", "ttl",
                   "max_event_time_ahead")
#: a keyword argument left out (for ``max_event_time_ahead``, None is a value: no bound)
_UNSET: Any = object()


def _spec_of(spec: QuerySpec | None, given: dict) -> QuerySpec:
    """``spec``, or one built from the keyword arguments given (not both)."""
    named = {k: v for k, v in given.items()
             if v is not _UNSET and (v is not None or k == "max_event_time_ahead")}
    if spec is not None:
        if not isinstance(spec, QuerySpec):
            raise BadArgument("spec", spec, "a QuerySpec (or leave it out and pass keys=, "
                                            "window=, aggregates=, ...)")
        if named:
            raise BadArgument(f"{', '.join(named)} with spec", named,
                              "a QuerySpec or its keyword arguments, not both")
        return spec
    if "aggregates" in named and isinstance(named["aggregates"], (str, Aggregate)):
        named["aggregates"] = [named["aggregates"]]
    return QuerySpec(**{"keys": None, "window": None, **named})


#: ``start_query``'s keyword shortcuts, each to where it goes (the field of that name there):
#: ``spec`` (``QuerySpec``), ``source`` (``SourceOptions``) or ``run`` (``RunOptions``)
SHORTCUTS: dict[str, str] = {**dict.fromkeys(_SPEC_ARGUMENTS, "spec"),
                             **dict.fromkeys(SourceOptions.field_names(), "source"),
                             **dict.fromkeys(RunOptions.field_names(), "run")}


def start_query(
    source: str | DataFrame,
    spec: QuerySpec | None = None,
    *,
    source_options: SourceOptions | None = None,
    run: RunOptions | None = None,
    spark: SparkSession | None = None,
    **shortcuts: Any,
) -> StatefulQuery:
    """Start the windowed aggregation; returns a handle to wait on and to read state from.

    Args:
        source: a Kafka topic name (JSON values, parsed with ``event_schema``), or a
            streaming DataFrame: with a ``value`` column it is parsed the same way,
            otherwise its columns are used as they are.
        spec: what to compute (a ``QuerySpec``). ``window=None`` is a running aggregate
            per key: its state grows with every key unless a ``ttl`` forgets idle keys.
        source_options: where to read and how much (``SourceOptions``: ``kafka``,
            ``event_schema``, ``required_fields``, offsets); default ``SourceOptions()``.
        run: how the query runs (``RunOptions``: ``name``, ``checkpoint``, ``trigger``,
            ``sink``, ``output_mode``, ``changelog``, ``store_name``); default
            ``RunOptions()``, named ``statekit``.
        spark: the session (``statekit.spark_session()`` when None).
        shortcuts: any field of those three as a keyword argument, routed by ``SHORTCUTS``:
            ``keys``, ``window``, ``aggregates``, ``event_time``, ``watermark``, ``ttl``,
            ``max_event_time_ahead`` build the ``QuerySpec`` (its defaults for those left
            out; not with ``spec``); ``kafka``, ``event_schema``, ``required_fields``,
            ``starting_offsets``, ``ending_offsets``, ``max_offsets_per_trigger``,
            ``fail_on_data_loss`` the ``SourceOptions`` (not with ``source_options``);
            ``name``, ``checkpoint``, ``trigger``, ``sink``, ``output_mode``,
            ``changelog``, ``store_name``, ``changelog_topic_config`` the ``RunOptions`` (not with
            ``run``).

    The null rule: an event is malformed (counted, kept aside in ``malformed()``) when its
    value is not UTF-8 or not a JSON object, when a field holds a value of the wrong type,
    when a group key, the event time or a required field is missing or null, or when the
    event time lies more than ``max_event_time_ahead`` (default "1 day", None for no bound)
    after its Kafka record's timestamp; any other field may be null or absent (read as
    null), and ``count`` counts the event while ``sum/min/max/avg(col)`` skip the null.
    Starting again with the same checkpoint resumes exactly where the query stopped. The
    changelog (``statekit.changelog``) is on by default when ``kafka`` is given;
    ``changelog=False`` switches logging off, like Kafka Streams' ``withLoggingDisabled``.

    Raises:
        BadArgument: an unknown keyword (named, with the accepted ones), a setting given
            both ways (``trigger=`` with ``run=``), a bad value.
        IncompatibleRestart: ``checkpoint`` holds state this query cannot restart on (another
            key, other aggregates, another kind of window: ``statekit.check_restart`` names
            what changed, what Spark would say and what to do); nothing has started.

    Example:
        >>> from statekit.datasets import game_events                        # doctest: +SKIP
        >>> games = game_events()                                            # doctest: +SKIP
        >>> q = start_query("games", games.spec,                             # doctest: +SKIP
        ...                 source_options=SourceOptions(kafka=broker,
        ...                                              event_schema=games.schema),
        ...                 run=RunOptions(name="board", trigger="1 second"))
        >>> q = start_query("games", games.spec, kafka=broker,               # doctest: +SKIP
        ...                 event_schema=games.schema, name="board")         # the same
    """
    from statekit.spark.session import spark_session

    routed = route(shortcuts, SHORTCUTS, "start_query")
    source_options = settle(source_options, SourceOptions, routed.get("source", {}),
                            "source_options")
    run = settle(run, RunOptions, routed.get("run", {}), "run")
    spec = _spec_of(spec, routed.get("spec", {}))
    name = run.name or "statekit"
    output_mode = run.output_mode
    if output_mode is None:
        output_mode = "append" if spec.kind == "session" else "update"
    if spec.kind == "session" and output_mode != "append":
        raise BadArgument("output mode for session windows", output_mode, ["append"])
    if spec.kind == "running" and output_mode != "update":
        raise BadArgument("output mode for a running aggregate", output_mode, ["update"])
    trigger_kwargs = run.trigger_kwargs()
    conn = source_options.kafka
    changelog = conn is not None if run.changelog is None else run.changelog
    if changelog and conn is None:
        raise BadArgument("kafka", None, "the Kafka cluster to write the changelog to "
                                         "(a KafkaConnection, 'host:port' or an EmbeddedBroker)")
    topic = changelog_topic(name, run.store_name) if changelog else None
    spark = spark or spark_session()
    checkpoint = new_run(spark, name, run.checkpoint)

    required = list(dict.fromkeys([*spec.required_columns, *source_options.required_fields]))
    event_schema = source_options.event_schema
    if event_schema is None:
        event_schema = spec.default_event_schema()
    events, malformed = source_events(
        source, spark, replace(source_options, event_schema=event_schema), required,
        event_time=spec.event_time, max_event_time_ahead=spec.max_event_time_ahead)

    first_batch = checkpoint.last_batch + 1
    plan = aggregate(events, spec)
    columns = events.schema
    require_restartable(spec, columns, checkpoint, session_settings(spark))
    with contextlib.suppress(OSError):  # a read-only checkpoint: the next check has less
        record_query(checkpoint, spec, columns)
    kafka_input = None
    if isinstance(source, str) and malformed is not None:
        kafka_input = KafkaInput(source, conn, event_schema, tuple(required))
        if not checkpoint.offset_batches():  # a fresh checkpoint: keep batch 0's start
            # best effort: without it, explain() takes batch 0 to start at the log start
            with contextlib.suppress(OSError, KafkaException, TimeoutError, StatekitError):
                record_start(checkpoint, kafka_input, source_options.starting_offsets)
    file_input = (FileInput(event_schema, tuple(required))
                  if not isinstance(source, str) and malformed is not None else None)
    query = start_recorded(plan, spark, checkpoint,
                           replace(run, name=name, output_mode=output_mode))
    handle = StatefulQuery(spark, spec, checkpoint,
                           Started(query, malformed, first_batch,
                                   available_now="availableNow" in trigger_kwargs),
                           kafka_input=kafka_input, file_input=file_input,
                           store_name=run.store_name)
    if topic:
        writer = ChangelogWriter(handle.reader, conn, topic,
                                 topic_config=run.changelog_topic_config).start()
        # each progress report follows a commit: the writer ships it now, not at its next look
        follow(spark, str(query.id), lambda _progress: writer.wake(), owned=True)
        handle.changelog = writer
    return handle
