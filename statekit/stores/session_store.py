"""The session store, written once over any bytes ``Backend``.

As in the changelog, a key is ``{<group keys>,"window_start":"<ISO>"}`` and the
value starts with the session's end: ``{"window_end":"<ISO>",<aggregates>}``.
A key's sessions are one byte range, in start order.

Example:
    >>> from statekit.stores import InMemorySessionStore
    >>> store = InMemorySessionStore("sessions", key_columns=["player"],
    ...                              value_columns=["count"])
    >>> store.put({"player": "p07"}, 0, 30_000, {"count": 4})
    >>> store.put({"player": "p07"}, 100_000, 160_000, {"count": 2})
    >>> with store.find_sessions({"player": "p07"}, 20_000, 90_000) as it:
    ...     list(it)
    [(SessionKey(key={'player': 'p07'}, start=0, end=30000), {'count': 4})]
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from statekit.errors import BadArgument
from statekit.model.changelog_record import decode_json
from statekit.stores.backend import Backend
from statekit.stores.base import SessionKey, SessionStore
from statekit.stores.iterators import SKIP, StoreIterator
from statekit.stores.key_layout import (
    END_FIELD,
    ISO_WIDTH,
    START_FIELD,
    check_time,
    check_time_range,
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

    def _session(self, key: bytes, value: bytes) -> tuple[SessionKey, object]:
        decoded, aggregates = decode_json(key), decode_json(value)
        start = iso_to_ms(decoded.pop("window_start"))
        return SessionKey(decoded, start, iso_to_ms(aggregates.pop("window_end"))), aggregates

    def put(self, key: object, session_start_ms: int, session_end_ms: int,
            value: object | None) -> None:
        start, end = check_time_range("session_start_ms", session_start_ms,
                                      "session_end_ms", session_end_ms)
        data, backend = self._key(key, start), self._open()
        if value is None:
            backend.delete(data)
            return
        if isinstance(value, Mapping) and ("window_end" in value or "window_start" in value):
            raise BadArgument("session value", value,
                              "the aggregate columns only (the session's start and end are "
                              "session_start_ms and session_end_ms)")
        rest = self.serde.encode_value(value)
        head = b"{" + time_field(END_FIELD, end)
        backend.put(data, head + (b"}" if rest == b"{}" else b"," + rest[1:]))

    def find_sessions(self, key: object, earliest_session_end: int, latest_session_start: int,
                      ) -> StoreIterator[tuple[SessionKey, object]]:
        earliest = check_time("earliest_session_end", earliest_session_end)
        latest = check_time("latest_session_start", latest_session_start)
        self._open()
        prefix = self._prefix(key)
        low, session = ms_to_iso(earliest).encode(), self._session

        def convert(k: bytes, v: bytes) -> object:
            return session(k, v) if session_end(v) >= low else SKIP

        return self._iterate(prefix, prefix + time_field(START_FIELD, latest) + b"\xff", convert)

    def remove(self, key: object, session_start_ms: int, session_end_ms: int) -> None:
        start, end = check_time_range("session_start_ms", session_start_ms,
                                      "session_end_ms", session_end_ms)
        data, backend = self._key(key, start), self._open()
        old = backend.get(data)
        if old is not None and session_end(old) == ms_to_iso(end).encode():
            backend.delete(data)

    def fetch(self, key: object) -> StoreIterator[tuple[SessionKey, object]]:
        self._open()
        prefix = self._prefix(key)
        return self._iterate(prefix, successor(prefix), self._session)

    def all(self) -> StoreIterator[tuple[SessionKey, object]]:
        self._open()
        return self._iterate(None, None, self._session)
