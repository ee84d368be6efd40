"""Is a checkpoint whole? Every check of its files, in one place, each problem naming its file.

Spark reports a damaged checkpoint as "An error occurred during loading state", an
``EOFException``, an internal planning error or a bare Py4J trace, without the file at
fault. statekit's readers (``StateReader``, ``statekit.inspect``) and ``describe()`` all ask
this module instead, so the same damage gets the same answer everywhere:

==================  =========================================================================
problem             found how
==================  =========================================================================
not_a_folder        ``commits``, ``offsets``, ``state`` or a partition folder is a file
commit_log_gap      a batch is missing from the commit log between two committed batches
offset_log_gap      a committed batch has no offset log file
missing_state       a stateful query committed batches but its ``state`` folder is gone
missing_partition   an operator's partition folder (or a join store's folder in it) is gone,
                    or is a symbolic link to nothing; the operator metadata says how many
                    partitions it has
missing_delta       a restore of the last committed batch needs a delta file that is gone,
                    and no snapshot covers it
no_checksum         a state file has no ``.crc`` file where the files beside it have one, so
                    a change to it cannot be seen (content checks below still run)
corrupt_file        a state file fails its ``.crc``; a delta or Spark snapshot whose LZ4
                    stream is cut short; a RocksDB snapshot ``N.zip`` that is not a whole
                    zip, or whose SST files are missing or of another size than it lists;
                    an SST file without RocksDB's closing magic number; one of Spark's own
                    files (``metadata``, ``offsets/N``, ``commits/N``, operator metadata)
                    that fails its ``.crc`` or is not in Spark's format (``log_file_problems``:
                    these name what to do about them)
==================  =========================================================================

``structure_problems`` lists only folders (cheap: every read runs it first);
``checkpoint_problems`` also reads every log and state file (``describe()`` runs it);
``restore_problems`` reads the files a restore of one version would read (a read that
Spark failed runs it to name the file: ``statekit.spark_state.read_errors.reading``). The
checks of single files by their content are ``statekit.spark_state.file_checks``'; a
``Problem`` and its kinds are ``statekit.spark_state.problems``'.

Example:
    >>> import tempfile, pathlib
    >>> ck = pathlib.Path(tempfile.mkdtemp())
    >>> for name in ("offsets", "commits"): (ck / name).mkdir()
    >>> for b in (0, 1, 3): _ = (ck / "commits" / str(b)).write_text("v1\\n{}")
    >>> for b in (0, 1, 2, 3): _ = (ck / "offsets" / str(b)).write_text("v1\\n{}")
    >>> [p.kind for p in structure_problems(ck)]
    ['commit_log_gap']
    >>> print(structure_problems(ck)[0].detail)
    batch 2 is missing from the commit log between committed batches 1 and 3 (the file was \
deleted or never written): Spark resumes after the last commit, so this batch's commit is lost
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from statekit.errors import CheckpointError, CorruptFile
from statekit.spark.object_store import as_path, entry_path, listdir
from statekit.spark_state.checkpoint import DEFAULT_STORE, Checkpoint
from statekit.spark_state.checksums import crc_file
from statekit.spark_state.file_checks import file_problems
from statekit.spark_state.problems import Problem, raise_problems
from statekit.spark_state.spark_files import _ranges, folder_state_files


# --- folders --------------------------------------------------------------------------------
def _folder_problem(path: Path, what: str) -> Problem | None:
    if path.exists() and not path.is_dir():
        return Problem("not_a_folder", str(path),
                       f"the {what} should be a folder but is a file: the checkpoint was changed "
                       f"by hand or by a tool that does not know Spark's layout")
    return None


def _batches(folder: Path) -> list[int]:
    try:
        return sorted(int(n) for n in listdir(folder) if n.isdigit())
    except (FileNotFoundError, NotADirectoryError):
        return []


def log_problems(checkpoint: str | os.PathLike | Checkpoint) -> list[Problem]:
    """Problems of the offset and commit logs (``not_a_folder``, ``commit_log_gap``,
    ``offset_log_gap``)."""
    ck = Checkpoint(checkpoint)
    found = [p for p in (_folder_problem(ck.offsets_dir, "offset log 'offsets'"),
                         _folder_problem(ck.commits_dir, "commit log 'commits'")) if p]
    commits, offsets = _batches(ck.commits_dir), set(_batches(ck.offsets_dir))
    for before, after in zip(commits, commits[1:], strict=False):
        for batch in range(before + 1, after):
            found.append(Problem(
                "commit_log_gap", str(ck.commits_dir / str(batch)),
                f"batch {batch} is missing from the commit log between committed batches "
                f"{before} and {after} (the file was deleted or never written): Spark resumes "
                f"after the last commit, so this batch's commit is lost"))
    if offsets:
        for batch in commits:
            if batch not in offsets and batch >= min(offsets):
                found.append(Problem(
                    "offset_log_gap", str(ck.offsets_dir / str(batch)),
                    f"committed batch {batch} has no offset log file: which input it read is "
                    f"lost"))
    return found


def _log_files(ck: Checkpoint) -> Iterator[tuple[Path, int | None, Callable[[], object]]]:
    """(file, operator, its reader) for each of Spark's own small files: ``metadata``, the
    offset and commit logs, each operator's metadata."""
    if ck.metadata_path.is_file():
        yield ck.metadata_path, None, ck.query_id
    for batch in _batches(ck.offsets_dir):
        yield ck.offsets_dir / str(batch), None, lambda b=batch: ck.offset_log(b)
    for batch in _batches(ck.commits_dir):
        yield ck.commits_dir / str(batch), None, lambda b=batch: ck.commit_metadata(b)
    for operator_id in ck.operator_ids():
        for path in ck.operator_metadata_files(operator_id):
            yield path, operator_id, lambda p=path: ck.operator_metadata(p)


