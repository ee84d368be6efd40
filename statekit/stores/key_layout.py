"""The store key layout: changelog key bytes, time text and byte-range bounds.

A store key is the changelog key exactly (see ``statekit.model.changelog_record``):
compact JSON, group keys first, then ``"window_start":"<ISO ms>Z"`` (and
``window_end`` for tumbling and hopping windows). The ISO text has a fixed
width, so among keys sharing the group keys byte order is time order, and a
key's windows form one contiguous byte range starting with its *group prefix*
(the JSON object opened and the group keys written, ending with a comma).

Example:
    >>> ms_to_iso(1_767_607_200_000)
    '2026-01-05T10:00:00.000Z'
    >>> iso_to_ms("2026-01-05T10:00:00.000Z")
    1767607200000
    >>> object_prefix(b'{"player":"p07"}')
    b'{"player":"p07",'
    >>> successor(b"ab")
    b'ac'
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from statekit.errors import BadArgument
from statekit.model.changelog_record import TIME_COLUMNS, changelog_key_columns
from statekit.validate import is_whole_number, whole_number

KINDS = ("key-value", "window", "session")
#: The last millisecond a 4-digit-year ISO timestamp can show (9999-12-31T23:59:59.999Z).
MAX_TIME_MS = 253_402_300_799_999
_EPOCH = dt.datetime(1970, 1, 1)
_MS = dt.timedelta(milliseconds=1)
START_FIELD = b'"window_start":"'
END_FIELD = b'"window_end":"'
#: The width of ``YYYY-MM-DDTHH:MM:SS.mmmZ``.
ISO_WIDTH = 24


def ms_to_iso(ms: int) -> str:
    """Milliseconds since the epoch (UTC) as the changelog's ISO text."""
    stamp = _EPOCH + dt.timedelta(milliseconds=ms)
    return f"{stamp:%Y-%m-%dT%H:%M:%S}.{ms % 1000:03d}Z"


def iso_to_ms(text: str | bytes) -> int:
    """The changelog's ISO text (``...Z``) as milliseconds since the epoch."""
    if isinstance(text, bytes):
        text = text.decode()
    stamp = dt.datetime.fromisoformat(text[:-1] if text.endswith("Z") else text)
    if stamp.tzinfo is not None:
        stamp = stamp.astimezone(dt.UTC).replace(tzinfo=None)
    return (stamp - _EPOCH) // _MS


def check_time(what: str, value: object) -> int:
    """``value`` as a timestamp in ms, or BadArgument naming ``what``."""
    if not is_whole_number(value):
        raise BadArgument(what, value, "an integer number of milliseconds since the epoch")
    return whole_number(value, what, minimum=0, maximum=MAX_TIME_MS,
                        accepted=f"milliseconds from 0 to {MAX_TIME_MS} (year 9999)")


def check_time_range(what_from: str, time_from: object, what_to: str, time_to: object,
                     ) -> tuple[int, int]:
    """Two timestamps ``time_from <= time_to``, or BadArgument."""
    start, end = check_time(what_from, time_from), check_time(what_to, time_to)
    if start > end:
        raise BadArgument(what_from, time_from, f"a time no later than {what_to}={time_to}")
    return start, end


def time_field(field: bytes, ms: int) -> bytes:
    """``"window_start":"<ISO>"`` as key bytes (no separator after it)."""
    return field + ms_to_iso(ms).encode() + b'"'


def object_prefix(encoded: bytes) -> bytes:
    """A compact JSON object's bytes opened for more fields: ``{"a":1}`` → ``{"a":1,``."""
    return b"{" if encoded == b"{}" else encoded[:-1] + b","


def successor(prefix: bytes) -> bytes | None:
    """The smallest bytes after every key starting with ``prefix`` (None: no such bound)."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes([stripped[-1] + 1])


def _columns(what: str, columns: object) -> list[str]:
    if isinstance(columns, str) or not isinstance(columns, Sequence):
        raise BadArgument(what, columns, "a list of column names")
    names = list(columns)
    if not all(isinstance(c, str) and c for c in names) or len(set(names)) != len(names):
        raise BadArgument(what, columns, "distinct, non-empty column names")
    return names


def store_columns(kind: str, key_columns: Sequence[str], value_columns: Sequence[str] | None,
                  window_size_ms: int | None = None) -> tuple[tuple[str, ...],
                                                             tuple[str, ...] | None]:
    """The key and value columns of a store of ``kind``, in changelog order.

    key-value: the key columns in changelog order. window: the group keys, then
    ``window_start``, then ``window_end`` when the keys name it or a window size
    is given. session: the group keys, then ``window_start``; the value starts
    with ``window_end`` (as ``QuerySpec.value_columns`` has it).

    Example:
        >>> store_columns("window", ["window_start", "window_end", "player"], ["count"])
        (('player', 'window_start', 'window_end'), ('count',))
        >>> store_columns("session", ["window_start", "player"], ["window_end", "count"])
        (('player', 'window_start'), ('window_end', 'count'))
    """
    if kind not in KINDS:
        raise BadArgument("store kind", kind, KINDS)
    keys = _columns("key columns", key_columns)
    values = None if value_columns is None else _columns("value columns", value_columns)
    group = [c for c in keys if c not in TIME_COLUMNS]
    if kind == "key-value":
        if not keys:
            raise BadArgument("key columns", key_columns, "one or more column names")
        layout = changelog_key_columns(keys)
    elif kind == "window":
        end = "window_end" in keys or window_size_ms is not None
        layout = [*group, "window_start", *(["window_end"] if end else [])]
        if values is not None and set(values) & set(TIME_COLUMNS):
            raise BadArgument("window store value columns", value_columns,
                              "aggregate columns (window_start and window_end are in the key)")
    else:
        if "window_end" in keys:
            raise BadArgument("session store key columns", key_columns,
                              "group keys and window_start (a session's window_end is the "
                              "first value column, as in the changelog)")
        layout = [*group, "window_start"]
        if values is not None:
            if "window_start" in values:
                raise BadArgument("session store value columns", value_columns,
                                  "window_end and aggregate columns")
            values = ["window_end", *(c for c in values if c != "window_end")]
    return tuple(layout), None if values is None else tuple(values)
