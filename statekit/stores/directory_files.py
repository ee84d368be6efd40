"""A local store's directory, file by file: what each file is for, and its counterpart in a
Kafka Streams state directory.

Kafka Streams keeps its stores under ``state.dir``: ``<application.id>/<task>/`` per task
(e.g. ``0_1``), holding the ``.checkpoint`` file (the changelog offsets restored so far) and
``rocksdb/<store>/``, one RocksDB database per store. A statekit store directory holds one
store partition: its identity (``statekit-store.json``, which Kafka Streams reads from the
directory names), its ``statekit-store.checkpoint`` and ``rocksdb/``. Both turn RocksDB's
write-ahead log off: the changelog is the durable copy.

Example:
    >>> import tempfile
    >>> from statekit.stores import RocksDBKeyValueStore
    >>> folder = tempfile.mkdtemp()
    >>> with RocksDBKeyValueStore(folder, "totals", key_columns=["player"]) as store:
    ...     store.put({"player": "p07"}, {"total": 5})
    ...     store.write_checkpoint({0: 1})
    >>> files = store_directory(folder)
    >>> files.groupby("role")["files"].sum().to_dict()["changelog offsets restored"]
    1
"""

from __future__ import annotations

import os
from pathlib import Path

from statekit._lazy import pd
from statekit.errors import BadArgument
from statekit.stores.metadata_file import METADATA_FILE
from statekit.stores.offset_checkpoint import OffsetCheckpointFile
from statekit.stores.rocksdb import DB_DIRECTORY

#: role → Kafka Streams' counterpart, in the order ``store_directory`` lists them.
ROLES = {
    "identity (name, kind, partition, columns)":
        "the directory names: <application.id>/<task>/rocksdb/<store>",
    "changelog offsets restored": "<task>/.checkpoint (OffsetCheckpoint)",
    "data (SST files)": "rocksdb/<store>/*.sst",
    "write-ahead log (off: the changelog is the durable copy)": "rocksdb/<store>/*.log",
    "RocksDB bookkeeping (MANIFEST, CURRENT, OPTIONS, LOCK, LOG...)": "the same files",
}


def _role(path: Path, root: Path) -> str:
    names = list(ROLES)
    if path.parent == root:
        if path.name == METADATA_FILE:
            return names[0]
        if path.name == OffsetCheckpointFile.NAME:
            return names[1]
    if path.suffix == ".sst":
        return names[2]
    if path.suffix == ".log" and path.stem.isdigit():
        return names[3]
    return names[4]


def store_directory(path: str | os.PathLike) -> pd.DataFrame:
    """One row per role of the files in a store directory: ``role``, ``files``, ``bytes``,
    ``kafka_streams`` (where Kafka Streams keeps the same)."""
    root = Path(path)
    if not (root / METADATA_FILE).is_file() or not (root / DB_DIRECTORY).is_dir():
        raise BadArgument("store directory", str(root),
                          f"a statekit store directory (with {METADATA_FILE} and "
                          f"{DB_DIRECTORY}/)")
    counts = {role: [0, 0] for role in ROLES}
    for folder, _dirs, names in os.walk(root):
        for name in names:
            file = Path(folder, name)
            role = counts[_role(file, root)]
            role[0] += 1
            role[1] += file.stat().st_size
    return pd.DataFrame([(role, n, size, ROLES[role]) for role, (n, size) in counts.items()],
                        columns=["role", "files", "bytes", "kafka_streams"])