def log_file_problems(checkpoint: str | os.PathLike | Checkpoint,
                      only: str | os.PathLike | None = None) -> list[Problem]:
    """``corrupt_file`` for each of Spark's own files (``metadata``, ``offsets/N``,
    ``commits/N``, operator metadata) that is not text, not in Spark's format or fails its
    ``.crc``, each with what to do (``Checkpoint.corrupt``); ``only``: that one file.
    A file a running query purges meanwhile is not a problem."""
    ck = Checkpoint(checkpoint)
    found = []
    for path, operator_id, read in _log_files(ck):
        if only is not None and path != as_path(only):
            continue
        try:
            read()
        except CorruptFile as exc:
            found.append(Problem("corrupt_file", exc.path, exc.problem, operator_id, exc.remedy))
        except CheckpointError:
            continue  # gone meanwhile, or a newer Spark's (named by every read)
    return found


def _operator_partitions(ck: Checkpoint, operator_id: int) -> int | None:
    """How many partitions an operator's state has: its operator metadata, else the offset
    log's ``spark.sql.shuffle.partitions``, else None."""
    for path in ck.operator_metadata_files(operator_id):
        with contextlib.suppress(CheckpointError, TypeError, ValueError):
            meta = ck.operator_metadata(path)[1]
            counts = [int(s["numPartitions"]) for s in meta.get("stateStoreInfo", [])
                      if "numPartitions" in s]
            if counts:
                return max(counts)
    with contextlib.suppress(CheckpointError):
        return ck.shuffle_partitions()
    return None


def is_stateful(checkpoint: str | os.PathLike | Checkpoint) -> bool | None:
    """True when the checkpoint shows its query keeps state (a ``state`` folder, or statekit's
    progress reports with state operators); None when nothing says (a stateless query looks the
    same as a stateful one whose ``state`` folder was deleted)."""
    ck = Checkpoint(checkpoint)
    if ck.state_dir.is_dir():
        return True
    for path in ck.progress_files()[-1:]:
        with contextlib.suppress(OSError, ValueError):
            return bool(json.loads(path.read_text(encoding="utf-8")).get("stateOperators"))
    return None


def structure_problems(checkpoint: str | os.PathLike | Checkpoint, stateful: bool | None = None,
                       operator_ids: list[int] | None = None, version: int | None = None
                       ) -> list[Problem]:
    """Problems seen from folder listings alone (no file is read): the logs (``log_problems``),
    a missing ``state`` folder of a stateful query (``stateful``: True, False, or None to
    judge from the checkpoint), missing partition folders, and delta files missing for a
    restore of ``version`` (None: the last committed batch's state).

    Example:
        >>> structure_problems("/tmp/ck")                               # doctest: +SKIP
        [Problem(kind='missing_partition', path='/tmp/ck/state/0/1', ...)]
    """
    ck = Checkpoint(checkpoint)
    found = log_problems(ck)
    committed = _batches(ck.commits_dir)
    state_problem = _folder_problem(ck.state_dir, "state folder 'state'")
    if state_problem:
        return [*found, state_problem]
    if not ck.state_dir.is_dir():
        if committed and (stateful if stateful is not None else is_stateful(ck)):
            found.append(Problem(
                "missing_state", str(ck.state_dir),
                f"the query committed batches {_ranges(committed)} but its state folder is "
                f"gone (deleted, or not copied with the checkpoint): the state cannot be read, "
                f"and a restart would begin again from empty state"))
        return found
    for operator_id in ck.operator_ids() if operator_ids is None else operator_ids:
        found += _operator_structure(ck, operator_id, committed, version)
    return found


