"""Keys of one part of an attached query's operator, made exact: checked, stored, placed.

A part's changelog (``statekit.live``) holds one row per key: an aggregation's group (and
its window's start and end, as columns), a deduplication's columns, a group state's
grouping key, a transformWithState variable's grouping key (and a map state's user key).
Its local store is a key-value store over all the key columns. ``PartKeyCodec`` is
``KeyCodec`` (statekit's own stores' codec) built on for a part: it gives a serving
instance a key from a dict or JSON text, checked against the columns' Spark types (as
``KeyCodec`` checks a group key, after turning times, dates and binary into what the
changelog holds); its store bytes (the changelog's key, ``statekit.model.changelog_record``,
times as ISO text, as ``KeyCodec`` writes them); and the state partition Spark keeps it
in: the part's placement columns (``PartShape.placement_columns``) placed as an unwindowed
row (``statekit.serve.routing.placement.state_partition``, as
``statekit.live.part_routing`` places a part's rows; a null leaves the hash as it is; a
time is hashed in microseconds, and keys name times to the millisecond, as the changelog
stores them).

``key_codec(schema)`` picks the codec of a changelog's ``StoreSchema``.

Example:
    >>> from statekit.changelog.meta import PartShape
    >>> shape = PartShape("own", 0, "stateStoreSave", "aggregation", "store", "default",
    ...                   ("window_start", "window_end", "team"), ("events",))
    >>> codec = PartKeyCodec(shape, {"window_start": "timestamp", "window_end": "timestamp",
    ...                              "team": "string"}, partitions=3)
    >>> where = codec.locate({"team": "blue", "window_start": "2026-01-05T10:00Z",
    ...                       "window_end": "2026-01-05T10:05Z"})
    >>> where[0], where[1].decode()[:44]
    (0, '{"window_start":"2026-01-05T10:00:00.000Z","')
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping

import pandas as pd

from statekit.errors import BadArgument
from statekit.model.changelog_record import encode_json
from statekit.model.store_schema import PartShape, StoreSchema
from statekit.serve.routing.key_codec import KeyCodec
from statekit.serve.routing.key_text import parse_key_json, parse_key_object
from statekit.serve.routing.key_times import time_ms, time_schema
from statekit.serve.routing.key_values import VALUE_SCHEMAS, check_text_length
from statekit.serve.routing.placement import state_partition
from statekit.serve.routing.value_hash import TYPES

#: Spark types of a key column that ``PartKeyCodec`` takes as a time
TIME_TYPES = ("timestamp", "timestamp_ntz")


def key_codec(schema: StoreSchema) -> KeyCodec | PartKeyCodec:
    """The codec of a changelog's keys: ``KeyCodec`` for a statekit query's store,
    ``PartKeyCodec`` for a part of an attached query."""
    if schema.part is not None:
        return PartKeyCodec(schema.part, schema.key_types, schema.partitions)
    return KeyCodec(schema.spec, schema.key_types, schema.partitions)


class PartKeyCodec(KeyCodec):
    """Keys of one part of an attached query: every key column, checked by its Spark type.

    Built on ``KeyCodec``: a part has no ``QuerySpec`` (no group keys apart, no windows), so
    it sets the columns every codec has itself; it keeps ``KeyCodec``'s value checks, store
    rows and entries, and places a key by its placement columns alone.

    Args:
        shape: the part (from its changelog's metadata).
        key_types: the key columns' Spark types.
        partitions: the query's state partitions.

    Raises BadArgument naming the part when Spark places its rows by a column of a type
    statekit does not hash (a struct, an array, a map): such a part can be read but not
    served by key.
    """

    #: one row per key, no windows: a key-value store (the word ``QuerySpec`` uses)
    kind = "running"
    windowed = False
    size_ms = 0

    spec = None  # no QuerySpec: the shape says what the part holds

    def __init__(self, shape: PartShape, key_types: Mapping[str, str], partitions: int):
        # store byte order: a part's changelog keeps Spark's order of the key columns
        self._init_columns(shape.key_columns, list(shape.key_columns), key_types, partitions,
                           times=[c for c in shape.key_columns
                                  if key_types.get(c) in TIME_TYPES])
        self.shape = shape
        self.placement = list(shape.placement_columns)
        #: the leading key columns a key may stop at, to ask for every entry under them:
        #: a map state's grouping key (its entries), a join store's join key (its rows)
        self.prefix = self.placement if (len(self.placement) < len(self.keys) and
                                         self.keys[:len(self.placement)] == self.placement
                                         ) else None
        unhashed = {c: self.key_types.get(c) for c in self.placement
                    if self.key_types.get(c) not in TYPES}
        if unhashed:
            raise BadArgument("part", f"{shape.operator_id}/{shape.name}",
                              f"a part placed by columns of the types statekit hashes "
                              f"({', '.join(TYPES)}; this one by {unhashed})")
        self._placement_types = {c: self.key_types[c] for c in self.placement}

    # --- keys -------------------------------------------------------------------------
    def parse(self, text: str | bytes, what: str = "key", *, window: bool = False) -> dict:
        """A key sent as JSON text: one object naming only key columns (checked by ``key``).

        Example:
            >>> from statekit.changelog.meta import PartShape
            >>> codec = PartKeyCodec(PartShape("own", 1, "dedupe", "deduplication", "store",
            ...                      "default", ("event_id",), ("value",)),
            ...                      {"event_id": "string"}, 2)
            >>> codec.parse('{"event_id": "e1", "value": 3}')
            Traceback (most recent call last):
            ...
            statekit.errors.BadArgument: bad key: '{"event_id": "e1", "value": 3}'; \
accepted: a JSON object of the key columns ['event_id'] (not ['value'])
        """
        return parse_key_object(text, what, self.keys)

    def json_schema(self, window: bool = False) -> dict:
        """The JSON Schema of a key ``parse`` takes: each key column by its Spark type (a
        time as ``time_schema``), every one required (null allowed: Spark keeps null keys)."""
        properties = {}
        for name in self.keys:
            kind = self.key_types.get(name)
            schema = time_schema() if kind in TIME_TYPES else dict(
                VALUE_SCHEMAS.get(kind, {"type": ["string", "number", "boolean"]}))
            properties[name] = {"anyOf": [schema, {"type": "null"}]}
        return {"type": "object", "properties": properties,
                "required": list(self.prefix or self.keys), "additionalProperties": False}

    def window_start_schema(self) -> dict:
        raise BadArgument("query", "a window", "point and range queries by key (a part's "
                                               "store has its times as key columns)")

    def key(self, key: object) -> dict:
        """A full key: every key column, times as milliseconds since the epoch; or, where
        the part has them (``prefix``), its leading placement columns alone (a map state's
        grouping key: ``get`` then answers every entry under it).

        Example:
            >>> from statekit.changelog.meta import PartShape
            >>> codec = PartKeyCodec(PartShape("own", 1, "dedupe", "deduplication", "store",
            ...                      "default", ("player", "ts"), ("value",)),
            ...                      {"player": "string", "ts": "timestamp"}, 2)
            >>> codec.key({"player": "p07", "ts": "2026-01-05T10:00:00.5Z"})
            {'player': 'p07', 'ts': 1767607200500}
            >>> codec.key({"player": 7, "ts": 0})
            Traceback (most recent call last):
            ...
            statekit.errors.BadArgument: bad key player: 7; accepted: a string value \
(the key column's type)
        """
        raw = parse_key_json(key) if isinstance(key, str | bytes) else key
        if not isinstance(raw, Mapping):
            raise BadArgument("key", raw, f"a dict of the key columns {self.keys}")
        wanted = self.keys
        if self.prefix is not None and set(raw) == set(self.prefix):
            wanted = self.prefix
        missing = [k for k in wanted if k not in raw]
        if missing:
            also = (f", or only {self.prefix} for every entry under them"
                    if self.prefix is not None else "")
            raise BadArgument("key", dict(raw), f"a value (or None) for each key column "
                                                f"{self.keys}{also} (missing {missing})")
        return {name: self._value(name, raw[name]) for name in wanted}

    def is_prefix(self, key: Mapping) -> bool:
        """True for a key that names only the leading ``prefix`` columns."""
        return len(key) < len(self.keys)

    group = key  # a part's key has no window apart: its group is the whole key

    def _value(self, name: str, value: object) -> object:
        if value is None:
            return None
        kind = self.key_types.get(name)
        if kind in TIME_TYPES:
            return time_ms(value, name)
        if kind == "date":   # as Spark's JSON writes a date: ISO text
            try:
                return pd.Timestamp(value).date().isoformat() if not isinstance(
                    value, bool | int | float) else _refuse(name, value, "a date")
            except (TypeError, ValueError):
                _refuse(name, value, "a date (ISO text such as 2026-01-05, or a date)")
        if kind == "binary":   # as Spark's JSON writes binary (and JSON carries it): base64
            if isinstance(value, bytes | bytearray):
                return base64.b64encode(bytes(value)).decode()
            try:
                base64.b64decode(value, validate=True)
                return value
            except (TypeError, ValueError):
                _refuse(name, value, "bytes, or their base64 text (the key column is binary)")
        check_text_length(name, value)
        return super()._value(name, value)

    def partition(self, key: Mapping) -> int:
        """The Spark state partition of a full key (``key()``'s result): its placement
        columns as Spark holds them (times in microseconds, binary as bytes), placed as an
        unwindowed row."""
        row = {}
        for name, kind in self._placement_types.items():
            value = key[name]
            if value is not None and kind in TIME_TYPES:
                value = int(value) * 1000  # Spark keeps times in microseconds
            elif value is not None and kind == "binary":
                value = base64.b64decode(value)
            row[name] = value
        return state_partition(row, self.placement, False, self.partitions,
                               self._placement_types)

    def store_key(self, key: Mapping) -> bytes:
        """The changelog key bytes of a full key; of a prefix key, the bytes every key
        under it starts with (its JSON object left open after its last column)."""
        columns = [c for c in self.key_columns if c in key]
        data = encode_json(self._key_row(key, columns), columns)
        return data[:-1] + b"," if len(columns) < len(self.key_columns) else data

    def locate(self, key: object) -> tuple[int, bytes, dict]:
        """A point query's key: its partition, its store key bytes and its columns as the
        store's rows give them (times as ISO text)."""
        full = self.key(key)
        data = self.store_key(full)
        row = json.loads(data[:-1] + b"}") if self.is_prefix(full) else json.loads(data)
        return self.partition(full), data, row

    def partitions_of_range(self, group: Mapping, time_from: object, time_to: object
                            ) -> dict[int, list[int]]:
        raise BadArgument("query", "a time range", "point and range queries by key (a part's "
                                                   "store has its times as key columns)")


def _refuse(name: str, value: object, accepted: str):
    raise BadArgument(f"key {name}", value, accepted)
