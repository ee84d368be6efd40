"""A Kafka Streams state directory opened read-only: its tasks, its stores' entries in
statekit's snapshot frames, its checkpointed offsets, and one copy compared with another
(a standby's with the active's).

``open_kafka_streams(state_dir, application_id)`` reads ``<state_dir>/<application_id>/``:
each task folder (``<subtopology>_<partition>``), its stores (``store_formats``), its
``.checkpoint`` and ``<store>.position`` files (``offset_checkpoint``). Nothing is written
into the directory: every RocksDB is read from a temporary copy.

A running application holds the directory's ``.lock``; Kafka Streams turns off RocksDB's
write-ahead log and flushes a store only when it checkpoints (at a clean shutdown, or after
10,000 records), so a running app's files hold what its last checkpoint flushed.
``if_running="copy"`` (the default) reads that and says so (``running_pid``, ``notes``);
``"refuse"`` refuses.

Example:
    >>> import statekit as sk
    >>> state = sk.open_kafka_streams("/tmp/app/instance-0/state", "leaderboard",
    ...                               spec=sk.datasets.GAME_SPEC)     # doctest: +SKIP
    >>> state.tasks()                                               # doctest: +SKIP
    >>> state.snapshot(sort=True)       # as the app's snapshot()    # doctest: +SKIP
"""

from __future__ import annotations

import fcntl
import os
import re
import struct
from collections.abc import Mapping
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING

from statekit.errors import BadArgument, KafkaStreamsStateError
from statekit.kafka_streams.app import STORE
from statekit.kafka_streams.offset_checkpoint import read_offset_checkpoint
from statekit.kafka_streams.serdes import decoder
from statekit.kafka_streams.spec import as_query_spec
from statekit.kafka_streams.store_formats import (
    StoreFiles,
    find_stores,
    split_session_key,
    split_window_key,
)
from statekit.validate import kafka_name

if TYPE_CHECKING:
    import pandas as pd

    from statekit.model.connection import Kafka
    from statekit.model.query_spec import QuerySpec

#: a task folder: ``<subtopology>_<partition>`` (``TaskId.toString``)
_TASK = re.compile(r"^(?P<subtopology>\d+)_(?P<partition>\d+)$")
#: ``struct flock`` on Linux: type, whence, start, length, pid
_FLOCK = "hhqqi4x"
IF_RUNNING = ("copy", "refuse")
#: the first byte of a time-ordered segmented store's keys (time first, key first)
TIME_ORDERED_PREFIXES = (b"\x00", b"\x01")


