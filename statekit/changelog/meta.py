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
import os
import socket
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import NamedTuple

from statekit.errors import ChangelogError
from statekit.query.spec import QuerySpec
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


@dataclass(frozen=True)
class WriterInfo:
    """Who ships a changelog: a writer's checkpoint, host, process and start time (UTC).

    Example:
        >>> WriterInfo("5f0c", "/ck/b", "lab-3", 4242, "2026-01-05T10:00:00Z").describe()
        "the writer of checkpoint '/ck/b' on host lab-3 (pid 4242, started 2026-01-05T10:00:00Z)"
    """

    id: str
    checkpoint: str
    host: str
    pid: int
    started: str

    @classmethod
    def here(cls, checkpoint: str | os.PathLike) -> WriterInfo:
        """This process as the writer of ``checkpoint``, starting now."""
        return cls(uuid.uuid4().hex, str(checkpoint), socket.gethostname(), os.getpid(),
                   datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))

    def describe(self) -> str:
        return (f"the writer of checkpoint {self.checkpoint!r} on host {self.host} "
                f"(pid {self.pid}, started {self.started})")


@dataclass(frozen=True)
class PartShape:
    """What the changelog of one part of any query's operator holds: its flattened key and
    value columns (as ``statekit.inspect`` names them) and where it comes from. A local
    store of it is a key-value store (``store_kind``), keyed by all the key columns.

    Example:
        >>> shape = PartShape("own", 2, "dedupeWithinWatermark", "deduplication", "store",
        ...                   "default", ("event_id",), ("value",))
        >>> PartShape.from_dict(shape.to_dict()) == shape, shape.store_kind
        (True, 'key-value')
    """

    query: str
    operator_id: int
    operator: str
    kind: str
    what: str
    name: str
    key_columns: tuple[str, ...]
    value_columns: tuple[str, ...]
    #: the key columns Spark hashes to place a row, in order (``statekit.inspect.placement``;
    #: empty: all of ``key_columns``): a join store's ``index`` is not hashed
    placement_columns: tuple[str, ...] = ()
    #: a list-valued part (a join side, a list state: ``statekit.inspect.lists``): the
    #: columns of each row of a key's list, with Spark's types; its one value column is
    #: then ``rows``. Empty for a part with one row per key.
    list_columns: tuple[tuple[str, str], ...] = ()
    #: a part's store keeps every key it holds, whatever the operator (no window store)
    store_kind = "key-value"
    window = None
    windowed = False

    def __post_init__(self):
        object.__setattr__(self, "key_columns", tuple(self.key_columns))
        object.__setattr__(self, "value_columns", tuple(self.value_columns))
        object.__setattr__(self, "placement_columns",
                           tuple(self.placement_columns) or self.key_columns)
        object.__setattr__(self, "list_columns",
                           tuple((str(n), str(t)) for n, t in self.list_columns))

    @property
    def lists(self) -> bool:
        """True when each key holds a list of rows (the value column ``rows``)."""
        return bool(self.list_columns)

    def to_dict(self) -> dict:
        data = asdict(self)
        for name in ("key_columns", "value_columns", "placement_columns"):
            data[name] = list(data[name])
        data["list_columns"] = [list(pair) for pair in self.list_columns]
        return data

    @classmethod
    def from_dict(cls, data: Mapping) -> PartShape:
        return cls(**{k: data[k] for k in ("query", "operator_id", "operator", "kind", "what",
                                           "name", "key_columns", "value_columns")},
                   placement_columns=data.get("placement_columns") or (),
                   list_columns=data.get("list_columns") or ())


@dataclass(frozen=True)
class StoreSchema:
    """What a changelog's store holds and how Spark placed its rows; ``writer``: who
    published it (None in records of statekit versions that did not say). A statekit
    query's changelog has its ``spec``; one part of an attached query's has ``part``
    (and ``spec`` None)."""

    spec: QuerySpec | None
    key_types: Mapping[str, str]
    partitions: int
    writer: WriterInfo | None = None
    part: PartShape | None = None

    @property
    def windowed(self) -> bool:
        """True for tumbling and hopping windows (the window is part of the placement)."""
        return self.spec.windowed if self.spec is not None else False

    @property
    def shape(self) -> QuerySpec | PartShape:
        """What a local store of it needs: the spec, or the part's shape."""
        return self.spec if self.spec is not None else self.part


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
