"""The stores a processor uses while Spark runs it: Kafka-Streams-shaped, over a map state.

Each store wraps one transformWithState ``MapState`` (``statekit.processor.layout`` says
which columns it has). **Scope:** Spark sets the current grouping key before it calls
the processor, and a map state only reaches the entries under that key. So:

- ``get``, ``put``, ``delete``, ``fetch(key, time)``, ``fetch_session`` touch one entry
  of the current grouping key;
- ``range``, ``prefix_scan``, ``all``, ``approximate_num_entries``, window ``fetch(key,
  from, to)``, ``fetch_all``, session ``fetch(key)`` and ``find_sessions`` scan **every
  entry of the current grouping key** (Spark's map state has no ordered scan: statekit
  reads the key's entries once per call of the processor, then filters and sorts them in
  Python). Kafka Streams' ``range`` and ``all`` scan the task's whole store, every key of
  it; no Spark state API reaches another grouping key's entries.

Reads are cached for one call of ``process`` (or of a punctuation), and writes are sent
to Spark when it returns, one state call per changed entry: every call to Spark's state
API is a round trip from the Python worker to the JVM.

Keys are one value (a one-field key) or a tuple; values are one value (a one-field
value) or a dict by field name. Timestamps are naive UTC ``pandas.Timestamp`` values.
A key or value of the wrong shape or type raises ``ProcessorError`` naming the store,
the value and what it takes.

A session store speaks the same names and signatures as a local one (``statekit.stores``),
as Kafka Streams has one ``SessionStore``: ``put(session, value)``, ``remove(session)``,
``fetch_session(key, start, end)``, ``find_sessions(key, earliest_session_end,
latest_session_start)``, ``fetch(key)``, ``all()``, with the one ``Session(key, start,
end)`` type (``statekit.model.session_key``).

The map state machinery under every store (the call's cache, the shape checks, retention)
is ``statekit.processor.map_store``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from statekit.errors import ProcessorError
from statekit.model.session_key import SESSION_SHAPE, Session, as_session
from statekit.processor.fields import from_millis, millis
from statekit.processor.map_store import MapStore, RetentionStore


class KeyValueStore(MapStore):
    """A key-value store over the current grouping key's entries (see the module doc).

    Example (inside ``process``):
        >>> seen = stores["seen"]                                      # doctest: +SKIP
        >>> if seen.get(event_id) is None:                             # doctest: +SKIP
        ...     seen.put(event_id, ts)
    """

    kind = "key-value"

    def get(self, key: object) -> Any:
        """The value under ``key`` (None when absent). One entry."""
        return self._show_value(self._lookup(self._key(key)))

    def put(self, key: object, value: object) -> None:
        """Write ``value`` under ``key``; ``None`` deletes it (as Kafka Streams' ``put(k,
        null)``). One entry."""
        self._write(self._key(key), None if value is None else self._value(value))

    def put_if_absent(self, key: object, value: object) -> Any:
        """Write ``value`` unless ``key`` holds one; returns the value found (None if put)."""
        k = self._key(key)
        found = self._lookup(k)
        if found is None:
            self._write(k, self._value(value))
        return self._show_value(found)

    def delete(self, key: object) -> Any:
        """Remove ``key``; returns the value it held (None when absent). One entry."""
        k = self._key(key)
        found = self._lookup(k)
        self._write(k, None)
        return self._show_value(found)

    def all(self) -> list[tuple[Any, Any]]:
        """Every (key, value) of the current grouping key, sorted by key. Scans them all."""
        return [(self._show_key(k), self._show_value(v)) for k, v in self._entries()]

    def range(self, from_key: object = None, to_key: object = None) -> list[tuple[Any, Any]]:
        """(key, value) pairs with ``from_key <= key <= to_key`` (None: open), sorted.

        Keys compare as tuples of their fields; a bound may give only the leading fields
        (``(bucket,)`` of a ``bucket, game`` key): a key then compares by those fields, and
        a key that starts with the bound's fields is after ``from_key`` and after
        ``to_key`` too (as Python compares tuples). Scans the current grouping key's entries.
        """
        low = None if from_key is None else self._bound(from_key, "from_key")
        high = None if to_key is None else self._bound(to_key, "to_key")
        return [(self._show_key(k), self._show_value(v)) for k, v in self._entries()
                if (low is None or k >= low) and (high is None or k <= high)]

    def prefix_scan(self, prefix: object) -> list[tuple[Any, Any]]:
        """(key, value) pairs whose key starts with ``prefix``, sorted: ``prefix`` gives the
        leading fields (one value for the first); the last one given, when a string, matches
        as a string prefix (as a byte prefix of Kafka Streams' serialized key would). Scans
        the current grouping key's entries."""
        fixed = self._bound(prefix, "prefix")
        head, last = fixed[:-1], fixed[-1]
        n = len(fixed)

        def match(key: tuple) -> bool:
            if key[:n - 1] != head:
                return False
            return key[n - 1].startswith(last) if isinstance(last, str) else key[n - 1] == last

        return [(self._show_key(k), self._show_value(v)) for k, v in self._entries()
                if match(k)]

    def approximate_num_entries(self) -> int:
        """Entries under the current grouping key (exact; Kafka Streams' estimate covers
        the whole store). Scans them."""
        return len(self._entries())

    def _bound(self, bound: object, what: str) -> tuple:
        parts = self._key_fields
        values = bound if isinstance(bound, tuple) else (bound,)
        if not 1 <= len(values) <= len(parts):
            raise self._fail(what, bound, f"the key's leading fields: 1 to {len(parts)} values "
                                          f"({', '.join(f.ddl for f in parts)})")
        return self._convert(values, parts[:len(values)], what, bound, nullable=False)


class WindowStore(RetentionStore):
    """Windows of the current grouping key (and of the store's key fields, if any).

    Example (inside ``process``):
        >>> counts = stores["counts"]                                  # doctest: +SKIP
        >>> counts.put(None, (counts.fetch(None, start) or 0) + 1, start)  # doctest: +SKIP
    """

    kind = "window"

    def put(self, key: object, value: object, window_start: object) -> None:
        """Write the window starting at ``window_start``; ``value=None`` deletes it.

        Raises ProcessorError when ``window_start + retention`` is behind the clock."""
        start = self._time(window_start, "window_start")
        k = self._key(key) + (start,)
        if value is None:
            self._write(k, None)
            return
        v = self._value(value)
        self._retained(start, "window_start", window_start)
        self._write(k, v)

    def fetch(self, key: object, time_from: object, time_to: object = None) -> Any:
        """With ``time_to`` None: the value of the window starting at ``time_from`` (one
        entry). Else (window_start, value) pairs of ``key`` with ``time_from <= start <=
        time_to``, by start (scans the current grouping key's entries)."""
        k = self._key(key)
        low = self._time(time_from, "time_from")
        if time_to is None:
            return self._show_value(self._lookup(k + (low,)))
        high = self._time(time_to, "time_to")
        n = len(k)
        return [(from_millis(millis(e[n])), self._show_value(v)) for e, v in self._entries()
                if e[:n] == k and low <= e[n] <= high]

    def fetch_all(self, time_from: object, time_to: object) -> list[tuple[Any, Any, Any]]:
        """(key, window_start, value) of every window starting in ``[time_from, time_to]``,
        by key then start. Scans the current grouping key's entries."""
        low, high = self._time(time_from, "time_from"), self._time(time_to, "time_to")
        n = len(self._key_fields)
        return [(self._show_key(e), from_millis(millis(e[n])), self._show_value(v))
                for e, v in self._entries() if low <= e[n] <= high]

    def all(self) -> list[tuple[Any, Any, Any]]:
        """(key, window_start, value) of every window of the current grouping key."""
        n = len(self._key_fields)
        return [(self._show_key(e), from_millis(millis(e[n])), self._show_value(v))
                for e, v in self._entries()]

    def _time_of(self, key: tuple) -> Any:
        return key[len(self._key_fields)]


class SessionStore(RetentionStore):
    """Sessions of the current grouping key (and of the store's key fields, if any), each
    under its ``Session(key, start, end)`` (see the module doc: the local stores' names).

    Example (inside ``process``):
        >>> for session, n in store.find_sessions(None, ts - gap, ts + gap):  # doctest: +SKIP
        ...     store.remove(session)
        >>> store.put(Session(None, ts, ts), 1)                         # doctest: +SKIP
    """

    kind = "session"

    def put(self, session: Session, value: object) -> None:
        """Write ``session``'s value; ``None`` removes it. Raises ProcessorError when its end
        + retention is behind the clock, or when it ends before it starts. One entry."""
        k = self._session_key(session)
        if value is None:
            self._write(k, None)
            return
        v = self._value(value)
        self._retained(k[-1], "session end", session)
        self._write(k, v)

    def remove(self, session: Session) -> None:
        """Remove ``session`` (Kafka Streams' ``remove(Windowed<K>)``). One entry."""
        self._write(self._session_key(session), None)

    def fetch_session(self, key: object, start: object, end: object) -> Any:
        """The value of the session ``[start, end]`` of ``key`` (None when absent). One entry."""
        return self._show_value(self._lookup(self._session_key(Session(key, start, end))))

    def find_sessions(self, key: object, earliest_session_end: object,
                      latest_session_start: object) -> list[tuple[Session, Any]]:
        """(Session, value) of ``key``'s sessions that end at or after
        ``earliest_session_end`` and start at or before ``latest_session_start``, by start.
        Scans the current grouping key's entries."""
        k = self._key(key)
        end = self._time(earliest_session_end, "earliest_session_end")
        start = self._time(latest_session_start, "latest_session_start")
        n = len(k)
        return [(self._session(e), self._show_value(v)) for e, v in self._entries()
                if e[:n] == k and e[n + 1] >= end and e[n] <= start]

    def fetch(self, key: object) -> list[tuple[Session, Any]]:
        """(Session, value) of every session of ``key``, by start. Scans the current
        grouping key's entries."""
        k = self._key(key)
        n = len(k)
        return [(self._session(e), self._show_value(v)) for e, v in self._entries()
                if e[:n] == k]

    def all(self) -> list[tuple[Session, Any]]:
        """(Session, value) of every session of the current grouping key, by key and start."""
        return [(self._session(e), self._show_value(v)) for e, v in self._entries()]

    def _session_key(self, session: object) -> tuple:
        parts = as_session(session)
        if parts is None:
            raise self._fail("session", session, SESSION_SHAPE)
        k = self._key(parts.key) + (self._time(parts.start, "session start"),
                                    self._time(parts.end, "session end"))
        if k[-1] < k[-2]:
            raise self._fail("session", session, "a session that ends at or after its start")
        return k

    def _session(self, entry: tuple) -> Session:
        n = len(self._key_fields)
        return Session(self._show_key(entry), from_millis(millis(entry[n])),
                       from_millis(millis(entry[n + 1])))

    def _time_of(self, key: tuple) -> Any:
        return key[len(self._key_fields) + 1]  # the session's end


STORE_CLASSES = {"key_value": KeyValueStore, "window": WindowStore, "session": SessionStore}


class Stores(Mapping):
    """The processor's stores by name (what ``init(stores)`` receives)."""

    def __init__(self, stores: Mapping[str, MapStore]):
        self._stores = dict(stores)

    def __getitem__(self, name: str) -> Any:
        if name not in self._stores:
            raise ProcessorError(f"no store named {name!r}; the processor declares: "
                                 f"{', '.join(self._stores) or 'none'}")
        return self._stores[name]

    def __iter__(self):
        return iter(self._stores)

    def __len__(self) -> int:
        return len(self._stores)
