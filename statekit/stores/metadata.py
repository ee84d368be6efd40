"""Who a store is: name, kind, partition, store format version, columns, changelog topic.

A store directory keeps it in ``statekit-store.json`` (``metadata_file``), and
opening the directory checks it, so a store never reads another store's bytes;
in-memory stores keep it in memory.

Example:
    >>> meta = StoreMetadata("counts", "window", 3, ("player", "window_start"), ("count",))
    >>> meta.describe()
    "'counts' (window store, partition 3)"
    >>> StoreMetadata.from_json(meta.to_json()) == meta
    True
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields

from statekit.errors import BadArgument
from statekit.stores.key_layout import KINDS
from statekit.validate import kafka_name, optional_whole_number, whole_number

#: The store directory format this statekit writes and reads (and every older one).
STORE_FORMAT_VERSION = 1


@dataclass(frozen=True)
class StoreMetadata:
    """Who a store is; validated when built."""

    name: str
    kind: str
    partition: int
    key_columns: tuple[str, ...]
    value_columns: tuple[str, ...] | None = None
    changelog_topic: str | None = None
    window_size_ms: int | None = None
    format_version: int = STORE_FORMAT_VERSION

    def __post_init__(self):
        kafka_name(self.name, "store name")
        if self.kind not in KINDS:
            raise BadArgument("store kind", self.kind, KINDS)
        object.__setattr__(self, "partition", whole_number(self.partition, "partition", minimum=0))
        object.__setattr__(self, "window_size_ms", optional_whole_number(
            self.window_size_ms, "window_size_ms", minimum=1,
            accepted="a positive number of milliseconds, or None"))
        if self.window_size_ms is not None and self.kind != "window":
            raise BadArgument(f"window_size_ms of a {self.kind} store", self.window_size_ms,
                              "None (only window stores have a window size)")
        if self.changelog_topic is not None:
            kafka_name(self.changelog_topic, "changelog topic")
        object.__setattr__(self, "key_columns", tuple(self.key_columns))
        if self.value_columns is not None:
            object.__setattr__(self, "value_columns", tuple(self.value_columns))

    def describe(self) -> str:
        """``'counts' (window store, partition 3)``, for messages."""
        return f"{self.name!r} ({self.kind} store, partition {self.partition})"

    def to_json(self) -> dict:
        data = asdict(self)
        data["key_columns"] = list(self.key_columns)
        data["value_columns"] = None if self.value_columns is None else list(self.value_columns)
        return data

    @classmethod
    def from_json(cls, data: Mapping) -> StoreMetadata:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})
