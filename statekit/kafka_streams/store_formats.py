"""How Kafka Streams lays out its RocksDB stores on disk, and their entries read back.

In a task directory ``<state.dir>/<application.id>/<subtopology>_<partition>/``:

* a key-value store is one RocksDB at ``rocksdb/<store>/`` (``RocksDBStore``);
* a window or session store is segmented (``RocksDBSegmentedBytesStore``): one RocksDB per
  time segment at ``<store>/<store>.<segment id × segment interval>/`` (``AbstractSegments``);
* a *timestamped* store (what the DSL makes for key-value and window stores) keeps the column
  family ``keyValueWithTimestamp``, each value behind its 8-byte record timestamp, beside the
  ``default`` one that holds entries written before the upgrade (``RocksDBTimestampedStore``);
* a window store's key is the key, the window start (8 bytes) and a sequence number (4 bytes;
  ``WindowKeySchema``); a session store's the key, the session's end then start (8 bytes
  each; ``SessionKeySchema``).

Each RocksDB is read from a copy in a temporary folder: opening one, even read-only, makes
RocksDB and rocksdict write files (``LOG``, ``rocksdict-config.json``) into its folder.

Example:
    >>> split_window_key(b"p1" + bytes([0, 0, 0, 0, 0, 0, 0xEA, 0x60, 0, 0, 0, 0]))
    (b'p1', 60000)
    >>> split_session_key(b"p1" + (90000).to_bytes(8, "big") + (60000).to_bytes(8, "big"))
    (b'p1', 60000, 90000)
"""

from __future__ import annotations

import re
import shutil
import struct
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from statekit.errors import KafkaStreamsStateError

TIMESTAMPED_FAMILY = "keyValueWithTimestamp"
#: the column families of each RocksDB format Kafka Streams 4.1 writes → timestamped or not
FAMILIES = {frozenset({"default"}): False,
            frozenset({"default", TIMESTAMPED_FAMILY}): True}
#: ``AbstractSegments.segmentName``; before 2.2 the separator was ``:`` then ``-``
_SEGMENT = re.compile(r"^(?P<store>.+)[.:-](?P<start>\d+)$")
KINDS = ("key-value", "window", "session")
#: the segment id (-1, 8 bytes) before every key of a versioned store's latest values
#: (``RocksDBVersionedStore``: segments that share one RocksDB); no UTF-8 key starts so
LATEST_SEGMENT = b"\xff" * 8
#: how often a copy of a running application's store is tried (RocksDB may delete a file
#: between the listing and the copy)
COPY_ATTEMPTS = 3


def split_window_key(raw: bytes) -> tuple[bytes, int]:
    """(key bytes, window start ms) of a window store's key."""
    if len(raw) < 12:
        raise KafkaStreamsStateError(f"window store key {raw!r} is shorter than the 12 bytes "
                                     "of its start and sequence number: not a window store")
    (start,) = struct.unpack(">q", raw[-12:-4])
    return raw[:-12], start


def split_session_key(raw: bytes) -> tuple[bytes, int, int]:
    """(key bytes, session start ms, session end ms: its last event) of a session key."""
    if len(raw) < 16:
        raise KafkaStreamsStateError(f"session store key {raw!r} is shorter than the 16 bytes "
                                     "of its end and start: not a session store")
    end, start = struct.unpack(">qq", raw[-16:])
    return raw[:-16], start, end


@dataclass(frozen=True)
class StoreFiles:
    """One store of one task on disk: its RocksDB folders (one, or one per segment)."""

    task: str
    name: str
    kind: str  # one of KINDS
    timestamped: bool
    databases: tuple[Path, ...]

    @property
    def format(self) -> str:
        """``timestamped window store, 2 segments`` and the like."""
        text = ("timestamped " if self.timestamped else "") + f"{self.kind} store"
        return text + (f", {len(self.databases)} segments" if self.kind != "key-value" else "")

    def entries(self) -> Iterator[tuple[bytes, bytes, int | None]]:
        """(key, value, record timestamp or None) of every entry, segment after segment; a
        versioned store (its keys behind a segment id) is refused by name."""
        for database in self.databases:
            for key, value, timestamp in database_entries(database):
                if self.kind == "key-value" and len(key) > 8 and key[:8] == LATEST_SEGMENT:
                    raise KafkaStreamsStateError(
                        f"store {str(database)!r} is a versioned key-value store "
                        "(RocksDBVersionedStore: keys behind an 8-byte segment id): a store "
                        "format statekit does not read; accepted: key-value, timestamped "
                        "key-value, window and session stores")
                yield key, value, timestamp