def require_readable(checkpoint: str | os.PathLike | Checkpoint, operator_id: int,
                     what: str) -> None:
    """CheckpointError naming the folder when a read of ``operator_id``'s state cannot work
    whatever the batch: a log or state folder that is a file, the ``state`` folder or a
    partition folder gone (folder listings only)."""
    problems = [p for p in structure_problems(checkpoint, True, [operator_id], version=-1)
                if p.kind in ("not_a_folder", "missing_state", "missing_partition")]
    raise_problems(problems, what)


def _operator_structure(ck: Checkpoint, operator_id: int, committed: list[int],
                        version: int | None) -> list[Problem]:
    folder = ck.operator_dir(operator_id)
    if not folder.is_dir():
        return []
    found = []
    present = {int(p.name): p for p in folder.iterdir() if p.name.isdigit()}
    for number, path in sorted(present.items()):
        problem = _folder_problem(path, f"partition folder {number} of operator {operator_id}")
        if problem:
            found.append(Problem(problem.kind, problem.path, problem.detail, operator_id))
        elif path.is_symlink() and not path.exists():
            found.append(Problem(
                "missing_partition", str(path),
                f"partition {number} of operator {operator_id} is a symbolic link to "
                f"{os.readlink(path)!r}, which does not exist: its state files cannot be read",
                operator_id, "mount or restore the folder it points to, or replace the link "
                             "with a copy of the partition's folder"))
    partitions = _operator_partitions(ck, operator_id)
    folders = {n: p for n, p in present.items() if p.is_dir()}
    expected = range(partitions) if partitions else sorted(folders)
    for number in expected:
        if number not in present:
            found.append(Problem(
                "missing_partition", str(folder / str(number)),
                f"partition {number} of operator {operator_id} has no folder (the operator "
                f"has {partitions} partitions): its state files are gone, so no batch of this "
                f"operator can be read or restored", operator_id))
    stores = {s.name for p in folders.values() for s in p.iterdir()
              if s.is_dir() and s.name not in ("_metadata", "SSTs")}
    for number, path in sorted(folders.items()):
        for store in sorted(stores - {s.name for s in path.iterdir() if s.is_dir()}):
            found.append(Problem(
                "missing_partition", str(path / store),
                f"store {store!r} of partition {number} of operator {operator_id} has no folder "
                f"(the other partitions have one): its state files are gone", operator_id))
    target = committed[-1] + 1 if version is None and committed else version
    if target is not None and target > 0:
        for store in sorted(stores) or [DEFAULT_STORE]:
            found += _missing_deltas(ck, operator_id, store, target)
    return found


def _versions(folder: Path) -> tuple[dict[int, Path], dict[int, Path]]:
    """(deltas, snapshots) of one store folder: version → file (the newest of format v2's)."""
    deltas: dict[int, Path] = {}
    snapshots: dict[int, Path] = {}
    for entry, match, _ in sorted(folder_state_files(folder), key=lambda f: f[2].st_mtime):
        kind = deltas if match["ext"] in ("changelog", "delta") else snapshots
        kind[int(match["version"])] = entry_path(entry)
    return deltas, snapshots


def restore_files(folder: Path, version: int) -> tuple[list[Path], list[int]]:
    """(files, missing versions) a cold restore of ``version`` reads from one store folder: the
    newest snapshot at or below it, then every delta after it (see ``restore_plan``)."""
    deltas, snapshots = _versions(folder)
    base = max((v for v in snapshots if v <= version), default=0)
    files = [snapshots[base]] if base else []
    missing = [v for v in range(base + 1, version + 1) if v not in deltas]
    return files + [deltas[v] for v in range(base + 1, version + 1) if v in deltas], missing


def _missing_deltas(ck: Checkpoint, operator_id: int, store: str, version: int
                    ) -> list[Problem]:
    found = []
    for partition in sorted(int(p.name) for p in ck.operator_dir(operator_id).iterdir()
                            if p.name.isdigit() and p.is_dir()):
        folder = ck.store_dir(operator_id, partition, store)
        if not folder.is_dir():
            continue
        _, missing = restore_files(folder, version)
        if missing:
            found.append(Problem(
                "missing_delta", str(folder / f"{missing[0]}.changelog"),
                f"a restore of version {version} (the state after batch {version - 1}) of "
                f"partition {partition} of operator {operator_id} needs the delta files of "
                f"versions {_ranges(missing)}, which are gone, and no snapshot covers them",
                operator_id))
    return found


