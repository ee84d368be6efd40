"""Serdes: typed keys and values to the bytes a store keeps, and back.

The default, ``ChangelogJsonSerde``, is the changelog record format of
``statekit.model.changelog_record``: keys and values are dicts of columns, written as
compact UTF-8 JSON in a fixed column order, so the bytes equal the changelog's.

Example:
    >>> serde = ChangelogJsonSerde(["player"], ["count", "max_score"])
    >>> serde.encode_key({"player": "p07"})
    b'{"player":"p07"}'
    >>> serde.decode_value(serde.encode_value({"count": 3, "max_score": 9}))
    {'count': 3, 'max_score': 9}
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence

from statekit.errors import BadArgument
from statekit.model.changelog_record import decode_json, encode_json
from statekit.stores.key_layout import object_prefix


class Serde(ABC):
    """How a store turns keys and values into bytes; key byte order is the store's order."""

    key_columns: tuple[str, ...]
    value_columns: tuple[str, ...] | None

    @abstractmethod
    def encode_key(self, key: object) -> bytes:
        """A key as bytes."""

    @abstractmethod
    def decode_key(self, data: bytes) -> object:
        """Bytes back to a key."""

    @abstractmethod
    def encode_key_prefix(self, prefix: object) -> bytes:
        """Bytes that every key sharing ``prefix`` (its leading columns) starts with."""

    @abstractmethod
    def encode_value(self, value: object) -> bytes:
        """A value as bytes."""

    @abstractmethod
    def decode_value(self, data: bytes) -> object:
        """Bytes back to a value."""


class ChangelogJsonSerde(Serde):
    """Dicts of columns as the changelog's compact JSON, columns in a fixed order.

    Args:
        key_columns: the key's columns in byte order (group keys first).
        value_columns: the value's columns, or None to write a value dict's items as given.
    """

    def __init__(self, key_columns: Sequence[str], value_columns: Sequence[str] | None = None):
        self.key_columns = tuple(key_columns)
        self.value_columns = None if value_columns is None else tuple(value_columns)

    @staticmethod
    def _check(what: str, row: object, columns: tuple[str, ...] | None) -> Mapping:
        if not isinstance(row, Mapping) or (columns is not None and row.keys() != set(columns)):
            shown = "any column names" if columns is None else ", ".join(columns)
            raise BadArgument(what, row, f"a dict with the columns {shown}")
        return row

    def encode_key(self, key: object) -> bytes:
        return encode_json(self._check("key", key, self.key_columns), self.key_columns)

    def decode_key(self, data: bytes) -> dict:
        return decode_json(data)

    def encode_key_prefix(self, prefix: object) -> bytes:
        """The bytes of keys whose leading columns are ``prefix`` (a dict of them).

        Example:
            >>> ChangelogJsonSerde(["region", "player"]).encode_key_prefix({"region": "eu"})
            b'{"region":"eu",'
        """
        n = len(prefix) if isinstance(prefix, Mapping) else -1
        if n < 0 or prefix.keys() != set(self.key_columns[:n]):
            options = [list(self.key_columns[:i]) for i in range(len(self.key_columns) + 1)]
            raise BadArgument("key prefix", prefix,
                              "a dict of leading key columns: " + " or ".join(map(str, options)))
        if n == len(self.key_columns):
            return encode_json(prefix, self.key_columns)
        return object_prefix(encode_json(prefix, self.key_columns[:n]))

    def encode_value(self, value: object) -> bytes:
        row = self._check("value", value, self.value_columns)
        return encode_json(row, self.value_columns if self.value_columns is not None
                           else list(row))

    def decode_value(self, data: bytes) -> dict:
        return decode_json(data)

    def __repr__(self) -> str:
        values = None if self.value_columns is None else list(self.value_columns)
        return f"ChangelogJsonSerde({list(self.key_columns)}, {values})"
