"""Write a stateful processor: a class with stores, ``init(stores)``, ``process(key, rows)``.

A person subclasses ``Processor``: ``stores()`` declares named stores
(``statekit.processor.layout``), ``output`` is the DDL of the rows ``process``
returns, ``time`` is the processor's clock, and methods marked ``@schedule(every)``
are punctuations. ``start_processor`` (``statekit.processor.query``) runs it with
Spark's ``transformWithStateInPandas``; ``ProcessorRunner`` (``statekit.processor.runner``)
is the ``StatefulProcessor`` Spark calls.

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

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from statekit.durations import to_millis
from statekit.errors import BadArgument
from statekit.processor.fields import (
    TYPES,
    Field,
    fields,
)
from statekit.processor.layout import StoreLayout, StoreSpec
from statekit.processor.stores import Stores

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
