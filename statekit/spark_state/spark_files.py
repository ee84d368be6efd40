"""Spark state files: the snapshots and delta files of a state store, and what a restore reads.

With changelog checkpointing, every committed version ``N`` of a state store
partition (version ``N`` = the state after batch ``N - 1``) writes a small
**delta file** ``N.changelog``: the rows put and deleted by that batch. (Spark
calls these changelog files; statekit says *delta* so that "changelog" always
means the Kafka topic. Spark's HDFS-backed provider names its own ``N.delta``.)
Now and then the background maintenance task uploads a full **snapshot**
``N.zip`` (after ``spark.sql.streaming.stateStore.minDeltasForSnapshot`` deltas;
the SST files it needs go to ``SSTs/``). Spark never rewrites old deltas: a
snapshot is its way of "compacting" them. With checkpoint format v2 the names
carry a unique id: ``N_<uuid>.changelog`` and ``N_<uuid>.zip``.

Spark's HDFS-backed provider (``HDFSBackedStateStoreProvider``) keeps the same two kinds
under other names: a delta ``N.delta`` for every version, and now and then a snapshot
``N.snapshot``. ``state_files`` lists both providers' files alike.

A cold restore of version ``V`` (after a restart, or on a new executor) loads the
newest snapshot with version ``<= V`` (or starts from an empty store, version 0)
and replays the delta files after it, up to ``V``. An executor that already holds
``V - 1`` in memory skips all that and just applies the next batch.

Layout read: ``<checkpoint>/state/<operator>/<partition>/`` for an operator's default store,
``<checkpoint>/state/<operator>/<partition>/<store>/`` for a named one (a stream-stream
join's ``left-keyToNumValues`` and the rest); ``.crc`` files, ``SSTs/`` and ``_metadata/``
are not listed, SST files are counted in ``files.attrs["sst_files"]``. Whether the files are
whole (checksums, truncation) is ``statekit.spark_state.integrity``'s to say.

Example:
    >>> files = state_files("/tmp/ck")                                   # doctest: +SKIP
    >>> restore_plan(files)                                              # doctest: +SKIP
       partition  target_version  snapshot_version  ...  delta_files replay_versions
    0          0              12                10  ...            2           11-12
    >>> state_files_chart(with_restore_use(files))                       # doctest: +SKIP
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from statekit.errors import CheckpointError, CheckpointNotShared
from statekit.spark.object_store import as_path, entry_path, listdir, missing_error, scandir
from statekit.spark_state.checkpoint import DEFAULT_STORE, Checkpoint
from statekit.spark_state.file_checks import EMPTY_DELTA_MAX_BYTES, delta_holds_no_rows
from statekit.validate import require_columns, whole_number

#: RocksDB: ``N.changelog``, ``N.zip``, or with checkpoint format v2 ``N_<uuid>.changelog`` /
#: ``.zip``; HDFS-backed: ``N.delta``, ``N.snapshot``.
FILE_NAME = re.compile(
    r"^(?P<version>\d+)(?:_(?P<uid>[0-9A-Za-z-]+))?\.(?P<ext>changelog|zip|delta|snapshot)$")
#: file extension → statekit's word
KINDS = {"changelog": "delta", "zip": "snapshot", "delta": "delta", "snapshot": "snapshot"}
#: file extension → the provider that writes it
PROVIDERS = {"changelog": "rocksdb", "zip": "rocksdb", "delta": "hdfs", "snapshot": "hdfs"}
COLUMNS = ["partition", "version", "batch", "kind", "file", "bytes", "modified", "unique_id"]


def folder_state_files(folder: str | os.PathLike) -> list[tuple[os.DirEntry, re.Match,
                                                                os.stat_result]]:
    """(entry, name match, stat) of each state file in one store folder, as it is now; [] for
    a folder that is not there.

    A live query's maintenance removes old versions while the folder is read: a file listed
    and then gone before its ``stat`` is not one of the folder's files any more, and is left
    out (not an error, and not a reason to see the folder as empty).

    Example:
        >>> folder_state_files("/no/such/folder")
        []
    """
    try:
        with scandir(as_path(folder)) as listed:
            named = [(e, match) for e in listed if (match := FILE_NAME.match(e.name))]
    except (FileNotFoundError, NotADirectoryError):
        return []
    found = []
    for entry, match in named:
        try:
            if not entry.is_file():
                continue
            stat = entry.stat()
        except FileNotFoundError:  # removed since it was listed (Spark's cleanup)
            continue
        found.append((entry, match, stat))
    return found


def batches_changed_nothing(checkpoint: str | os.PathLike | Checkpoint, operator_id: int,
                            first: int, last: int, partitions: int) -> bool:
    """True only when batches ``first..last`` changed nothing in any store of operator
    ``operator_id``: every store folder of each of its ``partitions`` partitions has, for each
    of those batches, its delta file (``N.changelog`` or ``N.delta``, version = batch + 1)
    holding no row (``file_checks.delta_holds_no_rows``). False as soon as one holds a row,
    is missing, carries a unique id (checkpoint format v2), or is not on a local disk: then
    only reading the changes tells. Reads a few dozen bytes a file, never Spark.

    Example:
        >>> batches_changed_nothing("/no/such/checkpoint", 0, 3, 5, 4)
        False
    """
    root = Checkpoint(checkpoint).path
    if not isinstance(root, Path) or first > last:  # an object store: not looked at here
        return False
    try:
        for partition in range(partitions):
            folder = root / "state" / str(operator_id) / str(partition)
            # the default store's files, and a folder per named store (a join's four)
            listed = {f: set(os.listdir(f)) for f in (folder, *folder.iterdir()) if f.is_dir()}
            stores = {f: names for f, names in listed.items()
                      if any(FILE_NAME.match(name) for name in names)}
            if not stores:
                return False
            for store, names in stores.items():
                for version in range(first + 1, last + 2):
                    name = next((n for n in (f"{version}.changelog", f"{version}.delta")
                                 if n in names), None)
                    if name is None:
                        return False
                    with open(store / name, "rb") as delta:  # more than an empty one: a row
                        if not delta_holds_no_rows(delta.read(EMPTY_DELTA_MAX_BYTES + 1)):
                            return False
    except OSError:  # a folder or file gone or unreadable: reading the changes says why
        return False
    return True


def require_state_files_visible(checkpoint: str | os.PathLike | Checkpoint,
                                operator_id: int = 0) -> None:
    """Raise CheckpointNotShared when the checkpoint has committed batches but not one state
    file of ``operator_id`` is there as this process sees it.

    Executors write the state files; the driver writes the offset and commit logs and
    Spark's ``_metadata``. A checkpoint on each machine's own disk thus shows the driver
    commits and an empty state folder, and Spark's readers fail only when a task lands on
    an executor that lacks the files (or a restarted query finds none). Cheap on a healthy
    checkpoint: it stops at the first state file.

    Example:
        >>> require_state_files_visible("/tmp/ck")                      # doctest: +SKIP
    """
    checkpoint = Checkpoint(checkpoint)
    operator = checkpoint.operator_dir(operator_id)
    if not operator.is_dir():
        return
    folders = [operator / n for n in listdir(operator) if n.isdigit()]
    while folders:
        folder = folders.pop()
        with scandir(folder) as entries:
            for entry in entries:
                if FILE_NAME.match(entry.name):
                    return
                if entry.is_dir() and entry.name not in ("_metadata", "SSTs"):
                    folders.append(entry_path(entry))  # a named store (a join's four)
    batches = checkpoint.committed_batches()  # listed only when no state file was seen
    if not batches:
        return
    raise CheckpointNotShared(
        f"checkpoint {str(checkpoint)!r} has committed batches {_ranges(batches)}, but this "
        f"process sees no state file of operator {operator_id} under {str(operator)!r} (only "
        "what the driver writes): the executors wrote them to disks of their own. Put the "
        "checkpoint on a file system that the driver and every executor mount at the same "
        "path (NFS, a mounted bucket), and start the query again with a new checkpoint")


def _ranges(values: Iterable[int]) -> str:
    """``[1, 2, 3, 5, 7, 8]`` → ``"1-3, 5, 7-8"`` (``"none"`` when empty)."""
    ordered = sorted(set(int(v) for v in values))
    parts, start = [], None
    for i, value in enumerate(ordered):
        if start is None:
            start = value
        if i + 1 == len(ordered) or ordered[i + 1] != value + 1:
            parts.append(str(start) if start == value else f"{start}-{value}")
            start = None
    return ", ".join(parts) or "none"


def state_files(checkpoint: str | os.PathLike, operator_id: int = 0,
                store: str = DEFAULT_STORE) -> pd.DataFrame:
    """The Spark state files (snapshots and deltas) of one stateful operator's store, one row
    per file.

    ``store``: the store's name (``"default"``, or one of a stream-stream join's four, such as
    ``"left-keyWithIndexToValue"``).

    Columns: ``partition``, ``version``, ``batch`` (= version - 1), ``kind``
    (``"snapshot"`` for ``N.zip`` / ``N.snapshot``, ``"delta"`` for ``N.changelog`` /
    ``N.delta``), ``file`` (path), ``bytes``, ``modified``
    (naive UTC), ``unique_id`` (checkpoint format v2, else None); sorted by partition,
    version and kind. ``attrs``: ``checkpoint``, ``operator_id``, ``store``, ``providers``
    (the providers whose files were seen: ``"rocksdb"``, ``"hdfs"``), ``sst_files``
    (partition → number of shared SST files).

    Example:
        >>> state_files("/tmp/ck").groupby("kind").size()                # doctest: +SKIP
        kind
        delta        36
        snapshot     18
    """
    root = Checkpoint(checkpoint).path
    if not root.is_dir():
        raise missing_error(root)
    state = root / "state"
    operator = state / str(operator_id)
    if not operator.is_dir():
        present = sorted(p.name for p in state.iterdir() if p.is_dir() and p.name.isdigit()) \
            if state.is_dir() else []
        where = f"operators present: {', '.join(present)}" if present else \
            "no stateful operator has committed state yet"
        raise CheckpointError(f"checkpoint {str(root)!r} has no state folder {str(operator)!r}; "
                              f"{where}")
    rows, ssts, providers = [], {}, set()
    for partition_dir in sorted(operator.iterdir(), key=lambda p: p.name):
        if not (partition_dir.is_dir() and partition_dir.name.isdigit()):
            continue
        partition = int(partition_dir.name)
        part_dir = partition_dir if store == DEFAULT_STORE else partition_dir / store
        if not part_dir.is_dir():
            continue
        sst_dir = part_dir / "SSTs"
        ssts[partition] = (sum(1 for p in sst_dir.iterdir() if p.suffix == ".sst")
                           if sst_dir.is_dir() else 0)
        for entry, match, stat in folder_state_files(part_dir):
            version = int(match["version"])
            providers.add(PROVIDERS[match["ext"]])
            rows.append((partition, version, version - 1, KINDS[match["ext"]], entry.path,
                         stat.st_size, stat.st_mtime, match["uid"]))
    files = pd.DataFrame(rows, columns=COLUMNS)
    files = files.astype({"partition": "int64", "version": "int64", "batch": "int64",
                          "bytes": "int64", "file": object, "kind": object})
    files["modified"] = pd.to_datetime(files["modified"].astype("float64"), unit="s").astype(
        "datetime64[ns]")
    files = files.sort_values(["partition", "version", "kind", "modified"],
                              ignore_index=True)
    files.attrs = {"checkpoint": str(root), "operator_id": operator_id, "store": store,
                   "providers": sorted(providers), "sst_files": ssts}
    return files


def _require_files(files: pd.DataFrame) -> None:
    require_columns(files, ("partition", "version", "kind", "file"), "state files frame",
                    "as state_files() gives")


def _target(files: pd.DataFrame, version: int | None) -> int:
    if version is None:
        if files.empty:
            raise CheckpointError("no snapshot or delta file: nothing to restore")
        return int(files["version"].max())
    return whole_number(version, "state version", minimum=0,
                        accepted="a version >= 0 (version N is the state after batch N - 1)")


def _chosen(files: pd.DataFrame) -> pd.DataFrame:
    """One file per (partition, version, kind): the last written when format v2 left several.

    Spark picks among them by the lineage recorded in the commit log; the newest is a
    good stand-in for a query that did not retry tasks.
    """
    if "modified" in files.columns:
        files = files.sort_values(["partition", "version", "kind", "modified"])
    return files.drop_duplicates(["partition", "version", "kind"], keep="last")


def _plan_rows(files: pd.DataFrame, target: int) -> list[dict]:
    checkpoint = files.attrs.get("checkpoint", "the state files")
    rows = []
    for partition, group in _chosen(files).groupby("partition", sort=True):
        snaps = group[(group["kind"] == "snapshot") & (group["version"] <= target)]
        snap = snaps.loc[snaps["version"].idxmax()] if len(snaps) else None
        start = 0 if snap is None else int(snap["version"])
        logs = group[group["kind"] == "delta"].set_index("version")["file"]
        needed = range(start + 1, target + 1)
        missing = [v for v in needed if v not in logs.index]
        if missing:
            snapshots = group.loc[group["kind"] == "snapshot", "version"]
            why = ("never committed" if missing[0] > group["version"].max() else
                   "cleaned up, and no snapshot after it covers it")
            raise CheckpointError(
                f"cannot restore version {target} of partition {partition} from {checkpoint!r}: "
                f"no delta file of version {missing[0]} ({why}); versions present: "
                f"deltas {_ranges(logs.index)}, snapshots {_ranges(snapshots)}")
        rows.append({
            "partition": int(partition), "target_version": target,
            "snapshot_version": None if snap is None else start,
            "snapshot_file": None if snap is None else snap["file"],
            "delta_files": len(needed),
            "replay_versions": _ranges(needed),
            "replay_files": [logs[v] for v in needed],
        })
    return rows


def restore_plan(files: pd.DataFrame, version: int | None = None) -> pd.DataFrame:
    """Per partition, what a cold restore of state ``version`` reads (latest when None).

    Spark's restore plan: the snapshot and delta files a restarted query (or a new executor)
    reads. Not a rebuild of statekit's local stores from the changelog topic, which reads
    changelog offsets from where each store's checkpoint says
    (``statekit.restore.partition.rebuild_start``).

    Columns: ``partition``, ``target_version``, ``snapshot_version`` (nullable Int64:
    the newest snapshot ``<= version``; NA = none, start from an empty store),
    ``snapshot_file``, ``delta_files`` (how many delta files are replayed),
    ``replay_versions`` (``"first-last"`` text, ``"none"`` when the snapshot is the
    target), ``replay_files`` (their paths, a list).

    Raises:
        CheckpointError: a delta file needed for the replay is gone (cleaned up) and no
            later snapshot covers it; the message names the version and what is present.

    Example:
        >>> restore_plan(state_files("/tmp/ck"), version=5)              # doctest: +SKIP
    """
    _require_files(files)
    target = _target(files, version)
    plan = pd.DataFrame(_plan_rows(files, target), columns=[
        "partition", "target_version", "snapshot_version", "snapshot_file", "delta_files",
        "replay_versions", "replay_files"])
    plan["snapshot_version"] = plan["snapshot_version"].astype("Int64")
    plan = plan.astype({"partition": "int64", "target_version": "int64",
                        "delta_files": "int64"})
    plan.attrs = dict(files.attrs)
    return plan


def with_restore_use(files: pd.DataFrame, version: int | None = None) -> pd.DataFrame:
    """``files`` plus a bool column ``used_by_restore``: read by a restore of ``version``.

    ``attrs["restore_version"]`` holds the version restored (the latest when None).

    Example:
        >>> used = with_restore_use(state_files("/tmp/ck"))              # doctest: +SKIP
        >>> used.loc[used["used_by_restore"], ["partition", "version", "kind"]]  # doctest: +SKIP
    """
    plan = restore_plan(files, version)
    used = set(plan["snapshot_file"].dropna())
    for paths in plan["replay_files"]:
        used.update(paths)
    out = files.copy()
    out["used_by_restore"] = out["file"].isin(used)
    out.attrs = {**files.attrs, "restore_version": int(plan["target_version"].iloc[0])
                 if len(plan) else _target(files, version)}
    return out
