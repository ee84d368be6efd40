"""The stores a processor uses while Spark runs it: Kafka-Streams-shaped, over a map state.

Each store wraps one transformWithState ``MapState`` (``statekit.processor.layout`` says
which columns it has). **Scope:** Spark sets the current grouping key before it calls
the processor, and a map state only reaches the entries under that key. So:

- ``get``, ``put``, ``delete``, ``fetch(key, time)``, ``fetch_session`` touch one entry
  of the current grouping key;
- ``range``, ``prefix_scan``, ``all``, ``approximate_num_entries``, window ``fetch(key,
  from, to)``, ``fetch_all`` and ``find_sessions`` scan **every entry of the current
  grouping key** (Spark's map state has no ordered scan: statekit reads the key's
  entries once per call of the processor, then filters and sorts them in Python).
  Kafka Streams' ``range`` and ``all`` scan the task's whole store, every key of it;
  no Spark state API reaches another grouping key's entries.

Reads are cached for one call of ``process`` (or of a punctuation), and writes are sent
to Spark when it returns, one state call per changed entry: every call to Spark's state
API is a round trip from the Python worker to the JVM.

Keys are one value (a one-field key) or a tuple; values are one value (a one-field
value) or a dict by field name. Timestamps are naive UTC ``pandas.Timestamp`` values.
A key or value of the wrong shape or type raises ``ProcessorError`` naming the store,
the value and what it takes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from statekit.errors import ProcessorError
from statekit.processor.fields import (
    Field,
    from_millis,
    is_null,
    millis,
    shape_text,
)
from statekit.processor.layout import StoreSpec


class Session(NamedTuple):
    """A session's key: the store key (None for a store without key fields), start, end."""

    key: Any
    start: Any
    end: Any


class StoreContext:
    """What stores need from the processor that runs them (the clock, timers to set)."""

    def clock_ms(self) -> int | None:  # pragma: no cover - the runner's
        raise NotImplementedError

    def want_timer(self, ms: int) -> None:  # pragma: no cover - the runner's
        raise NotImplementedError

    def obsolete_timer(self, ms: int) -> None:  # pragma: no cover - the runner's
        raise NotImplementedError


class _MapStore:
    """A map state with a cache for one call, and the checks of keys and values."""

    kind = ""

    def __init__(self, spec: StoreSpec, state, context: StoreContext):
        self.spec, self.name = spec, spec.name
        self._state, self._context = state, context
        self._key_fields, self._value_fields = spec.key, spec.value
        self._map_key = spec.map_key
        self._known: dict[tuple, tuple | None] = {}
        self._pending: dict[tuple, tuple | None] = {}
        self._complete = False

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    # --- the call's cache ---------------------------------------------------------------
    def _begin(self) -> None:
        self._known.clear()
        self._pending.clear()
        self._complete = False

    def _lookup(self, key: tuple) -> tuple | None:
        if key in self._pending:
            return self._pending[key]
        if key in self._known or self._complete:
            return self._known.get(key)
        row = self._state.getValue(key)
        value = None if row is None else self._canonical(row, self._value_fields)
        self._known[key] = value
        return value

    def _entries(self) -> list[tuple[tuple, tuple]]:
        """Every entry of the current grouping key, sorted by key (pending writes applied)."""
        if not self._complete:
            for key, value in self._state.iterator():
                self._known[self._canonical(key, self._map_key)] = \
                    self._canonical(value, self._value_fields)
            self._complete = True
        merged = {**self._known, **self._pending}
        return sorted(((k, v) for k, v in merged.items() if v is not None),
                      key=lambda entry: entry[0])

    def _write(self, key: tuple, value: tuple | None) -> None:
        self._pending[key] = value

    def _flush(self) -> None:
        for key, value in self._pending.items():
            if value is not None:
                self._state.updateValue(key, value)
            elif self._known.get(key) is not None or not (self._complete or key in self._known):
                self._state.removeKey(key)
            self._known[key] = value
        self._pending.clear()

    def _has_entries(self) -> bool:
        if any(v is not None for v in self._pending.values()):
            return True
        if self._complete:
            return any(v is not None for v in self._known.values())
        return bool(self._state.exists())

    @staticmethod
    def _canonical(row: Iterable, parts: tuple[Field, ...]) -> tuple:
        return tuple(f.canonical(v) for f, v in zip(parts, row, strict=True))

    # --- shapes ---------------------------------------------------------------------------
    def _fail(self, what: str, value: object, accepted: str) -> ProcessorError:
        text = repr(value)
        if len(text) > 80:
            text = text[:77] + "..."
        return ProcessorError(f"store {self.name!r} ({self.kind} store): {what} {text} does not "
                              f"fit: {accepted}")

    def _convert(self, values: tuple, parts: tuple[Field, ...], what: str, given: object,
                 nullable: bool) -> tuple:
        out = []
        for f, v in zip(parts, values, strict=True):
            problem = f.problem(v)
            if problem is None and not nullable and is_null(v):
                problem = f"{f.name} is null"
            if problem is not None:
                raise self._fail(what, given, f"{problem} ({shape_text(parts)})")
            out.append(f.to_spark(v))
        return tuple(out)

    def _key(self, key: object, what: str = "key") -> tuple:
        """The store key fields of ``key`` (checked), as Spark takes them."""
        parts = self._key_fields
        if not parts:
            if key is not None:
                raise self._fail(what, key, "this store has no key fields: pass None")
            return ()
        values = _as_tuple(key, parts)
        if values is None:
            raise self._fail(what, key, shape_text(parts))
        return self._convert(values, parts, what, key, nullable=False)

    def _value(self, value: object) -> tuple:
        parts = self._value_fields
        values = _as_tuple(value, parts)
        if values is None:
            raise self._fail("value", value, shape_text(parts))
        return self._convert(values, parts, "value", value, nullable=True)

    def _time(self, value: object, what: str) -> Any:
        field = Field(what, "timestamp")
        problem = field.problem(value)
        if problem is not None or is_null(value):
            raise self._fail(what, value, "a timestamp (pandas.Timestamp, datetime or "
                                          "numpy.datetime64; naive values are UTC)")
        return field.to_spark(value)

    def _show_key(self, key: tuple) -> Any:
        parts = self._key_fields
        shown = tuple(f.from_spark(v) for f, v in zip(parts, key, strict=False))
        if not parts:
            return None
        return shown[0] if len(parts) == 1 else shown

    def _show_value(self, value: tuple | None) -> Any:
        if value is None:
            return None
        parts = self._value_fields
        if len(parts) == 1:
            return parts[0].from_spark(value[0])
        return {f.name: f.from_spark(v) for f, v in zip(parts, value, strict=True)}


