"""Write a stateful processor: a class with stores, ``init(stores)``, ``process(key, rows)``.

A person subclasses ``Processor``: ``stores()`` declares named stores
(``statekit.processor.layout``), ``output`` is the DDL of the rows ``process``
returns, ``time`` is the processor's clock, and methods marked ``@schedule(every)``
are punctuations. ``start_processor`` (``statekit.processor.query``) runs it with
Spark's ``transformWithStateInPandas``; ``ProcessorRunner`` is the
``StatefulProcessor`` Spark calls.

How it maps onto Spark, and where Kafka Streams differs:

- ``process(key, rows)`` is called once per grouping key per micro-batch with all of
  that key's new rows as one pandas DataFrame (Kafka Streams calls ``process`` once per
  record). ``key`` is the grouping key's value (a tuple for several key columns).
- ``time`` is the clock of the whole processor, because Spark gives a transformWithState
  operator one time mode: ``"event"`` (EventTime: the clock is the watermark, so the
  input needs one), ``"processing"`` (ProcessingTime: the batch's processing time) or
  None (no timers: no punctuation, no retention). ``self.now`` holds the clock's value
  (a naive UTC ``pandas.Timestamp``) in every call. On event time Spark drops the rows
  older than the *previous* batch's watermark before ``process`` sees them, while
  ``self.now`` is this batch's watermark: a row may be older than ``self.now``.
- A punctuation (``@schedule("10 minutes")``) runs as a Spark **timer per grouping key**:
  ``method(key, timestamp)`` is called for each key that holds state in some store, once
  its clock passes the next multiple of the interval (once, however many intervals passed).
  Kafka Streams calls a punctuator once per task per interval, for all keys together.
- A TTL (per store) is Spark's state TTL: processing time, renewed by every write of an
  entry; Spark allows it only on ProcessingTime (``time = "processing"``).
- Window and session stores remove entries past their retention with timers on the
  processor's clock (Kafka Streams drops old segments by stream time).

Example:
    >>> from statekit.processor.layout import key_value_store
    >>> class Counter(Processor):
    ...     output = "player string, n long"
    ...     def stores(self):
    ...         return [key_value_store("counts", key="game string", value="n long")]
    ...     def init(self, stores):
    ...         self.counts = stores["counts"]
    ...     def process(self, key, rows):
    ...         for game, n in rows.groupby("game").size().items():
    ...             self.counts.put(game, (self.counts.get(game) or 0) + int(n))
    ...         return pd.DataFrame({"player": [key], "n": [len(rows)]})
    >>> plan_of(Counter(), ["player"]).time_mode
    'None'
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
from pyspark.sql.streaming.stateful_processor import StatefulProcessor

from statekit.durations import to_millis
from statekit.errors import BadArgument, ProcessorError
from statekit.processor.fields import (
    TYPES,
    Field,
    check_ddl_column,
    fields,
    from_millis,
    struct,
)
from statekit.processor.layout import StoreLayout, StoreSpec
from statekit.processor.map_store import StoreContext
from statekit.processor.stores import STORE_CLASSES, Stores

TIME_MODES = {"event": "EventTime", "processing": "ProcessingTime", None: "None"}
_EVERY = "__statekit_every_ms__"


def schedule(every: str) -> Callable[[Callable], Callable]:
    """Mark a method ``(self, key, timestamp)`` as a punctuation, run every ``every`` of the
    processor's clock for each grouping key holding state (see the module doc).

    Example:
        >>> class Evict(Processor):
        ...     time, output = "event", "k string"
        ...     @schedule("10 minutes")
        ...     def evict(self, key, timestamp): ...
        >>> plan_of(Evict(), ["k"]).punctuations
        (('evict', 600000),)
    """
    ms = to_millis(every, "punctuation interval")

    def mark(method: Callable) -> Callable:
        setattr(method, _EVERY, ms)
        return method

    return mark


class Processor:
    """Subclass me: declare ``stores()``, ``output`` and ``time``; write ``init`` and
    ``process``; mark punctuations with ``@schedule`` (see the module doc).

    Attributes:
        output: the DDL of the rows ``process`` and punctuations return
            (``"player string, n long"``); checked column by column.
        time: ``"event"``, ``"processing"`` or None (the module doc says what each means).
        now: the processor's clock during a call (None when ``time`` is None).
    """

    output: str = ""
    time: str | None = None
    now: pd.Timestamp | None = None

    def stores(self) -> Sequence[StoreSpec]:
        """The stores this processor uses (``key_value_store``, ``window_store``, ...)."""
        return ()

    def init(self, stores: Stores) -> None:
        """Called before processing, with the stores by name (``stores["counts"]``)."""

    def process(self, key: Any, rows: pd.DataFrame) -> Any:
        """Handle one grouping key's new rows; return a DataFrame, several (yield them), or
        None."""
        raise NotImplementedError(f"{type(self).__name__} must define process(key, rows)")


@dataclass(frozen=True)
class OutputColumn:
    """A column of the declared output, with its check (None: a type statekit does not
    check, such as an array)."""

    name: str
    field: Field | None


@dataclass(frozen=True)
class Plan:
    """A processor's declarations, checked: what ``ProcessorRunner`` and the query need."""

    grouping_keys: tuple[str, ...]
    stores: tuple[StoreSpec, ...]
    time: str | None
    output_ddl: str
    output: tuple[OutputColumn, ...]
    #: (method name, interval in ms), in the order the class defines them
    punctuations: tuple[tuple[str, int], ...]

    @property
    def time_mode(self) -> str:
        """Spark's ``timeMode`` for ``transformWithStateInPandas``."""
        return TIME_MODES[self.time]

    def layouts(self) -> list[StoreLayout]:
        return [spec.layout(self.grouping_keys) for spec in self.stores]

    def store(self, name: object) -> StoreSpec:
        for spec in self.stores:
            if spec.name == name:
                return spec
        raise BadArgument("store", name, [s.name for s in self.stores] or "none declared")


