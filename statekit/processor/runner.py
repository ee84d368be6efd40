"""The ``StatefulProcessor`` Spark runs for a person's ``Processor``: stores over Spark's map
states, the person's calls, retention and punctuation timers, and the output checked.

``ProcessorRunner(processor, plan_of(processor, keys))`` is what ``start_processor``
(``statekit.processor.query``) hands to ``transformWithStateInPandas``; ``conform`` checks
each frame a call returns against the declared output.

Example:
    >>> from statekit.processor.processor import Plan
    >>> import pandas as pd
    >>> plan = Plan((), (), None, "", (), ())
    >>> conform(pd.DataFrame(), plan, "process").empty
    True
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import pandas as pd
from pyspark.sql.streaming.stateful_processor import StatefulProcessor

from statekit.errors import ProcessorError
from statekit.processor.fields import (
    check_ddl_column,
    from_millis,
    struct,
)
from statekit.processor.map_store import StoreContext
from statekit.processor.processor import Plan, Processor
from statekit.processor.stores import STORE_CLASSES, Stores


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