# --- contents ---------------------------------------------------------------------------------
def _codec(ck: Checkpoint) -> str:
    batches = _batches(ck.offsets_dir)
    with contextlib.suppress(CheckpointError):
        if batches:
            conf = ck.offset_metadata(batches[-1]).get("conf") or {}
            return str(conf.get("spark.sql.streaming.stateStore.compression.codec", "lz4"))
    return "lz4"


def _content_problems(paths: list[Path], codec: str, operator_id: int) -> list[Problem]:
    """``corrupt_file`` for damaged files among ``paths``, ``no_checksum`` for those without
    the ``.crc`` the files beside them have."""
    found, seen = [], set()
    with_crc = {p.parent for p in paths if crc_file(p).exists()}
    unchecked = []
    for path in paths:
        for bad, problem in file_problems(path, codec):
            if bad not in seen:
                seen.add(bad)
                found.append(Problem("corrupt_file", bad, problem, operator_id))
        if path.parent in with_crc and _no_checksum(path):
            unchecked.append(Problem(
                "no_checksum", str(path),
                f"it has no checksum file {crc_file(path).name} where the files beside it have "
                f"one (copied without it, or its checksum was deleted): a change to it cannot "
                f"be detected", operator_id))
    return found + unchecked


#: a file younger than this may be one Spark is still writing: Hadoop's local file system
#: renames a file into place, then its ``.crc`` beside it (seen: a RocksDB snapshot zip that
#: Spark's maintenance thread wrote just after the query stopped, briefly without its .crc)
IN_FLIGHT_S = 5.0


def _no_checksum(path: Path, wait: float = 1.0) -> bool:
    """True when ``path`` has no ``.crc`` beside it, once a file still being written had
    ``wait`` seconds to get one."""
    crc = crc_file(path)
    if crc.exists():
        return False
    try:
        young = time.time() - path.stat().st_mtime < IN_FLIGHT_S
    except OSError:
        return False  # gone meanwhile (Spark's cleanup): nothing to flag
    deadline = time.monotonic() + (wait if young else 0.0)
    while time.monotonic() < deadline:
        time.sleep(0.05)
        if crc.exists():
            return False
    return not crc.exists()


def state_file_paths(folder: Path) -> list[Path]:
    """Every snapshot and delta file of one store folder, by version."""
    deltas, snapshots = _versions(folder)
    return sorted([*deltas.values(), *snapshots.values()], key=lambda p: (p.name, str(p)))


def checkpoint_problems(checkpoint: str | os.PathLike | Checkpoint,
                        stateful: bool | None = None) -> list[Problem]:
    """Every problem ``structure_problems`` sees, then Spark's log files
    (``log_file_problems``) and every state file's content checked (``corrupt_file``,
    ``no_checksum``). Reads every file once.

    Example:
        >>> for problem in checkpoint_problems("/tmp/ck"):              # doctest: +SKIP
        ...     print(problem.kind, problem)
    """
    ck = Checkpoint(checkpoint)
    found = structure_problems(ck, stateful) + log_file_problems(ck)
    if not ck.state_dir.is_dir():
        return found
    codec = _codec(ck)
    for operator_id in ck.operator_ids():
        paths = []
        for partition in ck.operator_dir(operator_id).iterdir():
            if not (partition.name.isdigit() and partition.is_dir()):
                continue
            paths += state_file_paths(partition)
            paths += [p for s in partition.iterdir() if s.is_dir() and s.name not in
                      ("_metadata", "SSTs") for p in state_file_paths(s)]
        found += _content_problems(paths, codec, operator_id)
    return found


def restore_problems(checkpoint: str | os.PathLike | Checkpoint, operator_id: int,
                     store: str, first_version: int, last_version: int,
                     deltas_only: bool = False) -> list[Problem]:
    """Problems of the files a read of versions ``first_version..last_version`` of one store
    uses: for each partition, a restore of ``last_version`` (its snapshot and the deltas after
    it) or, with ``deltas_only`` (a change feed), the deltas of those versions."""
    ck = Checkpoint(checkpoint)
    found = structure_problems(ck, True, [operator_id], -1 if deltas_only else last_version)
    folder = ck.operator_dir(operator_id)
    if not folder.is_dir():
        return found
    paths = []
    for partition in sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit()
                            and p.is_dir()):
        store_folder = ck.store_dir(operator_id, partition, store)
        if deltas_only:
            deltas, _ = _versions(store_folder)
            paths += [deltas[v] for v in range(first_version, last_version + 1) if v in deltas]
        else:
            paths += restore_files(store_folder, last_version)[0]
    return found + _content_problems(paths, _codec(ck), operator_id)
