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

Example:
    >>> key = encode_key({"player": "p07", "window_start": pd.Timestamp("2026-01-05 10:00"),
    ...                   "window_end": pd.Timestamp("2026-01-05 10:10")},
    ...                  ["player", "window_start", "window_end"])
    >>> key
    b'{"player":"p07","window_start":"2026-01-05T10:00:00.000Z","window_end":"2026-01-05T10:10:00.000Z"}'
    >>> decode_json(key)["player"]
    'p07'
    >>> changelog_topic("leaderboard", "counts")
    'leaderboard-counts-changelog'
"""

from __future__ import annotations

import datetime as dt
import io
import json
import json.scanner
import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.json as pa_json

from statekit.errors import BadArgument
from statekit.state.times import iso_times, table_for_pandas
from statekit.validate import kafka_name

FORMAT_VERSION = 1
H_FORMAT, H_BATCH, H_SEQ, H_COUNT, H_PREV = (
    "statekit.format", "statekit.batch", "statekit.seq", "statekit.count", "statekit.prev")
HEADERS = (H_FORMAT, H_BATCH, H_SEQ, H_COUNT, H_PREV)
#: Columns holding timestamps (ISO-8601 UTC strings in the JSON).
TIME_COLUMNS = ("window_start", "window_end")
#: Kafka Streams keeps windowed changelogs this much longer than the windows need.
ADDITIONAL_RETENTION_MS = 24 * 3600 * 1000
#: A changelog read into pandas has one row per record with these columns first, then the
#: decoded key columns and value columns (see ``statekit.changelog.log.Changelog``).
RECORD_COLUMNS = ("partition", "offset", "timestamp", "batch", "seq", "tombstone", "key")


def changelog_topic(app: str, store: str) -> str:
    """The changelog topic name of ``store`` in application ``app``, as Kafka Streams names it."""
    kafka_name(app, "application name")
    kafka_name(store, "store name")
    return kafka_name(f"{app}-{store}-changelog", "changelog topic name")


def topic_config(windowed: bool, retention_ms: int | None = None) -> dict[str, str]:
    """Topic configs of a changelog: ``compact``, or ``compact,delete`` with ``retention.ms``."""
    if not windowed:
        return {"cleanup.policy": "compact"}
    if retention_ms is None or retention_ms <= 0:
        raise BadArgument("retention.ms of a windowed changelog", retention_ms,
                          "a positive number of milliseconds")
    return {"cleanup.policy": "compact,delete", "retention.ms": str(int(retention_ms))}


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


def headers(batch: int, seq: int, count: int, prev: int) -> list[tuple[str, bytes]]:
    """The statekit headers of one changelog record."""
    return [(H_FORMAT, str(FORMAT_VERSION).encode()), (H_BATCH, str(batch).encode()),
            (H_SEQ, str(seq).encode()), (H_COUNT, str(count).encode()),
            (H_PREV, str(prev).encode())]


def parse_headers(raw: Sequence[tuple[str, bytes]] | None) -> dict[str, int] | None:
    """The statekit headers of a record as ints, or None when it has none of them."""
    if not raw:
        return None
    found = {name: value for name, value in raw if name in HEADERS}
    if H_FORMAT not in found:
        return None
    return {name: int(value) for name, value in found.items()}


def parse_times(frame: pd.DataFrame) -> pd.DataFrame:
    """Window columns of a decoded frame from ISO text to naive-UTC ``datetime64[ns]`` (or
    ``[us]`` for a column with a time beyond 2262: ``statekit.state.times``)."""
    for column in TIME_COLUMNS:
        if column in frame.columns and frame[column].dtype == object:
            frame[column] = iso_times(frame[column])
    return frame


def json_table(objects: Sequence[bytes], times: Sequence[str] = ()) -> pa.Table:
    """Many changelog keys or values (compact JSON objects, one per entry) as one Arrow
    table, parsed in C++ by ``pyarrow.json``: the bulk read of a store without a Python
    object per row. Window columns become naive-UTC ``timestamp[ms]``; a column's type is
    inferred from all its values (ints and floats mixed: double; nulls kept). ``times``
    names window columns every object has (a store's keys): they are parsed as times
    directly, without a text column in between (~40% faster for a window store's keys).

    Example:
        >>> table = json_table([b'{"player":"p07","window_start":"2026-01-05T10:00:00.000Z"}',
        ...                     b'{"player":null,"window_start":"2026-01-05T10:10:00.000Z"}'])
        >>> table.schema.types
        [DataType(string), TimestampType(timestamp[ms])]
        >>> table.column("player").to_pylist()
        ['p07', None]
    """
    if not objects:
        return pa.table({})
    known = pa.schema([(name, pa.timestamp("ms")) for name in times if name in TIME_COLUMNS])
    # compact JSON has no raw newline (json.dumps escapes them in strings): one line each
    lines = b"\n".join(objects)
    try:
        table = pa_json.read_json(io.BytesIO(lines), parse_options=pa_json.ParseOptions(
            explicit_schema=known) if len(known) else None)
    except pa.ArrowInvalid:
        if not len(known):
            raise
        known = pa.schema([])  # a time Arrow cannot read (a year beyond 9999): as text, below
        table = pa_json.read_json(io.BytesIO(lines))
    if table.num_columns == 0:  # every object empty: no columns, but the rows count
        return pa.table({"_": pa.nulls(len(objects))}).drop_columns(["_"])
    if len(known):  # the explicit columns come first: put them last, as a key writes them
        table = table.select([*table.column_names[len(known):], *known.names])
    for name in TIME_COLUMNS:
        if name in table.column_names and pa.types.is_string(table.schema.field(name).type):
            try:
                utc = table[name].cast(pa.timestamp("ms", "UTC")).cast(pa.timestamp("ms"))
            except pa.ArrowInvalid:  # a year beyond 9999 (Java writes +57983-...): one by one
                utc = pa.array(iso_times(table[name].to_pylist()).to_numpy(),
                               pa.timestamp("us")).cast(pa.timestamp("ms"))
            table = table.set_column(table.column_names.index(name), name, utc)
    return table


def table_to_pandas(table: pa.Table) -> pd.DataFrame:
    """An Arrow table of state rows as pandas: times as naive-UTC ``datetime64[ns]`` (``[us]``
    beyond 2262, as ``parse_times`` gives), ints with nulls as float64, text as object.

    Text is not de-duplicated into shared ``str`` objects: a state key's text is mostly
    distinct (a key is unique within its window), and skipping pyarrow's dedupe pass makes
    a million-row key column ~5x faster to convert; a repeated value costs its own copy.
    """
    return table_for_pandas(table).to_pandas(deduplicate_objects=False)
