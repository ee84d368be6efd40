"""What a changelog's store holds, and who writes it: the description every layer shares.

``StoreSchema`` is written to a changelog's metadata topic (``statekit.changelog.meta``)
and read back by every reader and local store: a statekit query's ``QuerySpec``, or for one
part of an attached query a ``PartShape``; the key columns' Spark types; the number of
state partitions; and the ``WriterInfo`` of the process that ships it.

Example:
    >>> shape = PartShape("own", 2, "dedupeWithinWatermark", "deduplication", "store",
    ...                   "default", ("event_id",), ("value",))
    >>> StoreSchema(None, {"event_id": "string"}, 4, part=shape).shape.store_kind
    'key-value'
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime

from statekit.model.query_spec import QuerySpec


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
    #: the key columns Spark hashes to place a row, in order (``statekit.inspect.hashed_columns``;
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