def _as_tuple(value: object, parts: tuple[Field, ...]) -> tuple | None:
    """``value`` as one entry per field: a scalar for one field, a tuple/list, or a dict with
    exactly the field names; None when it has another shape."""
    names = [f.name for f in parts]
    if isinstance(value, Mapping):
        return tuple(value[n] for n in names) if set(value) == set(names) else None
    if isinstance(value, (tuple, list)):
        return tuple(value) if len(value) == len(parts) else None
    return (value,) if len(parts) == 1 else None


class _RetentionStore(_MapStore):
    """A store whose entries expire by time (window and session stores)."""

    @property
    def retained_from(self) -> Any:
        """The earliest window start (a session store: session end) the store keeps now, at
        the processor's clock minus the retention; a ``put`` before it is refused. None
        before the clock has a value.

        Spark hands a batch the rows at or after the *previous* batch's watermark, while the
        clock is this batch's: a row Spark accepted may still belong to a window the
        retention has passed, when the watermark moved more than the retention allows in one
        batch. Check ``start >= store.retained_from`` before a ``put``, or give a retention
        of at least the window size plus the watermark delay plus a batch's advance.
        """
        clock = self._context.clock_ms()
        return None if clock is None else from_millis(clock - self.spec.retention_ms)

    def _retained(self, time_value: Any, what: str, given: object) -> None:
        """Refuse a write whose time is already behind the retention."""
        retention = self.spec.retention_ms
        clock = self._context.clock_ms()
        if clock is not None and millis(time_value) + retention < clock:
            earliest = from_millis(clock - retention)
            raise self._fail(what, given,
                             f"it is outside the store's retention ({retention} ms): the clock "
                             f"is at {from_millis(clock)}, so a {what} must be at or after "
                             f"{earliest}")

    def _time_of(self, key: tuple) -> Any:  # pragma: no cover - each store's
        raise NotImplementedError

    def _expiry(self, key: tuple) -> int:
        return millis(self._time_of(key)) + self.spec.retention_ms

    def _flush(self) -> None:
        """Send the writes; ask for the timer of each new entry (at its time + retention)
        and report the timers of removed entries, which the runner may drop."""
        for key, value in self._pending.items():
            existed = self._known.get(key) is not None
            if value is not None and not existed:
                self._context.want_timer(self._expiry(key))
            elif value is None and existed:
                self._context.obsolete_timer(self._expiry(key))
        super()._flush()

    def _expiries(self) -> set[int] | None:
        """The expiries of every entry of the current grouping key (None when this call has
        not read them all, so the runner keeps every timer)."""
        if not self._complete:
            return None
        return {self._expiry(k) for k, v in self._known.items() if v is not None}

    def _expire(self, clock: int) -> int:
        """Delete every entry whose time + retention is behind ``clock``; how many."""
        gone = [k for k, _ in self._entries() if self._expiry(k) < clock]
        for key in gone:
            self._write(key, None)
        return len(gone)


class KeyValueStore(_MapStore):
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


class WindowStore(_RetentionStore):
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


class SessionStore(_RetentionStore):
    """Sessions of the current grouping key (and of the store's key fields, if any).

    Example (inside ``process``):
        >>> found = store.find_sessions(None, ts - gap, ts + gap)      # doctest: +SKIP
    """

    kind = "session"

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

    def fetch_session(self, key: object, start: object, end: object) -> Any:
        """The value of the session ``[start, end]`` of ``key`` (None when absent)."""
        return self._show_value(self._lookup(self._session_key(Session(key, start, end))))

    def put(self, session: Session, value: object) -> None:
        """Write ``session``'s value; ``None`` removes it. Raises ProcessorError when its end
        + retention is behind the clock, or when it ends before it starts."""
        k = self._session_key(session)
        if value is None:
            self._write(k, None)
            return
        v = self._value(value)
        self._retained(k[-1], "session end", session)
        self._write(k, v)

    def remove(self, session: Session) -> None:
        """Remove ``session`` (Kafka Streams' ``remove(Windowed<K>)``)."""
        self._write(self._session_key(session), None)

    def all(self) -> list[tuple[Session, Any]]:
        """(Session, value) of every session of the current grouping key, by key and start."""
        return [(self._session(e), self._show_value(v)) for e, v in self._entries()]

    def _session_key(self, session: object) -> tuple:
        if not isinstance(session, tuple) or len(session) != 3:
            raise self._fail("session", session, "a Session(key, start, end)")
        key, start, end = session
        k = self._key(key) + (self._time(start, "session start"),
                              self._time(end, "session end"))
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

    def __init__(self, stores: Mapping[str, _MapStore]):
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
