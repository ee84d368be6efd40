"""Declaring a processor's stores, and where each one lies in Spark's state: the layout.

A store is declared with ``key_value_store``, ``window_store`` or ``session_store``
(a frozen ``StoreSpec``). Each store is **one transformWithState map state, named by
the store's name**, so everything that reads Spark's state by part (``open_checkpoint``,
``snapshot(store)``, ``changes(store)``) finds it under the name the person chose.

The layout, for a processor grouped by ``keys`` (Spark's grouping key):

============  ======================================  ==================================
store kind    the map state's key columns             value columns
============  ======================================  ==================================
key-value     ``keys``, then the store's key fields   the store's value fields
window        ``keys``, the key fields,               the store's value fields
              ``window_start`` (timestamp)
session       ``keys``, the key fields,               the store's value fields
              ``session_start``, ``session_end``
              (timestamps)
============  ======================================  ==================================

Spark's State Data Source reads a map state as ``key`` (the grouping key),
``user_map_key`` and ``user_map_value`` structs; flattened (``statekit.inspect.flatten``)
those are exactly the columns above, in that order, because field names are checked
to be distinct (no prefixes are added). A store with a TTL is different: Spark keeps
its value as ``user_map_value.value`` beside ``user_map_value.ttlExpirationMs``, so its
value columns are ``value_<field>`` for each value field, then ``ttlExpirationMs``
(epoch ms after which Spark no longer returns the entry and removes it). The
timers (retention and punctuation) are the operator's ``timers`` part, one row per
grouping key and expiry. ``StoreSpec.layout(keys)`` gives this as a ``StoreLayout``.

**What Spark scopes by key.** Kafka Streams' stores belong to a task: ``range`` and
``all`` scan every key of the task's partition. Spark's transformWithState state is
scoped to the **current grouping key**: a store's methods reach only the entries
under the key being processed, and scanning methods scan those entries.

Example:
    >>> spec = window_store("counts", value="n long", retention="1 hour")
    >>> lay = spec.layout(["player"])
    >>> lay.key_columns, lay.value_columns
    (('player', 'window_start'), ('n',))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from statekit.durations import to_millis
from statekit.errors import BadArgument
from statekit.processor.fields import Field, fields
from statekit.validate import kafka_name

KINDS = ("key_value", "window", "session")
WINDOW_FIELDS = (Field("window_start", "timestamp"),)
SESSION_FIELDS = (Field("session_start", "timestamp"), Field("session_end", "timestamp"))
#: The value column Spark's reader adds to a state variable with a TTL.
TTL_COLUMN = "ttlExpirationMs"
#: The prefix of a TTL'd store's value columns (Spark nests the value one level deeper).
TTL_VALUE_PREFIX = "value_"
#: Names a store cannot have: Spark's default column family, statekit's name for timers.
RESERVED_STORE_NAMES = ("default", "timers")
#: Column names statekit's frames use for themselves (``statekit.inspect.flatten``).
RESERVED_COLUMNS = ("partition", "batch", "change", TTL_COLUMN)
STORE_NAME_ACCEPTED = ("letters, digits, '.', '_' and '-', starting with a letter or digit "
                       "(it names a Spark state variable and, later, a Kafka topic); not "
                       "'default' (Spark's own column family) nor 'timers' (statekit's name "
                       "for the operator's timers)")


@dataclass(frozen=True)
class StoreLayout:
    """Where one store lies in Spark's state (see the module doc)."""

    store: str
    kind: str
    #: the transformWithState state variable (its name is the store's)
    state_variable: str
    #: Spark's kind of state variable
    variable_type: str
    grouping_key_columns: tuple[str, ...]
    #: every key column of a snapshot row: grouping keys, key fields, time fields
    key_columns: tuple[str, ...]
    value_columns: tuple[str, ...]
    #: the key columns that are statekit's own (window_start, session_start/end)
    time_columns: tuple[str, ...]
    ttl_ms: int | None
    retention_ms: int | None

    def as_row(self) -> dict:
        return {"store": self.store, "kind": self.kind, "state_variable": self.state_variable,
                "variable_type": self.variable_type, "key_columns": list(self.key_columns),
                "value_columns": list(self.value_columns), "ttl_ms": self.ttl_ms,
                "retention_ms": self.retention_ms}


