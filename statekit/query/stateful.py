"""Start a stateful windowed aggregation over a Kafka topic and look inside its state.

``start_query`` reads JSON events from a topic (or takes any streaming
DataFrame), keeps malformed events aside (the null rule: ``parse_events``),
applies an event-time watermark, groups by window and keys, and runs the
aggregation with Spark's RocksDB state store. The returned ``StatefulQuery``
waits, reports progress, and reads the state: ``snapshot()``, ``changes()``,
``metadata()``.

Example:
    >>> q = start_query("games", QuerySpec(keys=["player"], window=tumbling("10 minutes"),
    ...                                    aggregates=["count", "sum(score)"]),  # doctest: +SKIP
    ...                 source_options=SourceOptions(kafka=broker))
    >>> q.wait_until_drained()                                                # doctest: +SKIP
    >>> q.snapshot().nlargest(5, "sum_score")                                 # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import numbers
import warnings
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pandas as pd
from confluent_kafka import KafkaException
from pyspark.sql import DataFrame, SparkSession

from statekit.changelog.naming import changelog_topic
from statekit.changelog.writer import ChangelogWriter
from statekit.deprecation import deprecated
from statekit.errors import BadArgument, StatekitError
from statekit.model.query_handle import choose_part, first_batch
from statekit.model.query_spec import Aggregate, QuerySpec
from statekit.options.base import route, settle
from statekit.options.query import RunOptions, SourceOptions
from statekit.query.aggregation import aggregate
from statekit.query.failures import failure_text
from statekit.query.input_replay import (
    FileInput,
    KafkaInput,
    record_start,
)
from statekit.query.late_events import count_late_events
from statekit.query.parsing import MALFORMED_COLUMNS, MALFORMED_SCHEMA
from statekit.query.restart_check import record_query, require_restartable, session_settings
from statekit.query.running import RunningQuery, Started, new_run, start_recorded
from statekit.query.source import source_events
from statekit.spark_state.checkpoint import Checkpoint
from statekit.spark_state.progress import (
    input_ranges,
    kafka_offsets,
    late_watermark_ms,
)
from statekit.spark_state.spark_files import _ranges
from statekit.spark_state.state_reader import StateReader, to_pandas
from statekit.validate import (
    timeout_seconds,
)

if TYPE_CHECKING:
    from statekit.query.explain import KeyExplanation


class StatefulQuery(RunningQuery):
    """A running statekit aggregation: wait on it, read its progress and its state.

    A ``QueryHandle`` (``statekit.model.query_handle``): its one part is its store, named
    ``store_name`` (``"aggregate"`` unless ``start_query`` was told otherwise), so
    ``snapshot()``, ``changes()``, ``state()`` and ``read_changelog()`` need no part.

    Example:
        >>> q = start_query("games", keys=["player"], kafka=broker)      # doctest: +SKIP
        >>> q.wait_for_batches(2); q.snapshot(batch=1); q.changes(from_batch=1)  # doctest: +SKIP
        >>> q.close()                                                    # doctest: +SKIP
    """

    def __init__(self, spark: SparkSession, spec: QuerySpec, checkpoint: Checkpoint,
                 started: Started, changelog: ChangelogWriter | None = None,
                 kafka_input: KafkaInput | None = None, file_input: FileInput | None = None,
                 store_name: str = "aggregate"):
        checkpoint = Checkpoint(checkpoint)
        super().__init__(spark, checkpoint, started, StateReader(spark, checkpoint, spec),
                         changelog)
        self.spec = spec
        self._malformed_stream = started.malformed_stream  # None: not parsed here
        #: the store's name: its one part (and the middle of its changelog topic's name)
        self.store_name = store_name
        self._input = kafka_input  # what it reads, to read again (late events); None: not Kafka
        self._file_input = file_input  # text lines it parses from a streaming DataFrame

    @property
    def _runs_batches_without_input(self) -> bool:
        # a TTL'd running aggregate runs a batch on every trigger, to expire state
        return self.spec.ttl is not None

    # --- late events -----------------------------------------------------------------
    def late_events(self) -> int:
        """Events dropped because they arrived behind the watermark, over all committed batches
        (events, not the groups Spark's ``numRowsDroppedByWatermark`` counts: 299 late events
        of 12 windows and keys are 299 here, 12 there).

        Spark drops an event of batch ``B`` when its window ended at or before the watermark
        of batch ``B - 1`` (a hopping window's event counts once, when any of its windows
        had). Spark does not count events, so statekit counts them: a batch whose report
        says no group was dropped (or that ran before any watermark) has none; any other
        batch is read again from Kafka (the offset ranges of its offset log entry), parsed
        as the query parses, and its late events counted. Each batch's count is kept under
        ``_statekit/late/`` and never counted again, so the total is exact across restarts
        and lost reports. A batch that cannot be counted any more (its offset log entry is
        gone, or its records are no longer on the broker) is left out, with a warning.

        Raises:
            StatekitError: the query does not read a Kafka topic (statekit cannot read its
                input again): use ``progress()["dropped_by_watermark"]`` (groups).
        """
        if self.spec.kind == "running":
            return 0  # no watermark: nothing is ever late
        counts = self._late_counts()
        unknown = [b for b, n in counts.items() if n is None]
        if unknown:
            warnings.warn(f"late_events(): batches {_ranges(unknown)} of query {self.name!r} "
                          f"could not be counted (their offset log entries or records are gone); "
                          f"the total leaves them out", stacklevel=2)
        return int(sum(n for n in counts.values() if n))

    def _late_counts(self) -> dict[int, int | None]:
        """Late events per committed batch (None: cannot be counted)."""
        reports = {int(r["batch"]): r for r in self.progress().to_dict("records")}
        counts: dict[int, int | None] = {}
        todo: dict[int, int] = {}
        for batch in self.checkpoint.committed_batches():
            kept = self.checkpoint.late_count(batch)
            dropped = reports.get(batch, {}).get("dropped_by_watermark")
            late_ms = late_watermark_ms(self.checkpoint, batch)
            if kept is not None:
                counts[batch] = kept
            elif late_ms == 0 or (not pd.isna(dropped) and dropped == 0
                                  and not reports[batch]["recovered"]):
                counts[batch] = 0
            elif late_ms is None:
                counts[batch] = None
            else:
                todo[batch] = late_ms
        if todo:
            counts.update(self._count_late(todo))
        return counts

    def _count_late(self, batches: dict[int, int]) -> dict[int, int | None]:
        """Read ``batches`` (batch → late watermark, ms) again from Kafka and count their late
        events (one Spark job); keep each count beside the checkpoint (best effort)."""
        if self._input is None:
            raise StatekitError(
                f"query {self.name!r} does not read a Kafka topic, so statekit cannot read its "
                f"input again to count late events; Spark counts dropped groups (window and "
                f"key), not events: progress()['dropped_by_watermark']")
        ranges = {b: input_ranges(self.checkpoint, b) for b in batches}
        counted = count_late_events(self.spark, self._input, self.spec,
                                    {b: (r, batches[b]) for b, r in ranges.items() if r})
        out: dict[int, int | None] = {b: counted.get(b) for b in batches}
        for batch, n in out.items():
            if n is not None:
                with contextlib.suppress(OSError):  # a cache: a full disk just counts again
                    self.checkpoint.write_late_count(batch, n, batches[batch])
        return out

    # --- provenance ------------------------------------------------------------------
    def explain(self, key: object, window: object = None) -> KeyExplanation:
        """Why ``key`` holds its value: every input record of the key batch by batch (read
        back from Kafka, or from the files a text-line source read), those that did not count
        and why (malformed, late), the value
        after each batch, and the value recomputed from the records that counted
        (``statekit.query.explain``).

        ``key``: the group key's value, or a dict of every group key's; ``window``: one
        window's start (all the key's windows when None).

        Example:
            >>> why = query.explain("p7", window="2026-01-05 10:00")     # doctest: +SKIP
            >>> why.agrees, why.not_counted()                            # doctest: +SKIP
        """
        from statekit.query.explain import explain_key

        return explain_key(self, key, window)

    # --- malformed events -----------------------------------------------------------
    def malformed(self, timeout: float = 300.0) -> pd.DataFrame:
        """Malformed input records kept aside: key, value (text), topic, partition, offset, …

        The main query only counts them (so the input is read once); this call
        brings the parquet side table under the checkpoint up to date with an
        incremental, exactly-once ``availableNow`` run over the same input, then
        reads it. ``reason`` says what is wrong (see ``parse_events``). The side table
        keeps the raw bytes, so any value survives: ``key`` and ``value`` are text with
        bytes that are not UTF-8 escaped (``b"\\xff"`` → ``"\\xff"``), ``value_bytes`` the
        value exactly as it was in Kafka.
        """
        timeout = timeout_seconds(timeout)
        if self._malformed_stream is None:
            return pd.DataFrame(columns=MALFORMED_COLUMNS)
        data = str(self.checkpoint.malformed_data_dir)
        run = (self._malformed_stream.writeStream.queryName(f"{self.name}-malformed")
               .format("parquet").option("path", data)
               .option("checkpointLocation", str(self.checkpoint.malformed_checkpoint_dir))
               .trigger(availableNow=True).start())
        if not run.awaitTermination(timeout):
            run.stop()
            raise TimeoutError(f"keeping malformed records aside took over {timeout:.0f} s")
        if run.exception() is not None:
            raise StatekitError(f"keeping malformed records aside failed: "
                                  f"{failure_text(run.exception())}")
        if not any(self.checkpoint.malformed_data_dir.glob("*.parquet")):
            return pd.DataFrame(columns=MALFORMED_COLUMNS)
        frame = to_pandas(self.spark.read.schema(MALFORMED_SCHEMA).parquet(data))
        frame["value_bytes"] = frame["value"]
        for column in ("key", "value"):
            frame[column] = [None if raw is None else raw.decode("utf-8", "backslashreplace")
                             for raw in frame[column]]
        return frame[MALFORMED_COLUMNS].sort_values(["partition", "offset"]).reset_index(
            drop=True)

    def malformed_count(self) -> int:
        """Malformed input rows counted by the query so far (all runs of this checkpoint).

        The sum of the reports' observed counts when every batch that read input has one;
        otherwise (a report was lost) counted exactly from the ``malformed()`` side output,
        which it brings up to date: its records within the input the committed batches read.
        """
        frame = self.progress()
        if self._malformed_stream is None or not len(frame):
            return 0
        observed = frame["malformed_rows"] if "malformed_rows" in frame else \
            pd.Series(pd.NA, index=frame.index)
        read_input = frame["input_rows"].isna() | (frame["input_rows"] > 0)
        if not (observed.isna() & read_input).any():
            return int(observed.fillna(0).sum())
        ends = kafka_offsets(self.checkpoint.offset_log(self.last_batch)[2][0])
        kept = self.malformed()
        if ends is None or not len(kept):
            return len(kept)
        end = [ends.get((t, int(p)), -1) for t, p in zip(kept["topic"], kept["partition"],
                                                          strict=True)]
        return int((kept["offset"] < pd.Series(end, index=kept.index)).sum())

    # --- state: the QueryHandle verbs ---------------------------------------------------
    def parts(self) -> list[str]:
        """Its one part: ``[store_name]``."""
        return [self.store_name]

    def state(self, part: str | None = None) -> StateReader:
        """The reader of its store (``StateReader``: snapshots, change feed, schema)."""
        self._part(part)
        return self.reader

    def snapshot(self, part: str | None = None, batch: int | None = None,
                 sort: bool = False) -> pd.DataFrame:
        """The store after ``batch`` (the last committed when None), flattened: the window,
        the keys, each aggregate, ``partition`` (``StateReader.snapshot``).

        ``snapshot(3)`` (a batch in the part's place) still reads batch 3, with a
        ``DeprecationWarning``: write ``snapshot(batch=3)``."""
        part, batch = _legacy_batch("snapshot", part, batch)
        self._part(part)
        return self.reader.snapshot(batch, sort=sort)

    def changes(self, part: str | None = None, from_batch: int | None = None,
                to_batch: int | None = None) -> pd.DataFrame:
        """The change feed (puts and deletes) of batches ``from_batch..to_batch`` (the last
        batch's when both are None; through the last when ``to_batch`` is None).

        ``changes(2, 5)`` (batches in the part's place) still reads batches 2..5, with a
        ``DeprecationWarning``: write ``changes(from_batch=2, to_batch=5)``."""
        part, from_batch, to_batch = _legacy_span("changes", part, from_batch, to_batch)
        self._part(part)
        from_batch = first_batch(from_batch, to_batch, self.last_batch)
        return self.reader.changes(from_batch, to_batch)

    def metadata(self) -> pd.DataFrame:
        """Stateful operators and stores: partitions, first and last retained batch."""
        return self.reader.metadata()

    def _part(self, part: str | None) -> str:
        """``part`` checked: None or the store's name (or Spark's ``0/default``)."""
        name = choose_part(part, self.parts(), f"query {self.name!r}")
        if name not in (self.store_name, "default", "0/default"):
            raise BadArgument("part", part, f"the store of query {self.name!r}: "
                                            f"{self.store_name!r} (or leave it out)")
        return name

    # --- changelog ------------------------------------------------------------------
    @property
    def changelog_topic(self) -> str | None:
        """The store's changelog topic (None when logging is off): a shortcut of
        ``changelog_topics()``, which every handle has."""
        return self.changelog.topic if self.changelog is not None else None

    def changelog_topics(self) -> dict[str, str]:
        """``{store_name: topic}`` (empty when logging is off)."""
        return {} if self.changelog is None else {self.store_name: self.changelog.topic}

    def read_changelog(self, part: str | None = None, from_batch: int | None = None,
                       to_batch: int | None = None, *, progress: bool | None = None):
        """The changelog records shipped so far: a ``Changelog`` (see ``read_changelog``).

        ``read_changelog(2, 5)`` (batches in the part's place) still reads batches 2..5,
        with a ``DeprecationWarning``: write ``read_changelog(from_batch=2, to_batch=5)``.

        Raises:
            StatekitError: the query runs with its changelog switched off.
        """
        from statekit.changelog.reader import read_changelog

        part, from_batch, to_batch = _legacy_span("read_changelog", part, from_batch,
                                                  to_batch)
        self._part(part)
        if self.changelog is None:
            raise StatekitError(f"query {self.name!r} runs with its changelog switched off "
                                f"(start_query(..., changelog=False)): it has no changelog "
                                f"topic to read")
        self.changelog.raise_if_failed()
        return read_changelog(self.changelog.kafka, self.changelog.topic,
                              from_batch=from_batch, to_batch=to_batch, progress=progress)

    def __repr__(self) -> str:
        state = "active" if self.is_active else "stopped"
        return f"StatefulQuery({self.name!r}, {state}, last_batch={self.last_batch})"


def _legacy_batch(verb: str, part: object, batch: int | None) -> tuple[str | None, int | None]:
    """(part, batch) of ``snapshot``'s arguments, where a whole number in the part's place is
    the batch of the old spelling ``snapshot(batch)`` (deprecated)."""
    if _is_batch(part):
        if batch is not None:
            raise BadArgument("part", part, "a part name (a batch goes in batch=)")
        deprecated(f"{verb}({part}) with the batch first", f"{verb}(batch={part})",
                   stacklevel=4)  # the warning points at the caller of snapshot()
        return None, part
    return part, batch


def _legacy_span(verb: str, part: object, from_batch: int | None, to_batch: int | None
                 ) -> tuple[str | None, int | None, int | None]:
    """(part, from_batch, to_batch), where whole numbers in the first places are the old
    spelling ``changes(from_batch, to_batch)`` (deprecated)."""
    if _is_batch(part):
        if to_batch is not None:
            raise BadArgument("part", part, "a part name (batches go in from_batch= and "
                                            "to_batch=)")
        deprecated(f"{verb}({part}, ...) with batches first",
                   f"{verb}(from_batch={part}, to_batch=...)", stacklevel=4)
        return None, part, from_batch
    return part, from_batch, to_batch


def _is_batch(value: object) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


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
        handle.changelog = ChangelogWriter(handle.reader, conn, topic,
                                           topic_config=run.changelog_topic_config).start()
    return handle
