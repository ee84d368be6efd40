"""Kafka's common serdes, by name, as decoders of a store's bytes: ``string``, ``long``,
``integer``, ``double``, ``json``, ``bytes`` (``org.apache.kafka.common.serialization.Serdes``:
big-endian numbers, UTF-8 text).

Example:
    >>> decoder("long")(b"\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x2a")
    42
    >>> decoder("json")(b'{"a": 1}')
    {'a': 1}
    >>> decoder("avro")
    Traceback (most recent call last):
    ...
    statekit.errors.BadArgument: bad serde: 'avro'; accepted: one of 'bytes', 'double', \
'integer', 'json', 'long', 'string'
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable

from statekit.errors import BadArgument, KafkaStreamsStateError


def _fixed(name: str, layout: str) -> Callable[[bytes], object]:
    packer = struct.Struct(layout)

    def decode(raw: bytes) -> object:
        if len(raw) != packer.size:
            raise KafkaStreamsStateError(
                f"a {len(raw)}-byte value is not a {name} (Serdes.{name.capitalize()}() "
                f"writes {packer.size} bytes): give the store's own serde")
        return packer.unpack(raw)[0]

    return decode


def _text(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise KafkaStreamsStateError(f"{raw[:16]!r}... is not UTF-8 text (Serdes.String()): "
                                     "give the store's own serde") from None


def _json(raw: bytes) -> object:
    try:
        return json.loads(raw)
    except ValueError:
        raise KafkaStreamsStateError(f"{raw[:16]!r}... is not JSON: give the store's own "
                                     "serde") from None


#: serde name → the decoder of its bytes
SERDES: dict[str, Callable[[bytes], object]] = {
    "string": _text, "long": _fixed("long", ">q"), "integer": _fixed("integer", ">i"),
    "double": _fixed("double", ">d"), "json": _json, "bytes": bytes,
}


def decoder(name: str) -> Callable[[bytes], object]:
    """The decoder of serde ``name``; a BadArgument naming it and the serdes known."""
    if not isinstance(name, str) or name.lower() not in SERDES:
        raise BadArgument("serde", name, "one of " + ", ".join(map(repr, sorted(SERDES))))
    return SERDES[name.lower()]
