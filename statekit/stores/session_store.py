"""The session store, written once over any bytes ``Backend``.

As in the changelog, a key is ``{<group keys>,"window_start":"<ISO>"}`` and the
value starts with the session's end: ``{"window_end":"<ISO>",<aggregates>}``.
A key's sessions are one byte range, in start order.

Example:
    >>> from statekit.stores import InMemorySessionStore
    >>> store = InMemorySessionStore("sessions", key_columns=["player"],
    ...                              value_columns=["count"])
    >>> store.put(Session({"player": "p07"}, 0, 30_000), {"count": 4})
    >>> store.put(Session({"player": "p07"}, 100_000, 160_000), {"count": 2})
    >>> with store.find_sessions({"player": "p07"}, 20_000, 90_000) as it:
    ...     list(it)
    [(Session(key={'player': 'p07'}, start=0, end=30000), {'count': 4})]
    >>> store.fetch_session({"player": "p07"}, 100_000, 160_000)
    {'count': 2}
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from statekit.deprecation import deprecated
from statekit.errors import BadArgument
from statekit.model.changelog_record import decode_json
from statekit.model.session_key import SESSION_SHAPE, Session, as_session
from statekit.stores.backend import Backend
from statekit.stores.base import SessionStore
from statekit.stores.iterators import SKIP, StoreIterator
from statekit.stores.key_layout import (
    END_FIELD,
    ISO_WIDTH,
    START_FIELD,
    check_time,
    iso_to_ms,
    ms_to_iso,
    object_prefix,
    successor,
    time_field,
)
from statekit.stores.metadata import StoreMetadata
from statekit.stores.serde import ChangelogJsonSerde
from statekit.stores.store import BackedStore
from statekit.stores.window import group_serde

_VALUE_START = b"{" + END_FIELD


def session_end(value: bytes) -> bytes:
    """The ISO end of a session value (``window_end`` comes first, as the changelog writes it)."""
    if value.startswith(_VALUE_START):
        return value[len(_VALUE_START):len(_VALUE_START) + ISO_WIDTH]
    return json.loads(value)["window_end"].encode()


class BackedSessionStore(BackedStore, SessionStore):
    """A ``SessionStore`` over ``backend``, keyed by changelog key bytes.

    Args:
        backend: the bytes.
        metadata: the store's identity and columns (kind ``session``; value columns,
            if given, start with ``window_end``).
        serde: default: the changelog JSON of the group keys and the aggregate columns.
    """

    def __init__(self, backend: Backend, metadata: StoreMetadata,
                 serde: ChangelogJsonSerde | None = None):
        super().__init__(backend, metadata)
        aggregates = None if metadata.value_columns is None else tuple(
            c for c in metadata.value_columns if c != "window_end")
        self.serde = group_serde(metadata, serde, aggregates)

    def _prefix(self, key: object) -> bytes:
        return object_prefix(self.serde.encode_key(key))

    def _key(self, key: object, start: int) -> bytes:
        return self._prefix(key) + time_field(START_FIELD, start) + b"}"

    def _entry(self, key: bytes, value: bytes) -> tuple[Session, object]:
        decoded, aggregates = decode_json(key), decode_json(value)
        start = iso_to_ms(decoded.pop("window_start"))
        return Session(decoded, start, iso_to_ms(aggregates.pop("window_end"))), aggregates

    def _stored(self, key: object, start: int, end: int) -> tuple[bytes, bytes | None]:
        """(key bytes, value bytes) of ``key``'s session [start, end] (None: no such one)."""
        data = self._key(key, start)
        value = self._open().get(data)
        if value is not None and session_end(value) != ms_to_iso(end).encode():
            value = None  # another session starts there
        return data, value

    def put(self, session: Session, value: object | None, *old_spelling: object) -> None:
        """Set ``session``'s aggregate; None removes it (as ``remove(session)``). A session
        starting when another of its key does replaces it (one changelog key).

        ``put(key, start, end, value)`` (the old spelling) still works, with a
        DeprecationWarning.
        """
        if old_spelling:
            session, value = _old_put(session, value, old_spelling)
        key, start, end = _checked(session)
        if value is None:
            self._remove(key, start, end)
            return
        if isinstance(value, Mapping) and ("window_end" in value or "window_start" in value):
            raise BadArgument("session value", value,
                              "the aggregate columns only (the session's start and end are "
                              "the Session's)")
        rest = self.serde.encode_value(value)
        head = b"{" + time_field(END_FIELD, end)
        self._open().put(self._key(key, start),
                         head + (b"}" if rest == b"{}" else b"," + rest[1:]))

    def remove(self, session: Session, *old_spelling: object) -> None:
        """Remove ``session`` (nothing if the store has no such session).

        ``remove(key, start, end)`` (the old spelling) still works, with a DeprecationWarning.
        """
        if old_spelling:
            session = _old_remove(session, old_spelling)
        self._remove(*_checked(session))

    def _remove(self, key: object, start: int, end: int) -> None:
        data, value = self._stored(key, start, end)
        if value is not None:
            self._open().delete(data)

    def fetch_session(self, key: object, start: int, end: int) -> object | None:
        data, value = self._stored(*_checked(Session(key, start, end)))
        return None if value is None else self._entry(data, value)[1]

    def find_sessions(self, key: object, earliest_session_end: int, latest_session_start: int,
                      ) -> StoreIterator[tuple[Session, object]]:
        earliest = check_time("earliest_session_end", earliest_session_end)
        latest = check_time("latest_session_start", latest_session_start)
        self._open()
        prefix = self._prefix(key)
        low, entry = ms_to_iso(earliest).encode(), self._entry

        def convert(k: bytes, v: bytes) -> object:
            return entry(k, v) if session_end(v) >= low else SKIP

        return self._iterate(prefix, prefix + time_field(START_FIELD, latest) + b"\xff", convert)

    def fetch(self, key: object) -> StoreIterator[tuple[Session, object]]:
        self._open()
        prefix = self._prefix(key)
        return self._iterate(prefix, successor(prefix), self._entry)

    def all(self) -> StoreIterator[tuple[Session, object]]:
        self._open()
        return self._iterate(None, None, self._entry)


def _checked(session: object) -> Session:
    """``session`` with its times checked (epoch ms, start no later than end), or
    BadArgument naming it."""
    parts = as_session(session)
    if parts is None:
        raise BadArgument("session", session, f"{SESSION_SHAPE}, times in epoch milliseconds")
    start, end = check_time("session start", parts.start), check_time("session end", parts.end)
    if end < start:
        raise BadArgument("session", session, "a session that ends at or after its start")
    return Session(parts.key, start, end)


def _old_put(key: object, start: object, rest: tuple) -> tuple[Session, object]:
    """(session, value) of the old ``put(key, start, end, value)`` (deprecated)."""
    if len(rest) != 2:
        raise BadArgument("put arguments", (key, start, *rest),
                          "put(session, value), or the old put(key, start, end, value)")
    deprecated("SessionStore.put(key, start, end, value)",
               "put(Session(key, start, end), value)", stacklevel=4)
    return Session(key, start, rest[0]), rest[1]


def _old_remove(key: object, rest: tuple) -> Session:
    """The session of the old ``remove(key, start, end)`` (deprecated)."""
    if len(rest) != 2:
        raise BadArgument("remove arguments", (key, *rest),
                          "remove(session), or the old remove(key, start, end)")
    deprecated("SessionStore.remove(key, start, end)", "remove(Session(key, start, end))",
               stacklevel=4)
    return Session(key, *rest)
