"""A Spark streaming checkpoint and the statekit files beside it: the one owner of the layout.

Spark writes (statekit only reads these)::

    <checkpoint>/metadata            the query id (JSON: ``{"id": ...}``)
    <checkpoint>/offsets/<batch>     the offset log: a version line, then JSON metadata
                                     (``batchTimestampMs``, ``batchWatermarkMs``, ``conf``),
                                     then one line per source (its offset as JSON, ``-`` for
                                     none)
    <checkpoint>/commits/<batch>     the commit log: a batch is committed once this exists
                                     (a version line, then ``{"nextBatchWatermarkMs": ...}``)
    <checkpoint>/state/<operator>/<partition>/...   the state store files (Spark state files)
    <checkpoint>/state/<operator>/<partition>/<store>/...   stores besides the default one
                                     (a stream-stream join's four)
    <checkpoint>/state/<operator>/_metadata/metadata   the operator metadata (version 1)
    <checkpoint>/state/<operator>/_metadata/v2/<batch> the operator metadata (version 2:
                                     transformWithState), one file per batch that changed it
    <checkpoint>/state/<operator>/<partition>/_metadata/schema   the state's key and value
                                     schemas (versions 1 and 2; ``statekit.spark_state.
                                     state_schema`` reads them)
    <checkpoint>/state/<operator>/_stateSchema/<store>/<batch>_<uuid>   the same, version 3
                                     (transformWithState: one per state variable), one file
                                     per batch that changed them

statekit writes its own files under ``<checkpoint>/_statekit/`` (progress reports, the
malformed side output, the changelog ledger, late counts, ``query.json``), never into
Spark's folders: ``statekit.spark_state.statekit_files`` lists them.

Every module that needs one of these paths asks a ``Checkpoint``; files statekit
writes go through ``statekit.atomic`` (temp file, fsync, rename).

Example:
    >>> import tempfile
    >>> ck = Checkpoint(tempfile.mkdtemp())
    >>> ck.committed_batches(), ck.last_batch
    ([], -1)
    >>> ck.progress_dir.relative_to(ck.path).as_posix()
    '_statekit/progress'
    >>> ck.ledger_path("board-counts-changelog").name
    'board-counts-changelog.json'
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from statekit.errors import BadArgument, BatchNotRetained, CheckpointError, CorruptFile
from statekit.spark.object_store import ObjectPath, listdir, location, missing_error
from statekit.spark_state.checksums import checksum_problem, crc_file
from statekit.spark_state.log_versions import log_version
from statekit.spark_state.statekit_files import StatekitFiles
from statekit.validate import batch_id

DEFAULT_STORE = "default"


def _listdir(folder: Path) -> list[str]:
    """The names in ``folder``; none when it does not exist or is not a folder."""
    try:
        return listdir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return []


class Checkpoint(StatekitFiles):
    """The checkpoint folder at ``path``: where each file lives, and the small logs read whole.

    Args:
        path: the query's ``checkpointLocation`` (made absolute).
    """

    def __init__(self, path: str | os.PathLike | Checkpoint):
        if isinstance(path, Checkpoint):
            path = path.path
        if not isinstance(path, ObjectPath) and not (
                isinstance(path, (str, os.PathLike)) and isinstance(os.fspath(path), str)):
            raise BadArgument("checkpoint", path, "a folder's path (a str or os.PathLike "
                                                  "naming a folder), an s3a://bucket/path "
                                                  "location or a Checkpoint")
        #: a local folder (``Path``) or an ``s3a://`` one (``ObjectPath``): the same API
        self.path: Path | ObjectPath = location(path)

    # --- Spark's folders ------------------------------------------------------------------
    @property
    def offsets_dir(self) -> Path:
        return self.path / "offsets"

    @property
    def commits_dir(self) -> Path:
        return self.path / "commits"

    @property
    def state_dir(self) -> Path:
        return self.path / "state"

    def operator_dir(self, operator_id: int = 0) -> Path:
        """``state/<operator>``: the state store files of one stateful operator."""
        return self.state_dir / str(operator_id)

    def store_dir(self, operator_id: int, partition: int, store: str = DEFAULT_STORE) -> Path:
        """Where one partition of one store keeps its files (the default store: the partition
        folder itself; any other store, such as a join's ``left-keyToNumValues``, a sub-folder).
        """
        folder = self.operator_dir(operator_id) / str(partition)
        return folder if store == DEFAULT_STORE else folder / store

    def operator_ids(self) -> list[int]:
        """The stateful operators with a folder under ``state/``, ascending."""
        return sorted(int(n) for n in _listdir(self.state_dir)
                      if n.isdigit() and (self.state_dir / n).is_dir())

    def operator_metadata_files(self, operator_id: int) -> list[Path]:
        """The operator metadata files Spark 4 writes for one operator (none: Spark 3 or older).

        ``_metadata/metadata`` (version 1) and ``_metadata/v2/<batch>`` (version 2, written by
        transformWithState), in that order, the v2 files by batch.
        """
        folder = self.operator_dir(operator_id) / "_metadata"
        found = [folder / "metadata"] if (folder / "metadata").is_file() else []
        v2 = sorted((n for n in _listdir(folder / "v2") if n.isdigit()), key=int)
        return found + [folder / "v2" / n for n in v2]

    def state_schema_files(self, operator_id: int) -> list[Path]:
        """The files holding one operator's state schemas: ``_stateSchema/<store>/
        <batch>_<uuid>`` (version 3: one per store, its newest batch's) when Spark wrote them,
        else the first partition's ``_metadata/schema`` (versions 1 and 2: each partition
        holds the same); none before Spark 3.1."""
        v3 = self.operator_dir(operator_id) / "_stateSchema"
        found = []
        for store in sorted(_listdir(v3)):
            files = [n for n in _listdir(v3 / store)
                     if n.split("_", 1)[0].isdigit() and not n.endswith(".crc")]
            if files:
                found.append(v3 / store / max(files, key=lambda n: int(n.split("_", 1)[0])))
        if found:
            return found
        partitions = sorted((n for n in _listdir(self.operator_dir(operator_id))
                             if n.isdigit()), key=int)
        for partition in partitions:
            path = self.operator_dir(operator_id) / partition / "_metadata" / "schema"
            if path.is_file():
                return [path]
        return []

    @property
    def metadata_path(self) -> Path:
        """``metadata``: the query id, written when the query first starts."""
        return self.path / "metadata"

    def is_streaming_checkpoint(self) -> bool:
        """True when the folder has what every Spark streaming checkpoint has (a ``metadata``
        file or an offset log)."""
        return self.metadata_path.is_file() or self.offsets_dir.is_dir()

    def require_checkpoint(self) -> None:
        """CheckpointError naming the folder unless it is a Spark streaming checkpoint."""
        if not self.path.is_dir():
            raise missing_error(self.path)
        if not self.is_streaming_checkpoint():
            raise CheckpointError(
                f"{str(self.path)!r} is not a Spark streaming checkpoint: it has neither a "
                f"'metadata' file nor an 'offsets' folder (pass the query's checkpointLocation)")

    def query_id(self) -> str:
        """The query's id, from the ``metadata`` file (the same across restarts)."""
        path = self.metadata_path
        try:
            _, text = self._checked_text(path, "metadata file", versioned=False)
        except FileNotFoundError:
            raise CheckpointError(f"checkpoint {str(self.path)!r} has no metadata file "
                                  f"{str(path)!r}") from None
        try:
            return str(json.loads(text.splitlines()[0])["id"])
        except (ValueError, IndexError, KeyError, TypeError) as exc:
            raise self.corrupt(path, "metadata file", f"it is not a JSON object with the "
                               f"query's 'id' ({exc!r})") from None

    def exists(self) -> bool:
        return self.path.is_dir()

    def has_state(self) -> bool:
        return self.state_dir.is_dir()

    def require_state(self) -> None:
        """CheckpointError naming the folder when no stateful operator committed state yet."""
        if not self.path.is_dir():
            raise missing_error(self.path)
        if self.state_dir.exists() and not self.state_dir.is_dir():
            raise CheckpointError(f"the state folder {str(self.state_dir)!r} is a file, not a "
                                  f"folder: restore it from a copy of the checkpoint")
        if not self.has_state():
            committed = self.committed_batches()
            if committed:
                raise CheckpointError(
                    f"the state folder {str(self.state_dir)!r} is gone, but the query committed "
                    f"batches {committed[0]}..{committed[-1]}: it was deleted, or not copied "
                    f"with the checkpoint; restore it from a copy")
            raise CheckpointError(
                f"no state in checkpoint {str(self.path)!r} (missing {str(self.state_dir)!r}): "
                f"the query has not committed a batch yet")

    # --- the commit log -------------------------------------------------------------------
    def committed_batches(self) -> list[int]:
        """Ids of the batches in the commit log, ascending (empty before the first)."""
        return self._log_batches(self.commits_dir, "commit log")

    def _log_batches(self, folder: Path, what: str) -> list[int]:
        """Batch ids named in a log folder, ascending; CheckpointError naming it when it is a
        file."""
        try:
            names = listdir(folder)
        except FileNotFoundError:
            return []
        except NotADirectoryError:
            raise CheckpointError(f"the {what} {str(folder)!r} is a file, not a folder: the "
                                  f"checkpoint was changed by hand or by a tool that does not "
                                  f"know Spark's layout; restore it from a copy") from None
        return sorted(int(name) for name in names if name.isdigit())

    @property
    def last_batch(self) -> int:
        """The last committed batch (-1 before the first)."""
        batches = self.committed_batches()
        return batches[-1] if batches else -1

    def batch_range(self) -> tuple[int, int] | None:
        """(first, last) committed batch still retained, or None before any commit."""
        batches = self.committed_batches()
        return (batches[0], batches[-1]) if batches else None

    def check_batch(self, batch: object, what: str = "batch") -> int:
        """``batch`` (the last committed when None) if the commit log retains it.

        Raises BadArgument for a value that is not a batch id, BatchNotRetained (naming
        the retained range) for one the checkpoint does not hold.
        """
        span = self.batch_range()
        if batch is None:
            if span is None:
                raise BatchNotRetained(-1, None, str(self.path))
            return span[1]
        number = batch_id(batch, what)
        if span is None or not span[0] <= number <= span[1]:
            raise BatchNotRetained(number, span, str(self.path))
        if not (self.commits_dir / str(number)).is_file():
            raise CheckpointError(
                f"batch {number} has no commit file {str(self.commits_dir / str(number))!r}: a "
                f"hole in the commit log between committed batches {span[0]} and {span[1]} (the "
                f"file was deleted); restore it from a copy of the checkpoint")
        return number

    # --- the offset log -------------------------------------------------------------------
    def offset_batches(self) -> list[int]:
        """Ids of the batches in the offset log, ascending (planned ones too: the last may not
        be committed yet)."""
        return self._log_batches(self.offsets_dir, "offset log")

    def _log_lines(self, folder: Path, batch: int, what: str) -> tuple[Path, int, list[str]]:
        """(path, version, the lines after the version line) of ``<folder>/<batch>``."""
        path = folder / str(batch_id(batch))
        try:
            version, text = self._checked_text(path, f"{what} file")
        except FileNotFoundError:
            raise CheckpointError(f"the {what} of batch {batch} is missing: no file "
                                  f"{str(path)!r}") from None
        return path, version, text.split("\n")[1:]

    def _checked_text(self, path: Path, what: str, versioned: bool = True
                      ) -> tuple[int, str]:
        """(version, text) of Spark's file ``path`` (version 0 when not ``versioned``: the
        ``metadata`` file). CorruptFile naming it when it is not text, its first line is not
        a version ``vN`` or its bytes fail its ``.crc``; a version newer than Spark 4 writes
        is named as such (``log_version``), not as damage."""
        data = path.read_bytes()
        try:
            text = data.decode("utf-8")
            version = log_version(path, text.split("\n", 1)[0],
                                  what.removesuffix(" file")) if versioned else 0
        except UnicodeDecodeError as exc:
            raise self.corrupt(path, what, f"it is not text ({exc})") from None
        except CorruptFile as exc:
            raise self.corrupt(path, what, exc.problem) from None
        if checksum_problem(path, data):
            raise self.corrupt(path, what)
        return version, text

    def corrupt(self, path: Path, what: str, problem: str | None = None) -> CorruptFile:
        """The error of Spark's file ``path`` (a ``what``: its metadata, a log file, operator
        metadata): ``problem`` and any mismatch with its ``.crc``, and what to do."""
        mismatch = checksum_problem(path)
        found = "; ".join(p for p in (problem, mismatch) if p) or "it cannot be read"
        crc = crc_file(path)
        steps = ["restore it from a copy of the checkpoint"]
        if mismatch and "do not match" in mismatch:
            steps.append(f"if its content is right and only its checksum file {str(crc)!r} is "
                         f"stale (the file was edited on purpose), delete that checksum file")
        batch = int(path.name) if path.name.isdigit() else None
        if path == self.metadata_path:
            steps.append("or delete it and its checksum file: Spark then writes a new one at "
                         "the next start, and the query gets a new id")
        elif path.parent == self.commits_dir and batch == self.last_batch:
            steps.append(f"or, as batch {batch} is the last committed, delete it and its "
                         f"checksum file: Spark then runs batch {batch} again at the next "
                         f"start (as after a crash before its commit)")
        elif path.parent == self.offsets_dir and batch is not None and batch > self.last_batch:
            steps.append(f"or, as batch {batch} was never committed, delete it and its "
                         f"checksum file: Spark then plans batch {batch} again at the next "
                         f"start")
        return CorruptFile(str(path), what, found, "; ".join(steps))

    def offset_log(self, batch: int) -> tuple[int, dict, list[str | None]]:
        """``offsets/<batch>`` read whole: (version, metadata, one offset per source).

        The metadata is the JSON line (``batchTimestampMs``, ``batchWatermarkMs``, ``conf``);
        each source's offset is its JSON text as Spark wrote it, None where Spark wrote ``-``
        (the source had no offset yet). A version newer than Spark 4 writes is named.
        """
        path, version, lines = self._log_lines(self.offsets_dir, batch, "offset log")
        meta = self._json_line(path, lines, "offset log file", None)
        sources = [None if line.strip() == "-" else line.strip() for line in lines[1:]
                   if line.strip()]
        return version, meta, sources

    def offset_metadata(self, batch: int) -> dict:
        """The JSON metadata line of ``offsets/<batch>`` (batchTimestampMs, conf, ...)."""
        return self.offset_log(batch)[1]

    def commit_metadata(self, batch: int) -> dict:
        """The JSON line of ``commits/<batch>`` (``nextBatchWatermarkMs``, ...)."""
        path, _, lines = self._log_lines(self.commits_dir, batch, "commit log")
        return self._json_line(path, lines, "commit log file", {})

    def operator_metadata(self, path: Path) -> tuple[int, dict]:
        """(version, the JSON object) of one of ``operator_metadata_files``."""
        try:
            version, text = self._checked_text(path, "operator metadata file")
        except FileNotFoundError:
            raise CheckpointError(f"the operator metadata file {str(path)!r} is missing") from None
        return version, self._json_line(path, text.split("\n")[1:], "operator metadata file",
                                        None)

    def _json_line(self, path: Path, lines: list[str], what: str, empty: dict | None) -> dict:
        """The JSON object on the line after a log file's version line (``empty`` when that
        line is blank and may be; None: it may not)."""
        try:
            meta = json.loads(lines[0]) if lines and lines[0].strip() else empty
        except ValueError as exc:
            raise self.corrupt(path, what, f"its JSON line is cut short or damaged ({exc})"
                               ) from None
        if not isinstance(meta, dict):
            raise self.corrupt(path, what, "it is not in Spark's format (a version line 'vN', "
                               "then a JSON object)")
        return meta

    def batch_timestamp_ms(self, batch: int) -> int:
        """The trigger time of ``batch`` (``batchTimestampMs`` in the offset log)."""
        meta = self.offset_metadata(batch)
        try:
            return int(meta["batchTimestampMs"])
        except (KeyError, TypeError, ValueError):
            raise CheckpointError(
                f"the offset log of batch {batch} in {str(self.path)!r} has no "
                f"batchTimestampMs") from None

    def shuffle_partitions(self) -> int:
        """The query's state partitions (``spark.sql.shuffle.partitions`` of its offset log)."""
        batches = self.committed_batches()
        # the newest: a running query purges the oldest logs while this reads (it keeps
        # the number for its whole life, so any batch tells it)
        newest = batches[-1] if batches else 0
        conf = self.offset_metadata(newest).get("conf") or {}
        try:
            return int(conf["spark.sql.shuffle.partitions"])
        except (KeyError, TypeError, ValueError):
            raise CheckpointError(
                f"the offset log of batch {newest} in {str(self.path)!r} does not record "
                f"spark.sql.shuffle.partitions") from None

    def __fspath__(self) -> str:
        return str(self.path)

    def __str__(self) -> str:
        return str(self.path)

    def __repr__(self) -> str:
        return f"Checkpoint({str(self.path)!r}, last_batch={self.last_batch})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Checkpoint) and other.path == self.path

    def __hash__(self) -> int:
        return hash(self.path)