def lock_holder(path: Path) -> int | None:
    """The pid of the process holding a lock on ``path`` (fcntl ``F_GETLK``: asks, takes
    nothing), None when free or absent."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        answer = fcntl.fcntl(fd, fcntl.F_GETLK, struct.pack(_FLOCK, fcntl.F_WRLCK, 0, 0, 0, 0))
    finally:
        os.close(fd)
    kind, _, _, _, pid = struct.unpack(_FLOCK, answer)
    return None if kind == fcntl.F_UNLCK else pid


def application_ids(state_dir: Path) -> list[str]:
    """The application ids whose folders ``state_dir`` holds (a folder with task folders)."""
    return sorted(p.name for p in state_dir.iterdir() if p.is_dir()
                  and any(_TASK.match(t.name) for t in p.iterdir()))


class KafkaStreamsStateDir:
    """One application's state directory, opened (``open_kafka_streams`` makes one)."""

    def __init__(self, folder: Path, application_id: str, spec: QuerySpec | None,
                 key_serde: str, value_serde: str, window_size_ms: int | None,
                 kinds: dict[str, str], running_pid: int | None):
        self.folder = folder
        self.application_id = application_id
        self.spec = spec
        self._key = decoder(key_serde)
        #: text keys never start with the time-ordered stores' prefix bytes
        self._text_keys = spec is not None or key_serde in ("string", "json")
        self._value = decoder(value_serde)
        self._text = decoder("string")  # the reference app's group keys
        self.window_size_ms = window_size_ms
        self.running_pid = running_pid
        self.notes: list[str] = []
        if running_pid is not None:
            self.notes.append(
                f"application {application_id!r} was running (pid {running_pid}): read a "
                "copy of its files, which hold what its last checkpoint flushed (Kafka "
                "Streams keeps later writes in memory, with no write-ahead log)")
        self.task_ids = sorted((p.name for p in folder.iterdir() if _TASK.match(p.name)),
                               key=lambda t: tuple(map(int, t.split("_"))))
        self._stores = {t: find_stores(folder / t, kinds) for t in self.task_ids}

    # --- what is there ----------------------------------------------------------------
    def store_names(self) -> list[str]:
        """Every store name found in any task."""
        return sorted({s.name for stores in self._stores.values() for s in stores})

    def stores(self) -> pd.DataFrame:
        """One row per (task, store): ``task``, ``partition``, ``store``, ``kind``,
        ``format``, ``segments`` (their folders' names), ``changelog_offset`` (the task's
        ``.checkpoint``: its last changelog record's offset, ``<NA>`` when not known)."""
        import pandas as pd

        rows = []
        for task, stores in self._stores.items():
            checkpoint = self._checkpoint(task)
            for store in stores:
                topic = self.changelog_topic(store.name)
                rows.append({"task": task, "partition": _partition(task),
                             "store": store.name, "kind": store.kind, "format": store.format,
                             "segments": [d.name for d in store.databases
                                          if store.kind != "key-value"],
                             "changelog_offset": checkpoint.get((topic, _partition(task)))})
        frame = pd.DataFrame(rows, columns=["task", "partition", "store", "kind", "format",
                                            "segments", "changelog_offset"])
        return frame.astype({"changelog_offset": "Int64"})  # <NA>: not known yet

    def segments(self, store: str | None = None) -> pd.DataFrame:
        """One row per time segment of a segmented ``store`` (one RocksDB each): ``task``,
        ``partition``, ``segment`` (its folder), ``start`` (the folder's start, a time),
        ``rows`` (its entries), ``first_window`` and ``last_window`` (the window starts it
        holds; NaT in an empty segment)."""
        import pandas as pd

        from statekit.kafka_streams.store_formats import database_entries

        rows = []
        for files in self._files(store):
            if files.kind == "key-value":
                raise BadArgument("store", files.name, "a window or session store (segmented)")
            for database in files.databases:
                starts = [self._split(key, files.kind)["window_start"]
                          for key, _, _ in database_entries(database)]
                rows.append({"task": files.task, "partition": _partition(files.task),
                             "segment": database.name,
                             "start": int(database.name.rsplit(".", 1)[1]),
                             "rows": len(starts), "first_window": min(starts, default=None),
                             "last_window": max(starts, default=None)})
        frame = pd.DataFrame(rows, columns=["task", "partition", "segment", "start", "rows",
                                            "first_window", "last_window"])
        for column in ("start", "first_window", "last_window"):
            frame[column] = pd.to_datetime(frame[column], unit="ms")
        return frame

    def tasks(self) -> pd.DataFrame:
        """One row per task folder: ``task``, ``subtopology``, ``partition``, ``stores``,
        and whether it holds a ``.checkpoint``."""
        import pandas as pd

        return pd.DataFrame([{"task": t, "subtopology": int(t.split("_")[0]),
                              "partition": _partition(t),
                              "stores": [s.name for s in self._stores[t]],
                              "checkpoint": (self.folder / t / ".checkpoint").exists()}
                             for t in self.task_ids],
                            columns=["task", "subtopology", "partition", "stores",
                                     "checkpoint"])

    def checkpoints(self) -> pd.DataFrame:
        """Every offset of every task's ``.checkpoint`` (``file`` ``.checkpoint``: the
        changelog offsets the stores hold) and ``<store>.position`` (the input offsets the
        store reflects): ``task``, ``file``, ``topic``, ``partition``, ``offset`` (``<NA>``:
        Kafka Streams did not know it yet)."""
        import pandas as pd

        rows = []
        for task in self.task_ids:
            files = [self.folder / task / ".checkpoint",
                     *sorted((self.folder / task).glob("*.position"))]
            for path in files:
                for (topic, partition), offset in read_offset_checkpoint(path).items():
                    rows.append({"task": task, "file": path.name, "topic": topic,
                                 "partition": partition, "offset": offset})
        frame = pd.DataFrame(rows, columns=["task", "file", "topic", "partition", "offset"])
        return frame.astype({"offset": "Int64"})  # <NA>: not known yet

    def changelog_topic(self, store: str) -> str:
        """``<application.id>-<store>-changelog``, the topic Kafka Streams logs ``store`` to."""
        return f"{self.application_id}-{store}-changelog"

    # --- the entries ------------------------------------------------------------------
    def snapshot(self, store: str | None = None, sort: bool = False) -> pd.DataFrame:
        """Every entry of ``store`` (the only one when None) in every task: with a ``spec``,
        the reference app's frame (``spec.key_columns``, ``value_columns``, ``partition``:
        the app's own ``snapshot()``); without, ``key``, ``window_start``/``window_end``
        (windowed stores), ``value`` (decoded by the serdes), ``timestamp``, ``partition``."""
        import pandas as pd

        from statekit.kafka_streams.frames import rows_frame

        files = self._files(store)
        rows = [row for f in files for row in self._rows(f)]
        if self.spec is not None:
            return rows_frame(rows, self.spec, sort=sort)
        windowed = any(f.kind != "key-value" for f in files)
        columns = ["key", *(["window_start", "window_end"] if windowed else []), "value",
                   "timestamp", "partition"]
        frame = pd.DataFrame(rows, columns=columns)
        for column in ("window_start", "window_end", "timestamp"):
            if column in frame:
                frame[column] = pd.to_datetime(frame[column], unit="ms")
        if sort:
            frame = frame.sort_values(columns[:-3], kind="stable", ignore_index=True)
        return frame

    def read_changelog(self, kafka: Kafka, store: str | None = None) -> pd.DataFrame:
        """The store's changelog topic (``changelog_topic``) as the broker keeps it, decoded:
        ``partition``, ``offset``, ``timestamp``, then with a ``spec`` the reference app's
        columns (its handle's ``read_changelog``), without one ``key``, the window
        (windowed stores) and ``value`` by the serdes (None: a tombstone)."""
        from statekit.kafka_streams.changelog_format import (
            read_app_changelog,
            read_changelog_records,
        )
        from statekit.model.connection import connect

        files = self._files(store)[0]
        topic = self.changelog_topic(files.name)
        if self.spec is not None:
            return read_app_changelog(connect(kafka), topic, self.spec)

        def decode(raw_key: bytes, raw_value: bytes | None) -> dict:
            row = self._split(raw_key, files.kind)
            row["key"] = self._key(row["key"])
            row["value"] = None if raw_value is None else self._value(raw_value)
            return row

        return read_changelog_records(connect(kafka), topic, decode)

    def _files(self, store: str | None) -> list[StoreFiles]:
        names = self.store_names()
        if store is None and len(names) == 1:
            store = names[0]
        if store not in names:
            raise BadArgument("store", store, names or "no store: the directory holds none")
        return [s for stores in self._stores.values() for s in stores if s.name == store]

    def _split(self, raw_key: bytes, kind: str) -> dict:
        """``key`` (its bytes), and ``window_start``/``window_end`` for a windowed store."""
        if kind != "key-value" and self._text_keys and raw_key[:1] in TIME_ORDERED_PREFIXES \
                and len(raw_key) > (12 if kind == "window" else 16):
            raise KafkaStreamsStateError(
                f"a {kind} store key {raw_key[:24]!r}... starts with byte {raw_key[0]}: a "
                "time-ordered store's (emit-final aggregations, KIP-825; PrefixedWindowKey"
                "Schemas), a store format statekit does not read; accepted: key-first window "
                "and session stores (WindowKeySchema, SessionKeySchema)")
        if kind == "window":
            key, start = split_window_key(raw_key)
            size = self.window_size_ms
            return {"key": key, "window_start": start,
                    "window_end": start + size if size is not None else None}
        if kind == "session":
            key, start, end = split_session_key(raw_key)
            return {"key": key, "window_start": start, "window_end": end}
        return {"key": raw_key}

    def _rows(self, files: StoreFiles) -> list[dict]:
        from statekit.kafka_streams.changelog_format import decode_value

        rows = []
        partition = _partition(files.task)
        for raw_key, raw_value, timestamp in files.entries():
            row = self._split(raw_key, files.kind)
            if self.spec is not None:
                row.update(key=self._text(row["key"]), partition=partition,
                           **decode_value(raw_value, self.spec))
            else:
                row.update(key=self._key(row["key"]), value=self._value(raw_value),
                           timestamp=timestamp, partition=partition)
            rows.append(row)
        return rows

    def _checkpoint(self, task: str) -> dict:
        return read_offset_checkpoint(self.folder / task / ".checkpoint")

    def __repr__(self) -> str:
        return (f"KafkaStreamsStateDir({str(self.folder)!r}, {len(self.task_ids)} tasks, "
                f"stores {self.store_names()})")


