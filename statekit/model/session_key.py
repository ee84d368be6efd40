"""A session store's entry key, ``Session(key, start, end)``: one type, one name, for both
kinds of session store (Kafka Streams' ``Windowed<K>`` of a ``SessionStore``).

The local stores (``statekit.stores``) and a processor's stores (``statekit.processor``)
take and give the same ``Session``: ``put(session, value)``, ``remove(session)``,
``fetch_session(key, start, end)``, ``find_sessions(...)`` yield ``(Session, value)``.
What its fields hold is each store's: a local store's key is a dict of the group keys
and its times are epoch milliseconds; a processor's store key is one value or a tuple
(None without key fields) and its times are ``pandas.Timestamp`` values.

Example:
    >>> s = Session({"player": "p07"}, 0, 30_000)
    >>> s.end - s.start
    30000
    >>> as_session(("p07", 0)) is None   # not (key, start, end)
    True
"""

from __future__ import annotations

from typing import Any, NamedTuple

#: What a session argument must be, as error messages say it.
SESSION_SHAPE = "a Session(key, start, end) (or a (key, start, end) tuple)"


class Session(NamedTuple):
    """A session: its key, its start and its end (``start <= end``)."""

    key: Any
    start: Any
    end: Any


def as_session(value: object) -> Session | None:
    """``value`` as a ``Session`` when it is a (key, start, end) tuple; None for any other
    shape (each store raises its own error, naming ``value`` and ``SESSION_SHAPE``)."""
    if isinstance(value, tuple) and len(value) == 3:
        return Session(*value)
    return None
