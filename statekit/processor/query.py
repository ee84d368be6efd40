"""Run a ``Processor`` on a stream, and read its stores by name while it runs.

``start_processor`` groups the events by ``keys`` and runs the processor with Spark's
``transformWithStateInPandas`` (RocksDB state store, changelog checkpointing, as every
statekit query). The returned ``ProcessorQuery`` (a ``QueryHandle``, as every handle)
waits, reports progress and reads each store as the inspect readers read any
transformWithState state variable: ``snapshot(store, batch)``, ``changes(store,
from_batch, to_batch)``, ``timers()``; ``state(store)`` is the inspect reader itself;
``layout()`` says which columns each has.

Example:
    >>> from statekit.processor.examples import SessionTracker          # doctest: +SKIP
    >>> q = start_processor("games", SessionTracker(gap="30 minutes"),  # doctest: +SKIP
    ...                     keys=["player"], event_time="ts", watermark="10 minutes",
    ...                     event_schema=games.schema, kafka=broker)
    >>> q.wait_until_drained(); q.snapshot("sessions")                  # doctest: +SKIP
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pandas as pd
from pyspark.sql import DataFrame, SparkSession

from statekit.deprecation import deprecated
from statekit.errors import BadArgument, ProcessorError, StatekitError
from statekit.inspect.operators import Part
from statekit.inspect.part_views import StateView
from statekit.model.query_handle import choose_part, first_batch
from statekit.options.query import RunOptions, SourceOptions
from statekit.processor.frame import processor_frame
from statekit.processor.layout import StoreLayout
from statekit.processor.processor import Plan, Processor
from statekit.query.failures import spark_message
from statekit.query.restart_rehearsal import rehearse_restart
from statekit.query.run_start import Started, new_run, start_recorded
from statekit.query.running import RunningQuery
from statekit.spark_state.checkpoint import Checkpoint
from statekit.spark_state.state_reader import StateReader

_RAISED = re.compile(r"ProcessorError: (.+)")


class ProcessorQuery(RunningQuery):
    """A running processor: wait on it, read its progress and its stores by name.

    A ``QueryHandle`` (``statekit.model.query_handle``): its parts are the processor's
    stores (``parts()``, and ``"timers"``, Spark's timers of the processor), so
    ``snapshot(store)``, ``changes(store, from_batch)`` and ``state(store)`` read one by its
    name, and a processor with one store needs none. ``processor`` and ``plan`` say what
    runs. A processor keeps no changelog topic: ``changelog_topics()`` is empty and
    ``attach(q.query, kafka=...)`` ships one per store.
    """

    def __init__(self, spark: SparkSession, processor: Processor, plan: Plan,
                 checkpoint: Checkpoint, started: Started, sink: str = "noop"):
        checkpoint = Checkpoint(checkpoint)
        super().__init__(spark, checkpoint, started, StateReader(spark, checkpoint, None))
        self.processor, self.plan, self._sink = processor, plan, sink
        self._parts: dict[str, Part] | None = None

    @property
    def _runs_batches_without_input(self) -> bool:
        # ProcessingTime mode runs a batch on every trigger, to fire timers and expire TTLs
        return self.plan.time == "processing"

    # --- failures: the processor's own error, with its own message ---------------------------
    def _processor_error(self, error: BaseException) -> BaseException:
        """``error`` as the ``ProcessorError`` the processor raised in Spark's Python worker,
        found in the raw text of the query's exception and its causes (``failure_text``
        keeps the message but drops the Python error's type); else ``error`` itself."""
        found = _RAISED.findall("\n".join(_raw_texts(self.query.exception() or error)))
        if not found:
            return error
        raised = ProcessorError(f"query {self.name!r} failed: "
                                f"{spark_message(found[-1])}")
        raised.spark_error = getattr(error, "spark_error", None)
        return raised

    def wait_for_batches(self, n: int, timeout: float = 120.0) -> int:
        try:
            return super().wait_for_batches(n, timeout)
        except StatekitError as err:
            raise self._processor_error(err) from None

    def wait_until_drained(self, timeout: float = 300.0) -> int:
        try:
            return super().wait_until_drained(timeout)
        except StatekitError as err:
            raise self._processor_error(err) from None

    def late_events(self) -> int:
        """Input rows dropped because they were behind the watermark, over the batches whose
        progress reports are kept: Spark's ``numRowsDroppedByWatermark`` of the operator,
        which for transformWithState counts rows (it filters each input row before grouping,
        against the previous batch's watermark). A statekit aggregation counts its late
        events by reading its input again (``StatefulQuery.late_events``); a processor has
        no window to judge lateness by but the one Spark applies, so its count is Spark's.
        """
        frame = self.progress()
        return int(frame["dropped_by_watermark"].fillna(0).sum()) if len(frame) else 0

    def explain(self, key: object, window: object = None):
        """Refused by name: ``explain`` recomputes ``start_query``'s aggregates from their
        input records, and a processor's stores hold what its code put there."""
        raise BadArgument("query", self.name, "a query start_query runs (a processor's stores "
                          "hold what its code put there: read them with snapshot(store) and "
                          "changes(store, ...))")

    # --- the stores: the QueryHandle verbs --------------------------------------------------
    def parts(self) -> list[str]:
        """The processor's stores by name, then ``"timers"``."""
        return [*(store.name for store in self.plan.stores), "timers"]

    def layout(self) -> pd.DataFrame:
        """One row per store: ``store``, ``kind``, ``state_variable`` (its Spark state
        variable: the same name), ``variable_type``, ``key_columns``, ``value_columns``,
        ``ttl_ms``, ``retention_ms`` (``statekit.processor.layout``)."""
        rows = [lay.as_row() for lay in self.plan.layouts()]
        return pd.DataFrame(rows, columns=["store", "kind", "state_variable", "variable_type",
                                           "key_columns", "value_columns", "ttl_ms",
                                           "retention_ms"])

    def store_layout(self, store: str) -> StoreLayout:
        """Where ``store`` lies in Spark's state (its key and value columns)."""
        return self.plan.store(store).layout(self.plan.grouping_keys)

    def state(self, part: str | None = None) -> StateView:
        """The inspect reader of a store (or of ``"timers"``): ``snapshot``, ``changes``,
        ``schema``, as ``open_checkpoint(...).state(store)`` gives for any query. ``part``
        may be left out when the processor has one store."""
        stores = self.parts()[:-1]
        store = choose_part(part, stores, f"processor query {self.name!r}")
        if store != "timers":
            self.plan.store(store)
        if self._parts is None or store not in self._parts:
            if self.last_batch < 0:
                raise StatekitError(f"processor query {self.name!r} has committed no batch "
                                    "yet: wait_for_batches(1) first")
            from statekit.inspect.view import open_checkpoint

            operator = open_checkpoint(self.checkpoint, self.spark).operator(0)
            self._parts = {name: p for p in operator.parts for name in p.names}
        return StateView(self.checkpoint, self._parts[store], self.spark)

    def store(self, store: str) -> StateView:
        """Deprecated alias of ``state(store)`` (every handle names its reader ``state``)."""
        deprecated("ProcessorQuery.store(name)", "state(name)")
        return self.state(store)

    def snapshot(self, part: str | None = None, batch: int | None = None,
                 sort: bool = False) -> pd.DataFrame:
        """A store's entries after ``batch`` (the last committed when None): the layout's
        key and value columns, then ``partition``; ``sort=True`` orders them by partition
        and key."""
        return self.state(part).snapshot(batch, sort=sort)

    def changes(self, part: str | None = None, from_batch: int | None = None,
                to_batch: int | None = None) -> pd.DataFrame:
        """Every put and delete batches ``from_batch..to_batch`` made to a store (the last
        batch's when both are None): ``batch``, ``change``, the layout's columns (a delete
        has no value), ``partition``."""
        view = self.state(part)
        from_batch = first_batch(from_batch, to_batch, self.last_batch)
        return view.changes(from_batch, to_batch)

    def timers(self, batch: int | None = None) -> pd.DataFrame:
        """The registered timers after ``batch``: grouping key columns,
        ``expiration_timestamp_ms`` (retention and punctuation timers alike), ``partition``."""
        return self.state("timers").snapshot(batch, sort=True)

    def metadata(self) -> pd.DataFrame:
        """The operator and its parts (every store, the timers), as ``open_checkpoint``
        lists them."""
        from statekit.inspect.view import open_checkpoint

        return open_checkpoint(self.checkpoint, self.spark).states()

    def changelog_topics(self) -> dict[str, str]:
        """None: a processor keeps no changelog topic (``attach(q.query, kafka=...)`` ships
        one per store)."""
        return {}

    def read_changelog(self, part: str | None = None, from_batch: int | None = None,
                       to_batch: int | None = None, *, progress: bool | None = None):
        """Refused: a processor keeps no changelog topic. ``attach(q.query, kafka=...)``
        ships each store to one, and that handle's ``read_changelog(store)`` reads it."""
        if part is not None:
            self.state(part)  # a name that is no store is named first
        raise StatekitError(f"processor query {self.name!r} keeps no changelog topic: "
                            f"statekit.attach(q.query, kafka=<broker>) ships each store to "
                            f"one, and that handle's read_changelog(<store>) reads it back")

    def output(self) -> pd.DataFrame:
        """The rows the processor returned so far (``sink="memory"`` only)."""
        if self._sink != "memory":
            raise BadArgument("sink of this query", self._sink,
                              "memory (start_processor(..., sink='memory')) to keep the output")
        return self.spark.table(self.name).toPandas()

    def __repr__(self) -> str:
        state = "active" if self.is_active else "stopped"
        return (f"ProcessorQuery({self.name!r}, {type(self.processor).__name__}, {state}, "
                f"last_batch={self.last_batch})")


def _raw_texts(exc: BaseException, depth: int = 6) -> list[str]:
    """The messages of ``exc`` and of the causes Spark wrapped it in, as Spark wrote them."""
    texts = []
    while exc is not None and depth > 0:
        texts.append(str(exc))
        exc, depth = getattr(exc, "_cause", None) or exc.__cause__, depth - 1
    return texts


def start_processor(
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
) -> ProcessorQuery:
    """Run ``processor`` over ``source``, grouped by ``keys``; returns a ``ProcessorQuery``.

    Args:
        source: a Kafka topic (JSON values parsed with ``event_schema``; malformed events are
            kept aside as ``start_query`` does) or a streaming DataFrame.
        processor: an instance of a ``Processor`` subclass.
        keys: the grouping key columns (Spark's grouping key: each store is scoped to it).
        event_time, watermark: the event-time column and the watermark delay
            (``"10 minutes"``); a processor on event time (``time = "event"``) needs a
            watermark, from these or from a source that already has one.
        source_options: where to read and how much (``SourceOptions``; ``event_schema``
            is required for a topic).
        run: how it runs (``RunOptions``): ``output_mode`` ``append`` (default) or
            ``update``; ``sink`` noop (default), memory (a table named ``name``:
            ``output()``), console; ``name`` default ``processor``. No changelog.
        spark: the session (``statekit.spark_session()`` when None).
        shortcuts: the fields of ``source_options`` (``kafka``, ``event_schema``,
            ``required_fields``, ``starting_offsets``, ``ending_offsets``,
            ``max_offsets_per_trigger``, ``fail_on_data_loss``) and of ``run`` (``name``,
            ``checkpoint``, ``trigger``, ``sink``, ``output_mode``) as keyword arguments
            (not with the object), and ``max_event_time_ahead`` (``start_query``'s; used
            with ``event_time``), routed by ``SHORTCUTS``.

    Nothing starts when a declaration is wrong.

    Raises:
        BadArgument: the processor's declarations (``plan_of``), a missing watermark, an
            unknown key or event-time column, a bad sink or output mode, an unknown
            keyword or one given both ways.
        IncompatibleRestart: the checkpoint holds state Spark would refuse this processor
            on (rehearsed first: ``statekit.check_restart``).
    """
    frame = processor_frame(source, processor, keys=keys, event_time=event_time,
                            watermark=watermark, source_options=source_options, run=run,
                            spark=spark, **shortcuts)
    run, spark = frame.run, frame.spark
    checkpoint = new_run(spark, run.name, run.checkpoint)
    rehearse_restart(frame.frame, checkpoint, output_mode=run.output_mode).require()
    first_batch = checkpoint.last_batch + 1
    query = start_recorded(frame.frame, spark, checkpoint, run)
    started = Started(query, frame.malformed, first_batch,
                      available_now="availableNow" in run.trigger_kwargs())
    return ProcessorQuery(spark, processor, frame.plan, checkpoint, started, run.sink)
