"""The machinery under a processor's stores: one transformWithState ``MapState`` with a cache
for one call of ``process``, the checks of keys and values, and retention by time.

``MapStore`` reads an entry once per call (or every entry of the current grouping key,
once, for a scan), keeps the call's writes and sends them to Spark when it returns, one
state call per changed entry. ``RetentionStore`` adds expiry for window and session
stores: a timer per entry at its time plus the retention, and ``put`` refused behind it.
``StoreContext`` is what they need of the runner (the clock, timers). The store kinds a
processor uses are in ``statekit.processor.stores``.

Example (the runner's view; a store's methods are in ``statekit.processor.stores``):
    >>> from statekit.processor.stores import KeyValueStore   # doctest: +SKIP
    >>> store = KeyValueStore(spec, map_state, context)         # doctest: +SKIP
    >>> store._begin(); store.put("e1", 1); store._flush()      # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from statekit.errors import ProcessorError
from statekit.processor.fields import (
    Field,
    from_millis,
    is_null,
    millis,
    shape_text,
)
from statekit.processor.layout import StoreSpec


class StoreContext:
    """What stores need from the processor that runs them (the clock, timers to set)."""

    def clock_ms(self) -> int | None:  # pragma: no cover - the runner's
        raise NotImplementedError

    def want_timer(self, ms: int) -> None:  # pragma: no cover - the runner's
        raise NotImplementedError

    def obsolete_timer(self, ms: int) -> None:  # pragma: no cover - the runner's
        raise NotImplementedError


class MapStore:
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


class RetentionStore(MapStore):
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

