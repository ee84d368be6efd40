"""A Spark streaming checkpoint and the statekit files beside it: the one owner of the layout.

Spark writes (statekit only reads these)::

    <checkpoint>/metadata            the query id
    <checkpoint>/offsets/<batch>     the offset log: a version line, then JSON metadata
                                     (``batchTimestampMs``, ``batchWatermarkMs``, ``conf``),
                                     then one line per source
    <checkpoint>/commits/<batch>     the commit log: a batch is committed once this exists
    <checkpoint>/state/<operator>/<partition>/...   the state store files (Spark state files)

statekit writes, all under ``<checkpoint>/_statekit/`` and never into Spark's own folders::

    progress/<batch:010d>.json       one StreamingQueryProgress JSON per batch, every run
    malformed/data/*.parquet         malformed input rows kept aside (the side output)
    malformed/checkpoint/            that side output's own Spark checkpoint
    changelog/<topic>.json           the changelog writer's ledger (``statekit.changelog.ledger``)

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

from statekit.atomic import write_atomic
from statekit.errors import BatchNotRetained, CheckpointError
from statekit.validate import batch_id

STATEKIT_FOLDER = "_statekit"


class Checkpoint:
    """The checkpoint folder at ``path``: where each file lives, and the small logs read whole.

    Args:
        path: the query's ``checkpointLocation`` (made absolute).
    """

    def __init__(self, path: str | os.PathLike | Checkpoint):
        if isinstance(path, Checkpoint):
            path = path.path
        self.path = Path(os.path.abspath(os.fspath(path)))

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

    def exists(self) -> bool:
        return self.path.is_dir()

    def has_state(self) -> bool:
        return self.state_dir.is_dir()

    def require_state(self) -> None:
        """CheckpointError naming the folder when no stateful operator committed state yet."""
        if not self.path.is_dir():
            raise CheckpointError(f"checkpoint {str(self.path)!r} does not exist or is not a "
                                  f"directory")
        if not self.has_state():
            raise CheckpointError(
                f"no state in checkpoint {str(self.path)!r} (missing {str(self.state_dir)!r}): "
                f"has the query committed a batch?")

    # --- the commit log -------------------------------------------------------------------
    def committed_batches(self) -> list[int]:
        """Ids of the batches in the commit log, ascending (empty before the first)."""
        try:
            names = os.listdir(self.commits_dir)
        except FileNotFoundError:
            return []
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
        return number

    # --- the offset log -------------------------------------------------------------------
    def offset_metadata(self, batch: int) -> dict:
        """The JSON metadata line of ``offsets/<batch>`` (batchTimestampMs, conf, ...)."""
        path = self.offsets_dir / str(batch_id(batch))
        try:
            with open(path, encoding="utf-8") as src:
                version = src.readline().strip()
                meta = json.loads(src.readline())
        except FileNotFoundError:
            raise CheckpointError(f"the offset log of batch {batch} is missing: no file "
                                  f"{str(path)!r}") from None
        except ValueError as exc:
            raise CheckpointError(f"the offset log file {str(path)!r} is corrupt: {exc}") from None
        if not version.startswith("v") or not isinstance(meta, dict):
            raise CheckpointError(f"the offset log file {str(path)!r} is not in Spark's format "
                                  f"(a version line 'vN', then a JSON object)")
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
        first = batches[0] if batches else 0
        conf = self.offset_metadata(first).get("conf") or {}
        try:
            return int(conf["spark.sql.shuffle.partitions"])
        except (KeyError, TypeError, ValueError):
            raise CheckpointError(
                f"the offset log of batch {first} in {str(self.path)!r} does not record "
                f"spark.sql.shuffle.partitions") from None

    # --- statekit's folder ----------------------------------------------------------------
    @property
    def statekit_dir(self) -> Path:
        return self.path / STATEKIT_FOLDER

    @property
    def progress_dir(self) -> Path:
        return self.statekit_dir / "progress"

    @property
    def malformed_data_dir(self) -> Path:
        return self.statekit_dir / "malformed" / "data"

    @property
    def malformed_checkpoint_dir(self) -> Path:
        return self.statekit_dir / "malformed" / "checkpoint"

    def ledger_path(self, topic: str) -> Path:
        """Where the changelog writer keeps its ledger for ``topic``."""
        return self.statekit_dir / "changelog" / f"{topic}.json"

    # --- progress reports -----------------------------------------------------------------
    def progress_path(self, batch: int) -> Path:
        return self.progress_dir / f"{batch:010d}.json"

    def progress_files(self) -> list[Path]:
        """The progress reports kept, in batch order."""
        try:
            names = os.listdir(self.progress_dir)
        except FileNotFoundError:
            return []
        return [self.progress_dir / n for n in sorted(names)
                if n.endswith(".json") and n[:-5].isdigit()]

    def write_progress(self, batch: int, report_json: str) -> None:
        """Keep one batch's progress report (Spark's JSON text), atomically."""
        write_atomic(self.progress_path(batch), report_json)

    def progress_reports(self) -> list[dict]:
        """Every progress report kept, in batch order; a corrupt one is named."""
        reports = []
        for path in self.progress_files():
            try:
                report = json.loads(path.read_text(encoding="utf-8"))
            except FileNotFoundError:
                continue
            except ValueError as exc:
                raise CheckpointError(f"progress report {str(path)!r} is corrupt: {exc}; "
                                      f"delete it (statekit writes them whole, so this file "
                                      f"was changed by something else)") from None
            if not isinstance(report, dict):
                raise CheckpointError(f"progress report {str(path)!r} is not a JSON object")
            reports.append(report)
        return reports

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
