"""The changelog's metadata topic: what the store holds, and how far each partition is shipped.

A changelog record says which batch wrote it, but a partition that no batch
touched for a while says nothing, so a reader cannot tell "nothing changed here
since batch 3" from "batch 9 is not shipped yet"; and the records alone do not
say how Spark placed the rows (the key columns' Spark types, the number of
state partitions). So the ``ChangelogWriter`` keeps a small compacted
one-partition topic ``<changelog topic>-meta`` beside the changelog:

* key ``schema``: JSON ``{"format": 1, "spec": QuerySpec.to_dict(), "key_types":
  {column: Spark type}, "partitions": n, "writer": {...}}``, written by each writer when
  it takes the topic over; ``writer`` (a ``WriterInfo``) says who ships now, so that a
  writer fenced by a newer one can name it. The changelog of one part of an attached
  query (``statekit.live``), which has no ``QuerySpec``, has ``"spec": null`` and
  ``"part": PartShape.to_dict()`` instead;
* key ``position/<p>`` for each changelog partition ``p``, rewritten in every
  shipping round's transaction (committed with the round's records): JSON
  ``{"batch": B, "next_offset": O, "prev": P}``: every change of batches up to ``B``
  (the query's last shipped batch) is in partition ``p`` below offset ``O``; ``P`` is
  the last batch that wrote to ``p``.

A reader that has consumed partition ``p`` up to offset ``O`` holds its state as
of batch ``B``: the idea of the position in Kafka Streams' interactive queries
(IQv2), in Spark batch ids. The topic is an index, not the truth: a reader that
lost it still has the batch headers of the records it read.

Example:
    >>> meta_topic("board-counts-changelog")
    'board-counts-changelog-meta'
    >>> key, value = encode_position(2, batch=9, next_offset=1200, prev=7)
    >>> key, value
    (b'position/2', b'{"batch":9,"next_offset":1200,"prev":7}')
    >>> decode_meta(key, value)
    Position(partition=2, batch=9, next_offset=1200, prev=7)
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import NamedTuple

from statekit.errors import ChangelogError
from statekit.model.query_spec import QuerySpec
from statekit.model.store_schema import PartShape, StoreSchema, WriterInfo
from statekit.validate import is_whole_number, kafka_name

SUFFIX = "-meta"
TOPIC_CONFIG = {"cleanup.policy": "compact"}
SCHEMA_KEY = b"schema"
POSITION_PREFIX = b"position/"
SCHEMA_FORMAT = 1


class Position(NamedTuple):
    """One changelog partition's shipped position: through ``batch``, below ``next_offset``."""

    partition: int
    batch: int
    next_offset: int
    prev: int


def meta_topic(changelog_topic: str) -> str:
    """The metadata topic of ``changelog_topic``."""
    return kafka_name(f"{kafka_name(changelog_topic, 'changelog topic')}{SUFFIX}",
                      "metadata topic name")


def encode_position(partition: int, *, batch: int, next_offset: int, prev: int
                    ) -> tuple[bytes, bytes]:
    """The (key, value) record of one partition's position."""
    value = json.dumps({"batch": int(batch), "next_offset": int(next_offset), "prev": int(prev)},
                       separators=(",", ":"))
    return POSITION_PREFIX + str(int(partition)).encode(), value.encode()


def encode_schema(schema: StoreSchema) -> tuple[bytes, bytes]:
    """The (key, value) record of the store's schema."""
    value = {"format": SCHEMA_FORMAT,
             "spec": None if schema.spec is None else schema.spec.to_dict(),
             "key_types": dict(schema.key_types), "partitions": int(schema.partitions)}
    if schema.part is not None:
        value["part"] = schema.part.to_dict()
    if schema.writer is not None:
        value["writer"] = asdict(schema.writer)
    return SCHEMA_KEY, json.dumps(value, separators=(",", ":")).encode()


def decode_meta(key: bytes | None, value: bytes | None, topic: str = "metadata topic"
                ) -> Position | StoreSchema:
    """A metadata record back; ChangelogError naming what is wrong with a foreign record."""
    try:
        data = json.loads(value) if value is not None else None
        if key == SCHEMA_KEY:
            if data.get("format") != SCHEMA_FORMAT:
                raise ChangelogError(f"{topic} holds a schema of format {data.get('format')!r};"
                                     f" this statekit reads format {SCHEMA_FORMAT}")
            writer = data.get("writer")
            part = data.get("part")
            spec = None if part is not None else QuerySpec.from_dict(data["spec"])
            return StoreSchema(spec, dict(data["key_types"]), int(data["partitions"]),
                               None if writer is None else WriterInfo(**writer),
                               None if part is None else PartShape.from_dict(part))
        if not (key or b"").startswith(POSITION_PREFIX):
            raise ValueError(key)
        partition = int(key[len(POSITION_PREFIX):].decode())
        position = Position(partition, data["batch"], data["next_offset"], data["prev"])
    except ChangelogError:
        raise
    except (ValueError, TypeError, KeyError, AttributeError, UnicodeDecodeError):
        raise ChangelogError(f"{topic} holds a record that is not statekit metadata: key "
                             f"{key!r}, value {value!r}") from None
    if not all(is_whole_number(v) for v in position):
        raise ChangelogError(f"{topic} holds a position with values that are not whole "
                             f"numbers: {value!r}")
    return position