def _partition(task: str) -> int:
    return int(task.split("_")[1])


def open_kafka_streams(state_dir: str | PathLike, application_id: str, *,
                       spec: QuerySpec | Mapping | None = None, key_serde: str = "string",
                       value_serde: str = "bytes", window_size: str | None = None,
                       store_kinds: Mapping[str, str] | None = None,
                       if_running: str = "copy") -> KafkaStreamsStateDir:
    """Open ``<state_dir>/<application_id>`` read-only.

    Args:
        state_dir: Kafka Streams' ``state.dir``.
        application_id: the ``application.id`` whose folder to read; another one's folder is
            refused, naming the ids the directory holds.
        spec: the QuerySpec statekit's reference app ran: its keys and aggregates decode
            the store into the app's own snapshot frame.
        key_serde, value_serde: without a spec, the serdes of the keys and values
            (``string``, ``long``, ``integer``, ``double``, ``json``, ``bytes``).
        window_size: a window store's window size (``"10 minutes"``; the store does not
            keep it), for ``window_end``; taken from ``spec`` when given.
        store_kinds: store name → ``window`` or ``session`` for a segmented store that is not
            timestamped (default: session).
        if_running: ``copy`` reads a running application's files as they are, and says so in
            ``notes``; ``refuse`` raises a KafkaStreamsStateError naming its pid.
    """
    from statekit.durations import to_millis

    folder = Path(state_dir)
    if not folder.is_dir():
        raise BadArgument("state_dir", str(state_dir), "a Kafka Streams state.dir folder")
    kafka_name(application_id, "application_id")  # also: no path of another folder
    if not (folder / application_id).is_dir():
        raise KafkaStreamsStateError(
            f"state directory {str(folder)!r} holds no application {application_id!r}; it "
            f"holds {application_ids(folder) or 'none'}")
    if if_running not in IF_RUNNING:
        raise BadArgument("if_running", if_running, IF_RUNNING)
    query_spec = as_query_spec(spec) if spec is not None else None
    kinds = dict(store_kinds or {})
    size = to_millis(window_size, "window_size") if window_size is not None else None
    if query_spec is not None and query_spec.window is not None:
        size = to_millis(query_spec.window.size)
        kinds = {STORE: query_spec.kind if query_spec.kind == "session" else "window",
                 **kinds}
    app_folder = folder / application_id
    pid = lock_holder(app_folder / ".lock")
    if pid is not None and if_running == "refuse":
        raise KafkaStreamsStateError(
            f"application {application_id!r} is running (pid {pid} holds "
            f"{str(app_folder / '.lock')!r}); stop it, or open with if_running='copy' to read "
            "what its last checkpoint flushed")
    return KafkaStreamsStateDir(app_folder, application_id, query_spec, key_serde,
                                value_serde, size, kinds, pid)