def column_families(database: Path) -> frozenset[str]:
    """The column families of the RocksDB at ``database`` (read from a copy of its MANIFEST)."""
    from rocksdict import Options, Rdict

    with tempfile.TemporaryDirectory(prefix="statekit-ks-") as scratch:
        copy = copy_database(database, Path(scratch) / "db")
        return frozenset(Rdict.list_cf(str(copy), Options(raw_mode=True)))


def copy_database(database: Path, copy: Path) -> Path:
    """``database`` copied to ``copy`` (a running application may delete a file while it is
    copied: tried again, then a KafkaStreamsStateError naming it)."""
    for attempt in range(COPY_ATTEMPTS):
        try:
            shutil.copytree(database, copy)
            return copy
        except (shutil.Error, FileNotFoundError) as exc:
            shutil.rmtree(copy, ignore_errors=True)
            if attempt == COPY_ATTEMPTS - 1:
                raise KafkaStreamsStateError(
                    f"RocksDB store {str(database)!r} changed while statekit copied it "
                    f"({exc}); its application is writing: stop it, or try again") from None
    return copy


def database_entries(database: Path) -> Iterator[tuple[bytes, bytes, int | None]]:
    """(key, value, timestamp) of the RocksDB at ``database``, read from a copy: a
    timestamped store's ``keyValueWithTimestamp`` entries (the timestamp split off), then its
    ``default`` entries not upgraded yet (timestamp None)."""
    from rocksdict import AccessType, Options, Rdict

    with tempfile.TemporaryDirectory(prefix="statekit-ks-") as scratch:
        copy = copy_database(database, Path(scratch) / "db")
        families = frozenset(Rdict.list_cf(str(copy), Options(raw_mode=True)))
        timestamped = timestamped_format(database, families)
        extra = {TIMESTAMPED_FAMILY: Options(raw_mode=True)} if timestamped else None
        db = Rdict(str(copy), options=Options(raw_mode=True), column_families=extra,
                   access_type=AccessType.read_only())
        try:
            seen = set()
            if timestamped:
                for key, value in db.get_column_family(TIMESTAMPED_FAMILY).items():
                    seen.add(key)
                    yield key, value[8:], struct.unpack(">q", value[:8])[0]
            for key, value in db.items():
                if key not in seen:
                    yield key, value, None
        finally:
            db.close()


def timestamped_format(database: Path, families: frozenset[str]) -> bool:
    """Whether a RocksDB with ``families`` is a timestamped store; a set of column families
    Kafka Streams 4.1 does not write (a newer format) is a KafkaStreamsStateError naming it."""
    if families not in FAMILIES:
        known = " or ".join(str(sorted(f)) for f in FAMILIES)
        raise KafkaStreamsStateError(
            f"RocksDB store {str(database)!r} has column families {sorted(families)}: a store "
            f"format statekit does not know; accepted: {known} (Kafka Streams 4.1's "
            "RocksDBStore and RocksDBTimestampedStore)")
    return FAMILIES[families]


def find_stores(task_dir: Path, kinds: dict[str, str]) -> list[StoreFiles]:
    """The stores in ``task_dir``; ``kinds`` names the kind of a segmented store that is not
    timestamped (a session store unless it says ``window``)."""
    stores = []
    plain = task_dir / "rocksdb"
    for folder in sorted(plain.iterdir()) if plain.is_dir() else []:
        timestamped = timestamped_format(folder, column_families(folder))
        stores.append(StoreFiles(task_dir.name, folder.name, "key-value", timestamped,
                                 (folder,)))
    for folder in sorted(task_dir.iterdir()):
        if not folder.is_dir() or folder.name == "rocksdb" or folder.name.startswith("."):
            continue
        segments = sorted((s for s in folder.iterdir() if s.is_dir()),
                          key=lambda s: _segment_start(s, folder.name))
        if not segments:
            continue
        timestamped = timestamped_format(segments[0], column_families(segments[0]))
        kind = kinds.get(folder.name, "window" if timestamped else "session")
        if kind not in KINDS[1:]:
            raise KafkaStreamsStateError(f"store kind {kind!r} of segmented store "
                                         f"{folder.name!r}; accepted: 'window' or 'session'")
        stores.append(StoreFiles(task_dir.name, folder.name, kind, timestamped,
                                 tuple(segments)))
    return stores


def _segment_start(segment: Path, store: str) -> int:
    match = _SEGMENT.match(segment.name)
    if match is None or match["store"] != store:
        raise KafkaStreamsStateError(
            f"folder {str(segment)!r} is not a segment of store {store!r}; accepted: "
            f"'{store}.<segment start ms>' (Kafka Streams' segmented stores)")
    return int(match["start"])
