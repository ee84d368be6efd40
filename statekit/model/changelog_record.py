"""The changelog record format: what any Kafka client finds in a statekit changelog topic.

One Kafka record per state change of a committed batch:

* **topic** ``<app>-<store>-changelog``; one Kafka partition per state partition,
  a record goes to the partition whose state store holds its key.
* **key**: UTF-8 JSON object of the key columns, compact (no spaces), the group
  keys first, then ``window_start`` (and ``window_end`` for tumbling and hopping
  windows). Timestamps are ISO-8601 UTC with milliseconds
  (``"2026-01-05T10:00:00.000Z"``), so byte order of keys that share the group
  keys is time order: a store can range-scan a key's windows.
* **value**: UTF-8 JSON object of the value columns (the aggregates; session
  windows add ``window_end`` first), or no value at all (a **tombstone**) when
  the state row was deleted, e.g. a window evicted by the watermark.
* **timestamp**: the batch's trigger time (``batchTimestampMs`` of Spark's offset log).
* **headers** (ASCII decimal text): ``statekit.format`` (``1``), ``statekit.batch``
  (the Spark batch id), ``statekit.seq`` and ``statekit.count`` (this record's
  position among the batch's records in this partition, and how many there are),
  ``statekit.prev`` (the previous batch that wrote to this partition, ``-1`` for none).
  The last three let a reader prove that no batch is missing or repeated.

Topic names and configuration live in ``statekit.changelog.naming``; reading many
records into Arrow and pandas in ``statekit.changelog.arrow``.

Example:
    >>> import pandas as pd
    >>> key = encode_key({"player": "p07", "window_start": pd.Timestamp("2026-01-05 10:00"),
    ...                   "window_end": pd.Timestamp("2026-01-05 10:10")},
    ...                  ["player", "window_start", "window_end"])
    >>> key
    b'{"player":"p07","window_start":"2026-01-05T10:00:00.000Z","window_end":"2026-01-05T10:10:00.000Z"}'
    >>> decode_json(key)["player"]
    'p07'
"""

from __future__ import annotations

import datetime as dt
import json
import json.scanner
import math
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from statekit._lazy import np, pd
from statekit.errors import ChangelogError

FORMAT_VERSION = 1
H_FORMAT, H_BATCH, H_SEQ, H_COUNT, H_PREV = (
    "statekit.format", "statekit.batch", "statekit.seq", "statekit.count", "statekit.prev")
HEADERS = (H_FORMAT, H_BATCH, H_SEQ, H_COUNT, H_PREV)
#: Columns holding timestamps (ISO-8601 UTC strings in the JSON).
TIME_COLUMNS = ("window_start", "window_end")
#: A changelog read into pandas has one row per record with these columns first, then the
#: decoded key columns and value columns (see ``statekit.changelog.log.Changelog``).
RECORD_COLUMNS = ("partition", "offset", "timestamp", "batch", "seq", "tombstone", "key")


def changelog_key_columns(key_columns: Sequence[str]) -> list[str]:
    """The key columns in changelog order: group keys first, then the window columns."""
    window = [c for c in TIME_COLUMNS if c in key_columns]
    return [c for c in key_columns if c not in TIME_COLUMNS] + window