def compare_copies(first: KafkaStreamsStateDir, second: KafkaStreamsStateDir,
                   store: str | None = None) -> pd.DataFrame:
    """The entries of ``store`` that differ between two copies (an active's and a standby's),
    over the partitions both hold: one row per differing entry, its key columns, ``in``
    (``first``, ``second`` or ``both``) and each copy's values (suffixes ``_first``,
    ``_second``). Empty: the copies are equal."""
    import pandas as pd

    left, right = first.snapshot(store), second.snapshot(store)
    # the partitions each copy has the store's files for, rows or none (a killed instance's
    # store may hold nothing it flushed)
    held = []
    for copy in (first, second):
        stores = copy.stores()
        held.append(set(stores.loc[stores["store"] == _store_name(copy, store), "partition"]))
    common = held[0] & held[1]
    left = left[left["partition"].isin(common)]
    right = right[right["partition"].isin(common)]
    values = ([c for c in left.columns if c in first.spec.value_columns]
              if first.spec is not None else ["value", "timestamp"])
    keys = [c for c in left.columns if c not in values]
    # a copy with no rows has untyped columns: give them the other copy's types
    if left.empty and not right.empty:
        left = left.astype({c: right[c].dtype for c in keys})
    elif right.empty and not left.empty:
        right = right.astype({c: left[c].dtype for c in keys})
    merged = pd.merge(left, right, on=keys, how="outer", suffixes=("_first", "_second"),
                      indicator="in")
    merged["in"] = merged["in"].map({"left_only": "first", "right_only": "second",
                                     "both": "both"})
    differs = merged["in"] != "both"
    for column in values:
        a, b = merged[f"{column}_first"], merged[f"{column}_second"]
        differs |= ~((a == b) | (a.isna() & b.isna()))
    return merged[differs].reset_index(drop=True)


def _store_name(copy: KafkaStreamsStateDir, store: str | None) -> str:
    """``store``, or the copy's one store when None."""
    return copy._files(store)[0].name
