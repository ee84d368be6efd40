"""What a statekit query computes: the window, the group keys, the aggregates.

Pure descriptions, validated when built, so a bad argument fails before Spark starts;
``to_dict``/``from_dict`` carry them to another process (a drill's worker) as JSON.

Nulls follow SQL (and pandas): ``count`` / ``count(*)`` count rows, ``count(col)``
counts the rows where ``col`` is not null, ``sum/min/max/avg(col)`` ignore nulls
(and are null for a window where every ``col`` is null).

Example:
    >>> spec = QuerySpec(keys=["player"], window=tumbling("10 minutes"),
    ...                  aggregates=["count", "sum(score)", "max(score)"])
    >>> [a.name for a in spec.aggregates]
    ['count', 'sum_score', 'max_score']
    >>> QuerySpec.from_dict(spec.to_dict()) == spec
    True
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from statekit.durations import ACCEPTED, spark_interval, to_millis
from statekit.errors import BadArgument

WINDOW_KINDS = ("tumbling", "hopping", "session")
#: How far an event time may lie after its Kafka record's timestamp (``max_event_time_ahead``).
DEFAULT_MAX_EVENT_TIME_AHEAD = "1 day"
AGGREGATE_FUNCTIONS = ("count", "sum", "min", "max", "avg")
#: How many aggregation-buffer fields Spark keeps in state per aggregate (numeric inputs).
BUFFER_WIDTH = {"count": 1, "sum": 1, "min": 1, "max": 1, "avg": 2}
_AGG_PATTERN = re.compile(r"^\s*(\w+)\s*(?:\(\s*([\w*]*)\s*\))?\s*$")


@dataclass(frozen=True)
class WindowSpec:
    """An event-time window: ``tumbling(size)``, ``hopping(size, slide)`` or ``session(gap)``."""

    kind: str
    size: str
    slide: str | None = None

    def __post_init__(self):
        if self.kind not in WINDOW_KINDS:
            raise BadArgument("window kind", self.kind, WINDOW_KINDS)
        to_millis(self.size, "session gap" if self.kind == "session" else "window size")
        if self.kind == "hopping":
            if self.slide is None:
                raise BadArgument("hopping window slide", None, "a duration such as '1 minute'")
            if to_millis(self.slide, "window slide") > to_millis(self.size):
                raise BadArgument("window slide", self.slide,
                                  f"a duration no longer than the window size {self.size!r}")
        elif self.slide is not None:
            raise BadArgument(f"slide for a {self.kind} window", self.slide,
                              "no slide (only hopping windows have one)")

    @property
    def size_ms(self) -> int:
        return to_millis(self.size)

    def to_dict(self) -> dict:
        """``{"kind": ..., "size": ..., "slide": ...}`` (slide only for hopping windows)."""
        data = {"kind": self.kind, "size": self.size}
        if self.slide is not None:
            data["slide"] = self.slide
        return data

    @classmethod
    def from_dict(cls, data: Mapping) -> WindowSpec:
        """The window ``to_dict`` described."""
        if not isinstance(data, Mapping) or "kind" not in data or "size" not in data:
            raise BadArgument("window description", data,
                              "a dict with kind, size (and slide for hopping windows)")
        return cls(data["kind"], data["size"], data.get("slide"))

    def column(self, event_time: str):
        """The Spark column grouping events into this window, aliased ``window``."""
        from pyspark.sql import functions as F

        if self.kind == "session":
            return F.session_window(event_time, spark_interval(self.size)).alias("window")
        slide = spark_interval(self.slide) if self.slide else None
        return F.window(event_time, spark_interval(self.size), slide).alias("window")


def tumbling(size: str) -> WindowSpec:
    """Fixed, non-overlapping windows of ``size`` ("10 minutes")."""
    return WindowSpec("tumbling", size)


def hopping(size: str, slide: str) -> WindowSpec:
    """Overlapping windows of ``size`` starting every ``slide``."""
    return WindowSpec("hopping", size, slide)


def session(gap: str) -> WindowSpec:
    """Per-key sessions that close after ``gap`` without events."""
    return WindowSpec("session", gap)


@dataclass(frozen=True)
class Aggregate:
    """One aggregate: ``function`` over ``column`` (None for count), output ``name``."""

    function: str
    column: str | None

    @property
    def name(self) -> str:
        return self.function if self.column is None else f"{self.function}_{self.column}"

    @property
    def text(self) -> str:
        """The aggregate as ``parse`` reads it: ``count``, ``count(col)``, ``sum(col)`` ..."""
        return self.function if self.column is None else f"{self.function}({self.column})"

    @classmethod
    def parse(cls, text: str) -> Aggregate:
        """``"count"``, ``"count(*)"``, ``"sum(score)"`` … → Aggregate."""
        match = _AGG_PATTERN.match(text) if isinstance(text, str) else None
        accepted = "count, count(*), or one of sum/min/max/avg(<column>)"
        if not match:
            raise BadArgument("aggregate", text, accepted)
        function, column = match.group(1).lower(), match.group(2)
        if function not in AGGREGATE_FUNCTIONS:
            raise BadArgument("aggregate function", match.group(1), AGGREGATE_FUNCTIONS)
        if function == "count":
            return cls("count", None if column in (None, "", "*") else column)
        if not column or column == "*":
            raise BadArgument("aggregate", text, f"{function}(<column name>)")
        return cls(function, column)

    def column_expr(self):
        from pyspark.sql import functions as F

        if self.function == "count":
            target = F.lit(1) if self.column is None else F.col(self.column)
            return F.count(target).alias(self.name)
        return getattr(F, self.function)(F.col(self.column)).alias(self.name)


@dataclass(frozen=True)
class QuerySpec:
    """The stateful aggregation: ``aggregates`` per ``window`` of ``event_time`` and ``keys``.

    Args:
        keys: the group keys (one or more column names).
        window: ``tumbling(..)``, ``hopping(..)`` or ``session(..)``; or None for a
            **running** aggregate per key (a key-value store: one row per key, kept
            forever — the state grows with every new key; see ``ttl``).
        aggregates: ``count``, ``count(col)``, ``sum/min/max/avg(col)`` (nulls as in SQL).
        event_time: the event-time column (a timestamp).
        watermark: how late an event may come before its window is evicted (time
            windows); a running aggregate has no window to evict.
        ttl: running aggregates only: forget a key after this much processing time
            without an update (Spark's ``transformWithState`` TTL), bounding the state.
        max_event_time_ahead: an event whose time lies more than this after its Kafka
            record's timestamp is malformed (kept aside, not aggregated): one absurd time
            (``9999-12-31``, or epoch milliseconds, which Spark reads as seconds: year
            57983) would otherwise move the watermark so far that every later event is
            dropped as late. Default ``"1 day"``; None for no bound (Spark's own behaviour).
            Relative to the record, not to the clock, so a replay decides the same way.
    """

    keys: Sequence[str]
    window: WindowSpec | None
    aggregates: Sequence[Aggregate | str] = ("count",)
    event_time: str = "ts"
    watermark: str = "10 minutes"
    ttl: str | None = None
    max_event_time_ahead: str | None = DEFAULT_MAX_EVENT_TIME_AHEAD

    def __post_init__(self):
        keys = [self.keys] if isinstance(self.keys, str) else self.keys
        if not isinstance(keys, Sequence) or not keys or \
                not all(isinstance(k, str) and k for k in keys):
            raise BadArgument("group keys", self.keys, "one or more column names")
        keys = list(keys)
        if len(set(keys)) != len(keys):
            raise BadArgument("group keys", self.keys, "distinct column names")
        aggregates = [self.aggregates] if isinstance(self.aggregates, str) else self.aggregates
        if not isinstance(aggregates, Sequence):
            raise BadArgument("aggregates", self.aggregates, "a list such as ['count', 'sum(x)']")
        aggs = [a if isinstance(a, Aggregate) else Aggregate.parse(a) for a in aggregates]
        if not aggs:
            raise BadArgument("aggregates", self.aggregates, "at least one aggregate")
        names = [a.name for a in aggs]
        if len(set(names)) != len(names):
            raise BadArgument("aggregates", self.aggregates, "each aggregate at most once")
        if self.window is not None and not isinstance(self.window, WindowSpec):
            raise BadArgument("window", self.window, "tumbling(..), hopping(..), session(..), "
                                                     "or None for a running aggregate")
        if self.ttl is not None:
            if self.window is not None:
                raise BadArgument("ttl", self.ttl, "None for a windowed aggregate (its windows "
                                                   "are evicted by the watermark); a TTL "
                                                   "bounds a running aggregate (window=None)")
            to_millis(self.ttl, "ttl")
        if not isinstance(self.event_time, str) or not self.event_time:
            raise BadArgument("event_time column", self.event_time, "a column name")
        if self.event_time in keys:
            raise BadArgument("event_time column", self.event_time,
                              f"a column that is not a group key ({keys})")
        to_millis(self.watermark, "watermark delay")
        if self.max_event_time_ahead is not None:
            try:
                to_millis(self.max_event_time_ahead)
            except BadArgument:
                raise BadArgument("max_event_time_ahead", self.max_event_time_ahead,
                                  f"{ACCEPTED}; or None for no bound") from None
        object.__setattr__(self, "keys", tuple(keys))
        object.__setattr__(self, "aggregates", tuple(aggs))

    # --- what kind of state -----------------------------------------------------------------
    @property
    def kind(self) -> str:
        """``tumbling``, ``hopping``, ``session`` or ``running`` (no window)."""
        return "running" if self.window is None else self.window.kind

    @property
    def windowed(self) -> bool:
        """True for time windows (tumbling, hopping): the window is part of each state key."""
        return self.kind in ("tumbling", "hopping")

    @property
    def store_kind(self) -> str:
        """The store that holds this state: ``window``, ``session`` or ``key-value``."""
        return {"session": "session", "running": "key-value"}.get(self.kind, "window")

    @property
    def ttl_ms(self) -> int | None:
        return None if self.ttl is None else to_millis(self.ttl)

    @property
    def max_event_time_ahead_ms(self) -> int | None:
        return None if self.max_event_time_ahead is None else to_millis(self.max_event_time_ahead)

    # --- columns --------------------------------------------------------------------------
    @property
    def input_columns(self) -> list[str]:
        """Columns the query reads: keys, event time, aggregated columns."""
        cols = [*self.keys, self.event_time]
        for agg in self.aggregates:
            if agg.column and agg.column not in cols:
                cols.append(agg.column)
        return cols

    @property
    def required_columns(self) -> list[str]:
        """Columns an event cannot do without (a null or missing one makes it malformed)."""
        return [*self.keys, self.event_time]

    @property
    def key_columns(self) -> list[str]:
        """Columns that identify one state row once flattened."""
        if self.kind == "running":
            return list(self.keys)
        if self.kind == "session":
            return ["window_start", *self.keys]
        return ["window_start", "window_end", *self.keys]

    @property
    def value_columns(self) -> list[str]:
        cols = [a.name for a in self.aggregates]
        return ["window_end", *cols] if self.kind == "session" else cols

    def default_event_schema(self) -> str:
        """The JSON event schema assumed when none is given (Spark DDL).

        Keys are strings, the event time a timestamp, a column only counted a string
        (any JSON value reads as text), a column summed or compared a double.

        Example:
            >>> QuerySpec(keys=["origin"], window=tumbling("1 hour"),
            ...           aggregates=["count", "avg(dep_delay)"]).default_event_schema()
            '`origin` string, `ts` timestamp, `dep_delay` double'
        """
        numeric = {a.column for a in self.aggregates if a.column and a.function != "count"}
        types = {k: "string" for k in self.keys}
        types[self.event_time] = "timestamp"
        for column in self.input_columns:
            types.setdefault(column, "double" if column in numeric else "string")
        return ", ".join(f"`{name}` {kind}" for name, kind in types.items())

    # --- to and from JSON -----------------------------------------------------------------
    def to_dict(self) -> dict:
        """The spec as plain JSON-ready data (``from_dict`` reads it back)."""
        data = {"keys": list(self.keys),
                "window": None if self.window is None else self.window.to_dict(),
                "aggregates": [a.text for a in self.aggregates],
                "event_time": self.event_time, "watermark": self.watermark}
        if self.ttl is not None:
            data["ttl"] = self.ttl
        if self.max_event_time_ahead != DEFAULT_MAX_EVENT_TIME_AHEAD:
            data["max_event_time_ahead"] = self.max_event_time_ahead
        return data

    @classmethod
    def from_dict(cls, data: Mapping) -> QuerySpec:
        """The spec ``to_dict`` described; a missing or unknown field is named."""
        fields = ("keys", "window", "aggregates", "event_time", "watermark", "ttl",
                  "max_event_time_ahead")
        if not isinstance(data, Mapping):
            raise BadArgument("query spec description", data, f"a dict with {', '.join(fields)}")
        unknown = sorted(set(data) - set(fields))
        if unknown:
            raise BadArgument("query spec field", unknown[0], fields)
        if "keys" not in data or "window" not in data:
            raise BadArgument("query spec description", dict(data),
                              "a dict with at least keys and window")
        window = data["window"]
        return cls(**{**data, "window": window if window is None or isinstance(window, WindowSpec)
                      else WindowSpec.from_dict(window)})
