"""What a store directory holds besides RocksDB: who the store is, and how far it restored.

``statekit-store.json`` names the store (name, kind, partition, format version,
key and value columns, changelog topic); opening a directory checks it, so a
store never reads another store's bytes. ``statekit-store.checkpoint`` keeps
the changelog offsets restored so far (as Kafka Streams' ``.checkpoint``).
Both are written atomically (``statekit.atomic``: a temporary file, fsync, rename).

Example:
    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> meta = StoreMetadata("counts", "window", 3, ("player", "window_start"), ("count",))
    >>> write_metadata(folder, meta)
    >>> read_metadata(folder) == meta
    True
    >>> write_checkpoint_file(folder, {3: 1200})
    >>> read_checkpoint_file(folder)
    {3: 1200}
    >>> import shutil; shutil.rmtree(folder)
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from statekit.atomic import write_atomic
from statekit.errors import BadArgument
from statekit.stores.errors import StoreCorrupt, StoreMismatch
from statekit.stores.key_layout import KINDS
from statekit.validate import is_whole_number, kafka_name, optional_whole_number, whole_number

#: The store directory format this statekit writes and reads (and every older one).
STORE_FORMAT_VERSION = 1
METADATA_FILE = "statekit-store.json"
CHECKPOINT_FILE = "statekit-store.checkpoint"
_DELETE = "delete the directory (the changelog restores it)"


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


def _write_json(path: Path, data: object) -> None:
    write_atomic(path, json.dumps(data, indent=1))


def _read_json(path: Path, remedy: str) -> dict | None:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise StoreCorrupt(path, f"not JSON: {exc}", remedy) from exc
    if not isinstance(data, dict):
        raise StoreCorrupt(path, f"a JSON {type(data).__name__}, not an object", remedy)
    return data


def write_metadata(directory: str | os.PathLike, meta: StoreMetadata) -> None:
    """Write ``statekit-store.json`` in ``directory``."""
    _write_json(Path(directory) / METADATA_FILE, meta.to_json())


def read_metadata(directory: str | os.PathLike) -> StoreMetadata | None:
    """The metadata of the store in ``directory``, or None if it has none.

    Raises StoreMismatch for a newer format version, StoreCorrupt for an unreadable file.
    """
    path = Path(directory) / METADATA_FILE
    data = _read_json(path, _DELETE)
    if data is None:
        return None
    version = data.get("format_version")
    if not is_whole_number(version):
        raise StoreCorrupt(path, f"format_version {version!r} is not an integer", _DELETE)
    if version > STORE_FORMAT_VERSION:
        raise StoreMismatch(
            directory, "format version", version, STORE_FORMAT_VERSION,
            f"upgrade statekit, or {_DELETE}",
            message=(f"store directory {str(directory)!r} was written in store format {version}, "
                     f"newer than format {STORE_FORMAT_VERSION} that this statekit reads"))
    try:
        return StoreMetadata.from_json(data)
    except (BadArgument, TypeError) as exc:
        raise StoreCorrupt(path, str(exc), _DELETE) from exc


def check_metadata(directory: str | os.PathLike, found: StoreMetadata,
                   expected: StoreMetadata, layout: bool = True) -> None:
    """StoreMismatch if ``found`` (in ``directory``) is not the ``expected`` store.

    Identity (name, kind, partition) must match; with ``layout`` so must the
    columns, window size and changelog topic where ``expected`` gives them (not None).
    """
    remedy = {
        "name": f"open it with name={found.name!r}, or {_DELETE}",
        "kind": f"open it as a {found.kind} store, or {_DELETE}",
        "partition": f"open it with partition={found.partition}, or {_DELETE}",
    }
    for what in ("name", "kind", "partition"):
        if getattr(found, what) != getattr(expected, what):
            raise StoreMismatch(directory, what, getattr(found, what), getattr(expected, what),
                                remedy[what])
    if not layout:
        return
    for what in ("key_columns", "value_columns", "window_size_ms", "changelog_topic"):
        want, have = _shown(getattr(expected, what)), _shown(getattr(found, what))
        if want is not None and want != have:
            raise StoreMismatch(
                directory, what.replace("_", " "), have, want,
                f"open it with {what}={have!r} (or {what}=None to take the directory's), "
                f"or {_DELETE}",
                message=(f"store directory {str(directory)!r} holds store {found.describe()} "
                         f"with {what} {have!r}, not {want!r}"))


def _shown(value: object) -> object:
    return list(value) if isinstance(value, tuple) else value


def check_offsets(offsets: object) -> dict[int, int]:
    accepted = "a dict of changelog partition (int >= 0) to next offset (int >= 0)"
    if not isinstance(offsets, Mapping):
        raise BadArgument("checkpoint offsets", offsets, accepted)
    for partition, offset in offsets.items():
        for value in (partition, offset):
            if not is_whole_number(value) or value < 0:
                raise BadArgument("checkpoint offsets", dict(offsets), accepted)
    return {int(p): int(o) for p, o in offsets.items()}


def write_checkpoint_file(directory: str | os.PathLike, offsets: Mapping[int, int]) -> None:
    """Write ``statekit-store.checkpoint`` (partition → next offset) atomically."""
    checked = check_offsets(offsets)
    _write_json(Path(directory) / CHECKPOINT_FILE,
                {"format_version": STORE_FORMAT_VERSION,
                 "offsets": {str(p): o for p, o in sorted(checked.items())}})


def read_checkpoint_file(directory: str | os.PathLike) -> dict[int, int]:
    """The checkpointed offsets (empty when there is no checkpoint yet)."""
    path = Path(directory) / CHECKPOINT_FILE
    remedy = "delete it to restore the store from the changelog's start"
    data = _read_json(path, remedy)
    if data is None:
        return {}
    try:
        return check_offsets({int(p): o for p, o in data["offsets"].items()})
    except (KeyError, AttributeError, ValueError, TypeError) as exc:
        raise StoreCorrupt(path, f"no valid offsets: {exc}", remedy) from exc