def format_time(value) -> str:
    """A timestamp (naive = UTC) as ``YYYY-MM-DDTHH:MM:SS.mmmZ``."""
    stamp = pd.Timestamp(value)
    if stamp.tzinfo is not None:
        stamp = stamp.tz_convert("UTC").tz_localize(None)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{stamp.microsecond // 1000:03d}Z"


def _plain(name: str, value):
    """A JSON-ready Python value (numpy scalars → Python, NaN/NA → None, times → ISO)."""
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if name in TIME_COLUMNS or isinstance(value, (pd.Timestamp, dt.datetime, np.datetime64)):
        return format_time(value)
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def encode_json(row: Mapping[str, object], columns: Sequence[str]) -> bytes:
    """``row``'s ``columns``, in that order, as compact UTF-8 JSON."""
    return json.dumps({c: _plain(c, row[c]) for c in columns}, separators=(",", ":"),
                      ensure_ascii=False).encode()


def encode_key(row: Mapping[str, object], key_columns: Sequence[str]) -> bytes:
    """A changelog key (columns in changelog order, see ``changelog_key_columns``)."""
    return encode_json(row, changelog_key_columns(key_columns))


def decode_json(data: bytes | None) -> dict | None:
    """A changelog key or value as a dict (None for a tombstone's missing value).

    Changelog JSON is compact UTF-8 (``encode_json``), so it is read with the json
    module's C scanner alone, without ``json.loads``' encoding detection and whitespace
    passes (about 4x faster on a state row); anything else — other whitespace, bad
    bytes — goes through ``json.loads``, which reads it or raises its usual error.
    """
    if data is None:
        return None
    try:
        text = data.decode("utf-8")
        value, end = _scan(text, 0)
    except (UnicodeDecodeError, StopIteration, AttributeError):
        return json.loads(data)
    return value if end == len(text) else json.loads(data)


_scan = json.scanner.make_scanner(json.JSONDecoder())


class RecordHeaders(NamedTuple):
    """The statekit headers of one changelog record: the one owner of their format.

    ``batch``: the Spark batch that made the change; ``seq`` and ``count``: this record's
    position among that batch's records in its partition, and how many there are;
    ``prev``: the previous batch that wrote to the partition (-1 for none). A compacted
    copy of a changelog (``statekit.restore.compacted_copy``) keeps only some of a batch's
    records, so it writes ``count`` 0 (not known) and ``prev`` -1. On the wire
    each is ASCII decimal text, beside ``statekit.format`` (``FORMAT_VERSION``).

    Example:
        >>> raw = RecordHeaders(batch=4, seq=0, count=2, prev=1).encode()
        >>> raw[:2]
        [('statekit.format', b'1'), ('statekit.batch', b'4')]
        >>> RecordHeaders.parse(raw)
        RecordHeaders(batch=4, seq=0, count=2, prev=1)
        >>> RecordHeaders.parse([("traceparent", b"00-ab")]) is None   # not statekit's
        True
        >>> RecordHeaders.parse([("statekit.format", b"7")], where="offset 9")
        Traceback (most recent call last):
        ...
        statekit.errors.ChangelogError: offset 9 has statekit.format 7; this statekit reads format 1
    """

    batch: int
    seq: int
    count: int
    prev: int

    def encode(self) -> list[tuple[str, bytes]]:
        """The headers as a Kafka producer takes them."""
        return [(H_FORMAT, _FORMAT_TEXT), (H_BATCH, str(self.batch).encode()),
                (H_SEQ, str(self.seq).encode()), (H_COUNT, str(self.count).encode()),
                (H_PREV, str(self.prev).encode())]

    @property
    def consistent(self) -> bool:
        """0 <= seq < count (count 0: not known) and -1 <= prev < batch (so batch >= 0)."""
        return self.seq >= 0 and (self.count == 0 or self.seq < self.count) \
            and -1 <= self.prev < self.batch

    @classmethod
    def parse(cls, raw: Sequence[tuple[str, bytes]] | None, where: str = "the record"
              ) -> RecordHeaders | None:
        """A record's statekit headers, or None for a record without ``statekit.format``
        (not written by statekit). ``ChangelogError``, naming ``where``, for another format
        version or a header that is missing or not a whole number."""
        if not raw:
            return None
        if len(raw) == 5 and raw[0] == _FORMAT_HEADER:  # as ``encode`` writes them: no dict
            (n1, batch), (n2, seq), (n3, count), (n4, prev) = raw[1:]
            if n1 == H_BATCH and n2 == H_SEQ and n3 == H_COUNT and n4 == H_PREV:
                try:
                    head = cls(int(batch), int(seq), int(count), int(prev))
                except ValueError:
                    pass  # named below
                else:
                    if head.consistent:
                        return head
        found = dict(raw)
        version = found.get(H_FORMAT)
        if version is None:
            return None
        if version != _FORMAT_TEXT:
            raise ChangelogError(f"{where} has {H_FORMAT} {_text(version)}; this "
                                 f"statekit reads format {FORMAT_VERSION}")
        try:
            head = cls(int(found[H_BATCH]), int(found[H_SEQ]), int(found[H_COUNT]),
                       int(found[H_PREV]))
        except (KeyError, TypeError, ValueError):
            name = next(n for n in HEADERS[1:] if not _is_decimal(found.get(n)))
            shown = "missing" if found.get(name) is None else repr(_text(found[name]))
            raise ChangelogError(f"{where}: header {name} is {shown}; accepted: a whole "
                                 f"number in ASCII decimal") from None
        if not head.consistent:
            raise ChangelogError(f"{where}: headers {head} are inconsistent; accepted: batch "
                                 f">= 0, 0 <= seq < count (count 0: not known), "
                                 f"-1 <= prev < batch")
        return head


_FORMAT_TEXT = str(FORMAT_VERSION).encode()
_FORMAT_HEADER = (H_FORMAT, _FORMAT_TEXT)


def _is_decimal(value: bytes | None) -> bool:
    try:
        int(value)
    except (TypeError, ValueError):
        return False
    return True


def _text(value: bytes) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