def _output_columns(ddl: object) -> tuple[OutputColumn, ...]:
    if not isinstance(ddl, str) or not ddl.strip():
        raise BadArgument("processor output", ddl,
                          "the DDL of the rows process() returns, e.g. 'player string, n long'")
    try:
        return tuple(OutputColumn(f.name, f) for f in fields(ddl, "output"))
    except BadArgument:
        from pyspark.sql.types import StructType

        try:
            parsed = StructType.fromDDL(ddl)
        except Exception as exc:
            raise BadArgument("processor output", ddl,
                              f"Spark DDL ({str(exc).splitlines()[0]})") from None
        out = []
        for f in parsed.fields:
            checked = fields(f"{f.name} {f.dataType.simpleString()}", "output") \
                if f.dataType.simpleString() in TYPES else (None,)
            out.append(OutputColumn(f.name, checked[0]))
        return tuple(out)


def plan_of(processor: object, grouping_keys: Sequence[str]) -> Plan:
    """Check ``processor``'s declarations for a query grouped by ``grouping_keys``.

    Raises:
        BadArgument: not a Processor instance; no output; a store declared twice or not a
            store; a store field named like a grouping key; an unknown ``time``; a
            punctuation, a window or a session store without a clock; a TTL off processing
            time (Spark allows TTLs only there).
    """
    if isinstance(processor, type):
        raise BadArgument("processor", processor.__name__,
                          f"an instance: {processor.__name__}(), not the class")
    if not isinstance(processor, Processor):
        raise BadArgument("processor", type(processor).__name__,
                          "an instance of a statekit.processor.Processor subclass")
    name = type(processor).__name__
    keys = tuple(grouping_keys)
    output = _output_columns(processor.output)
    time = processor.time
    if time not in TIME_MODES:
        raise BadArgument(f"time of {name}", time, "'event', 'processing' or None")
    specs = tuple(processor.stores())
    seen: set[str] = set()
    for spec in specs:
        if not isinstance(spec, StoreSpec):
            raise BadArgument(f"store of {name}", spec,
                              "key_value_store(...), window_store(...) or session_store(...)")
        if spec.name in seen:
            raise BadArgument(f"store name of {name}", spec.name,
                              "each name once: every store is its own Spark state variable, "
                              "named by the store")
        seen.add(spec.name)
        for f in (*spec.map_key, *spec.value):
            if f.name in keys:
                raise BadArgument(f"field of store {spec.name!r}", f.name,
                                  f"a name other than the grouping key columns {list(keys)} "
                                  "(a snapshot has the grouping key's columns too)")
        if spec.kind in ("window", "session") and time is None:
            raise BadArgument(f"time of {name}", None,
                              f"'event' or 'processing': the {spec.kind} store "
                              f"{spec.name!r} removes old entries by the processor's clock")
        if spec.ttl_ms is not None and time != "processing":
            raise BadArgument(f"time of {name}", time,
                              f"'processing': store {spec.name!r} has a TTL, and Spark allows "
                              "state TTLs only in ProcessingTime mode (one time mode per "
                              "operator)")
    punctuations = tuple((attr, getattr(getattr(type(processor), attr), _EVERY))
                         for attr in _methods(type(processor))
                         if hasattr(getattr(type(processor), attr), _EVERY))
    if punctuations and time is None:
        raise BadArgument(f"time of {name}", None,
                          f"'event' or 'processing': punctuation {punctuations[0][0]!r} runs "
                          "on the processor's clock")
    return Plan(keys, specs, time, processor.output, output, punctuations)