@dataclass(frozen=True)
class StoreSpec:
    """A declared store: its name, kind, key and value fields, TTL and retention."""

    name: str
    kind: str
    key: tuple[Field, ...]
    value: tuple[Field, ...]
    ttl_ms: int | None = None
    retention_ms: int | None = None

    @property
    def time_fields(self) -> tuple[Field, ...]:
        return {"window": WINDOW_FIELDS, "session": SESSION_FIELDS}.get(self.kind, ())

    @property
    def map_key(self) -> tuple[Field, ...]:
        """The map state's user key: the key fields, then the time fields."""
        return self.key + self.time_fields

    def layout(self, grouping_keys: Sequence[str]) -> StoreLayout:
        """Where this store lies in Spark's state for a processor grouped by
        ``grouping_keys`` (see the module doc)."""
        keys = tuple(grouping_keys)
        values = tuple(f.name for f in self.value)
        if self.ttl_ms is not None:
            values = tuple(f"{TTL_VALUE_PREFIX}{name}" for name in values) + (TTL_COLUMN,)
        return StoreLayout(self.name, self.kind, self.name, "MapState", keys,
                           keys + tuple(f.name for f in self.map_key), values,
                           tuple(f.name for f in self.time_fields), self.ttl_ms,
                           self.retention_ms)


def _store(name: object, kind: str, key: str | None, value: str, ttl: str | None,
           retention: str | None) -> StoreSpec:
    if not isinstance(name, str) or not name[:1].isalnum():
        raise BadArgument("store name", name, STORE_NAME_ACCEPTED)
    kafka_name(name, "store name")
    if name in RESERVED_STORE_NAMES:
        raise BadArgument("store name", name, STORE_NAME_ACCEPTED)
    what = f"store {name!r}"
    key_fields = fields(key, f"{what} key")
    value_fields = fields(value, f"{what} value")
    if not value_fields:
        raise BadArgument(f"{what} value", value, "one or more fields, such as 'n long'")
    if kind == "key_value" and not key_fields:
        raise BadArgument(f"{what} key", key, "one or more fields, such as 'game string'")
    ttl_ms = None if ttl is None else to_millis(ttl, f"{what} ttl")
    retention_ms = None if retention is None else to_millis(retention, f"{what} retention")
    spec = StoreSpec(name, kind, key_fields, value_fields, ttl_ms, retention_ms)
    seen: dict[str, str] = {}
    for part, group in (("key", spec.map_key), ("value", spec.value)):
        for f in group:
            if f.name in RESERVED_COLUMNS:
                raise BadArgument(f"{what} {part} field", f.name,
                                  f"a name other than {', '.join(RESERVED_COLUMNS)} "
                                  "(statekit's frames use those)")
            if f.name in seen:
                taken = "statekit's own key column" if f in spec.time_fields else \
                    f"already a {seen[f.name]} field"
                raise BadArgument(f"{what} {part} field", f.name,
                                  f"a name not used twice in the store ({f.name!r} is {taken})")
            seen[f.name] = part
    if ttl_ms is not None:
        for f in value_fields:
            if f"{TTL_VALUE_PREFIX}{f.name}" in seen:
                raise BadArgument(f"{what} key field", f"{TTL_VALUE_PREFIX}{f.name}",
                                  "a name other than value_<a value field> in a store with a "
                                  "TTL (its value columns are named so)")
    return spec


def key_value_store(name: str, *, key: str, value: str, ttl: str | None = None) -> StoreSpec:
    """A key-value store: ``get``, ``put``, ``delete``, ``range``, ``prefix_scan``, ``all``,
    ``approximate_num_entries`` over the current grouping key's entries.

    Args:
        name: the store's name (it names the Spark state variable).
        key: the key's fields as Spark DDL (``"game string"``, ``"bucket timestamp, game
            string"``); plain types only.
        value: the value's fields, the same way.
        ttl: forget an entry this long (processing time) after it was last written; Spark's
            state TTL, which needs a processor on processing time (``time = "processing"``).

    Example:
        >>> key_value_store("seen", key="id string", value="at timestamp", ttl="1 hour").ttl_ms
        3600000
    """
    return _store(name, "key_value", key, value, ttl, None)


def window_store(name: str, *, value: str, retention: str, key: str | None = None,
                 ttl: str | None = None) -> StoreSpec:
    """A window store: ``put(key, value, window_start)``, ``fetch(key, from, to)``.

    A window is kept while ``window_start + retention`` is not behind the processor's
    clock (the watermark, on event time), removed by a timer once it is, and a ``put``
    of a window already behind is refused (``WindowStore.retained_from`` says from when
    puts are accepted). ``key`` adds key fields under the grouping key (None: windows of
    the grouping key alone). Kafka Streams measures retention back from stream time (the
    largest timestamp its task has seen) and skips a late put with a log line.
    """
    return _store(name, "window", key, value, ttl, retention)


def session_store(name: str, *, value: str, retention: str, key: str | None = None,
                  ttl: str | None = None) -> StoreSpec:
    """A session store: ``put(session, value)``, ``remove(session)``, ``fetch_session(key,
    start, end)``, ``find_sessions(key, earliest_session_end, latest_session_start)``,
    ``fetch(key)``, ``all()`` (the local session stores' names and signatures).

    A session is kept while ``session_end + retention`` is not behind the processor's
    clock, removed by a timer once it is; a ``put`` of a session already behind is
    refused.
    """
    return _store(name, "session", key, value, ttl, retention)
