"""Spark's state schema files: the key and value schema each stateful operator checks at start.

When a stateful query starts, Spark compares the key and value schemas of each operator's state
with the ones it wrote on the first run, and fails the query when they differ in shape
(``STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE``, ``..._VALUE_...``). This module is the one owner
of those files' format (where they are: ``Checkpoint.state_schema_files``):

- version 1: ``writeUTF("v1")``, then the key's and the value's StructType JSON, each
  ``writeUTF``;
- version 2: ``writeUTF("v2")``, then for the key and then the value: an int (the number of
  chunks) and that many ``writeUTF`` chunks of the JSON (one chunk holds at most 65,535 bytes);
- version 3 (transformWithState, one entry per state variable, Spark's "column families"):
  ``writeUTF("v3")``, an int (the number of entries), then per entry: ``writeUTF(name)``, a
  short (the key schema's id) and the key's chunks, a short and the value's chunks, then the
  chunks of the key encoder's JSON and of the user key encoder's.

``writeUTF`` is Java's: a big-endian unsigned short length, then modified UTF-8 (plain UTF-8
for the text Spark writes here).

Example:
    >>> import struct
    >>> def utf(text):
    ...     data = text.encode()
    ...     return struct.pack(">H", len(data)) + data
    >>> key = '{"type":"struct","fields":[{"name":"player","type":"string",' \\
    ...       '"nullable":true,"metadata":{}}]}'
    >>> value = '{"type":"struct","fields":[{"name":"count","type":"long",' \\
    ...         '"nullable":true,"metadata":{}}]}'
    >>> data = utf("v2") + struct.pack(">i", 1) + utf(key) + struct.pack(">i", 1) + utf(value)
    >>> [family] = parse_state_schema(data)
    >>> family.name, type_text(family.key), type_text(family.value)
    ('default', 'struct<player:string>', 'struct<count:bigint>')
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql.types import ArrayType, DataType, MapType, StructType

from statekit.spark_state.checkpoint import DEFAULT_STORE, Checkpoint

WHAT = "state schema file"


@dataclass(frozen=True)
class ColumnFamilySchema:
    """The key and value schema of one store (``default``) or one transformWithState variable
    (its name; the ``$``-names are Spark's own timers and TTL indexes)."""

    name: str
    key: StructType
    value: StructType


class _Reader:
    """Java ``DataInput`` reads over bytes; ``ValueError`` when the bytes run out."""

    def __init__(self, data: bytes):
        self.data, self.at = data, 0

    def take(self, size: int) -> bytes:
        if size < 0 or self.at + size > len(self.data):
            raise ValueError(f"it ends at byte {len(self.data)} where {size} more were expected")
        chunk = self.data[self.at:self.at + size]
        self.at += size
        return chunk

    def short(self) -> int:
        return struct.unpack(">h", self.take(2))[0]

    def int(self) -> int:
        return struct.unpack(">i", self.take(4))[0]

    def utf(self) -> str:
        return self.take(struct.unpack(">H", self.take(2))[0]).decode("utf-8")

    def chunks(self) -> str:
        count = self.int()
        if not 0 <= count <= len(self.data):
            raise ValueError(f"it gives {count} chunks")
        return "".join(self.utf() for _ in range(count))


def parse_state_schema(data: bytes) -> list[ColumnFamilySchema]:
    """The column families a state schema file of any version holds; ``ValueError`` saying
    what is wrong when the bytes are not one."""
    reader = _Reader(data)
    version = reader.utf()
    if version == "v1":
        families = [(DEFAULT_STORE, reader.utf(), reader.utf())]
    elif version == "v2":
        families = [(DEFAULT_STORE, reader.chunks(), reader.chunks())]
    elif version == "v3":
        families = []
        for _ in range(reader.int()):
            name = reader.utf()
            reader.short()
            key = reader.chunks()
            reader.short()
            value = reader.chunks()
            reader.chunks()  # the key encoder
            reader.chunks()  # the user key encoder
            families.append((name, key, value))
    else:
        raise ValueError(f"its version is {version[:20]!r}, not v1, v2 or v3")
    if reader.at != len(data):
        raise ValueError(f"{len(data) - reader.at} bytes follow the schemas")
    try:
        return [ColumnFamilySchema(name, StructType.fromJson(json.loads(key)),
                                   StructType.fromJson(json.loads(value)))
                for name, key, value in families]
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"a schema in it is not Spark's StructType JSON ({exc})") from None


def stored_state_schema(checkpoint: Checkpoint, operator_id: int = 0
                        ) -> list[ColumnFamilySchema]:
    """The state schemas Spark checks ``operator_id``'s state against at the next start (none
    when it wrote no schema file); CorruptFile naming a file that cannot be read as one."""
    families = []
    for path in checkpoint.state_schema_files(operator_id):
        families += _read(checkpoint, path)
    return families


def _read(checkpoint: Checkpoint, path: Path) -> list[ColumnFamilySchema]:
    try:
        return parse_state_schema(path.read_bytes())
    except (ValueError, UnicodeDecodeError) as exc:
        raise checkpoint.corrupt(path, WHAT, str(exc)) from None


def type_text(kind: DataType) -> str:
    """Spark's short name of a type, as ``DESCRIBE`` prints it: ``bigint``,
    ``struct<start:timestamp,end:timestamp>``."""
    return kind.simpleString()


def same_shape(stored: DataType, new: DataType) -> bool:
    """Spark's rule for a state schema at restart: the same types in the same order, at every
    depth; field names, nullability and metadata do not count (a key column renamed, of the
    same type, is accepted: its old values are read as the new column's).

    Example:
        >>> from pyspark.sql.types import LongType, StringType, StructField
        >>> old = StructType([StructField("player", StringType())])
        >>> same_shape(old, StructType([StructField("team", StringType())]))
        True
        >>> same_shape(old, StructType([StructField("player", LongType())]))
        False
    """
    if isinstance(stored, StructType) and isinstance(new, StructType):
        return len(stored.fields) == len(new.fields) and all(
            same_shape(a.dataType, b.dataType)
            for a, b in zip(stored.fields, new.fields, strict=True))
    if isinstance(stored, ArrayType) and isinstance(new, ArrayType):
        return same_shape(stored.elementType, new.elementType)
    if isinstance(stored, MapType) and isinstance(new, MapType):
        return same_shape(stored.keyType, new.keyType) and \
            same_shape(stored.valueType, new.valueType)
    return stored == new