def _methods(cls: type) -> list[str]:
    """Attribute names of ``cls`` in definition order (base classes first)."""
    names: list[str] = []
    for klass in reversed(cls.__mro__):
        for attr in vars(klass):
            if attr not in names and callable(getattr(cls, attr, None)):
                names.append(attr)
    return names


class ProcessorRunner(StatefulProcessor, StoreContext):
    """The ``StatefulProcessor`` Spark runs: stores over map states, the person's calls,
    retention and punctuation timers, and the output check."""

    def __init__(self, processor: Processor, plan: Plan):
        self.processor, self.plan = processor, plan
        self._stores: dict = {}
        self._clock: int | None = None
        self._timers: set[int] = set()
        self._obsolete: set[int] = set()
        self._cleaned: dict[tuple, int] = {}
        self._punctuated: dict[tuple, int] = {}  # (key, punctuation) -> clock it last ran at

    # --- StoreContext ---------------------------------------------------------------------
    def clock_ms(self) -> int | None:
        return self._clock

    def want_timer(self, ms: int) -> None:
        self._timers.add(int(ms))

    def obsolete_timer(self, ms: int) -> None:
        self._obsolete.add(int(ms))

    # --- Spark's calls -------------------------------------------------------------------
    def init(self, handle) -> None:
        self._handle = handle
        self._stores = {}
        for spec in self.plan.stores:
            state = handle.getMapState(spec.name, struct(spec.map_key), struct(spec.value),
                                       spec.ttl_ms)
            self._stores[spec.name] = STORE_CLASSES[spec.kind](spec, state, self)
        self._cleaned, self._punctuated = {}, {}
        self.processor.init(Stores(self._stores))

    def handleInputRows(self, key, rows, timerValues) -> Iterator[pd.DataFrame]:
        self._begin(timerValues)
        frames = list(rows)
        frame = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
        yield from self._emit(self.processor.process(self._key(key), frame), "process()")
        self._finish()

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo) -> Iterator[pd.DataFrame]:
        expiry = expiredTimerInfo.getExpiryTimeInMs()
        self._begin(timerValues)
        clock = self._clock
        if clock is not None and self._cleaned.get(tuple(key)) != clock:
            for store in self._stores.values():
                if store.spec.retention_ms is not None:
                    store._expire(clock)
            self._cleaned[tuple(key)] = clock
        user_key = self._key(key)
        for attr, every in self.plan.punctuations:
            # several timers on multiples of ``every`` may expire for a key in one batch (its
            # tick, and retention timers that fall on one): the punctuation runs once a clock
            if expiry % every == 0 and self._punctuated.get((tuple(key), attr)) != clock:
                self._punctuated[(tuple(key), attr)] = clock
                yield from self._emit(getattr(self.processor, attr)(user_key, self.processor.now),
                                      f"punctuation {attr}()")
        self._finish()

    def close(self) -> None:
        pass

    # --- helpers ---------------------------------------------------------------------------
    def _key(self, key: tuple) -> Any:
        return key[0] if len(self.plan.grouping_keys) == 1 else tuple(key)

    def _begin(self, timer_values) -> None:
        time = self.plan.time
        if time == "event":
            self._clock = int(timer_values.getCurrentWatermarkInMs())
        elif time == "processing":
            self._clock = int(timer_values.getCurrentProcessingTimeInMs())
        else:
            self._clock = None
        self.processor.now = None if self._clock is None else from_millis(self._clock)
        self._timers, self._obsolete = set(), set()
        for store in self._stores.values():
            store._begin()

    def _finish(self) -> None:
        """Send the stores' writes, then set the timers they need and drop those no entry
        needs any more. A retention timer is set once, when its entry is new; punctuation
        ticks are looked up first (``listTimers``), as Spark logs a warning for a timer set
        twice."""
        for store in self._stores.values():
            store._flush()
        wanted = set(self._timers)
        ticks = set()
        if self.plan.punctuations and self._clock is not None and \
                any(store._has_entries() for store in self._stores.values()):
            ticks = {(self._clock // every + 1) * every for _, every in self.plan.punctuations}
        if ticks:
            wanted |= ticks - set(self._handle.listTimers())
        for ms in sorted(wanted):
            self._handle.registerTimer(ms)
        for ms in sorted(self._droppable()):
            self._handle.deleteTimer(ms)

    def _droppable(self) -> set[int]:
        """Timers of removed entries that no entry, tick or new entry needs, still ahead of
        the clock (an expired one fires in this batch and Spark deletes it then)."""
        drop = self._obsolete - self._timers
        if not drop or self._clock is None:
            return set()
        for store in self._stores.values():
            if store.spec.retention_ms is not None:
                kept = store._expiries()
                if kept is None:
                    return set()
                drop -= kept
        return {ms for ms in drop if ms >= self._clock
                and not any(ms % every == 0 for _, every in self.plan.punctuations)}

    def _emit(self, result: object, what: str) -> Iterator[pd.DataFrame]:
        if result is None:
            return
        items: Iterable = [result] if isinstance(result, pd.DataFrame) else result
        if not hasattr(items, "__iter__"):
            raise ProcessorError(f"{type(self.processor).__name__}.{what} returned "
                                 f"{type(result).__name__}; accepted: a pandas DataFrame, "
                                 "several (yield them), or None")
        for frame in items:
            if not isinstance(frame, pd.DataFrame):
                raise ProcessorError(f"{type(self.processor).__name__}.{what} gave "
                                     f"{type(frame).__name__} {_short(frame)}; accepted: "
                                     "pandas DataFrames with the declared output columns "
                                     f"({self.plan.output_ddl})")
            if frame.empty and len(frame.columns) == 0:  # pd.DataFrame(): nothing to emit
                continue
            yield conform(frame, self.plan, f"{type(self.processor).__name__}.{what}")


def conform(frame: pd.DataFrame, plan: Plan, what: str) -> pd.DataFrame:
    """``frame`` with the declared output's columns in order, or ProcessorError naming the
    column and value that do not fit."""
    names = [c.name for c in plan.output]
    columns = list(frame.columns)
    missing = [n for n in names if n not in columns]
    extra = [c for c in columns if c not in names]
    if missing or extra:
        said = (f"lacks column {missing[0]!r}" if missing else
                f"has column {extra[0]!r}, which is not declared")
        raise ProcessorError(f"{what} returned rows that do not fit the declared output: it "
                             f"{said}; declared: {plan.output_ddl}")
    for column in plan.output:
        if column.field is not None and len(frame):
            problem = check_ddl_column(frame, column.field)
            if problem is not None:
                raise ProcessorError(f"{what} returned rows that do not fit the declared "
                                     f"output: {problem}; declared: {plan.output_ddl}")
    return frame if columns == names else frame[names]


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
