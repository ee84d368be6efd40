"""statekit's own files beside a Spark checkpoint, all under ``<checkpoint>/_statekit/``.

statekit never writes into Spark's folders; its own files are::

    progress/<batch:010d>.json       one StreamingQueryProgress JSON per batch, every run
    malformed/data/*.parquet         malformed input rows kept aside (the side output)
    malformed/checkpoint/            that side output's own Spark checkpoint
    changelog/<topic>.json           the changelog writer's ledger (``statekit.changelog.ledger``)
    late/<batch:010d>.json           late events counted in one batch (``late_events()``)
    query.json                       what ``start_query`` last started here: its QuerySpec and
                                     its input's column types (``statekit.query.restart_check``)

Every file here is written whole (``statekit.atomic``: temp file, fsync, rename).
``Checkpoint`` (``statekit.spark_state.checkpoint``) has these paths through
``StatekitFiles``.

Example:
    >>> import tempfile
    >>> from statekit.spark_state.checkpoint import Checkpoint
    >>> ck = Checkpoint(tempfile.mkdtemp())
    >>> ck.write_late_count(3, late_events=2, late_watermark_ms=0)
    >>> ck.late_count(3), ck.late_count(4)
    (2, None)
"""

from __future__ import annotations

import json
from pathlib import Path

from statekit.atomic import write_atomic
from statekit.errors import CheckpointError
from statekit.spark.object_store import ObjectPath, listdir

STATEKIT_FOLDER = "_statekit"


class StatekitFiles:
    """The paths and files of statekit's folder in the checkpoint at ``self.path``."""

    path: Path | ObjectPath

    def require_local(self, capability: str) -> None:
        """CheckpointError naming ``capability`` when the checkpoint is not a local (or
        mounted) folder: statekit writes its own files (``_statekit/``: progress reports,
        late counts, the query's spec) only there; an ``s3a://`` checkpoint is read-only to
        statekit (``open_checkpoint``, ``describe``, snapshots, change feeds, ``attach``)."""
        if isinstance(self.path, ObjectPath):
            raise CheckpointError(
                f"{capability} needs a local checkpoint folder (statekit writes its own files "
                f"into {str(self.statekit_dir)!r}, and writes nothing to object storage): "
                f"{str(self.path)!r} is an s3a:// location, which statekit only reads. Give "
                f"a local folder, or mount the bucket (s3fs, mountpoint-s3) and give its "
                f"mount point")

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

    @property
    def late_dir(self) -> Path:
        return self.statekit_dir / "late"

    def late_count(self, batch: int) -> int | None:
        """The late events counted in ``batch`` and kept (None: not counted yet, or the file
        cannot be read: it is counted again)."""
        try:
            data = json.loads((self.late_dir / f"{batch:010d}.json").read_text(encoding="utf-8"))
            return int(data["late_events"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def write_late_count(self, batch: int, late_events: int, late_watermark_ms: int) -> None:
        """Keep the late events counted in ``batch`` (and the watermark they were judged by)."""
        self.require_local("counting late events")
        write_atomic(self.late_dir / f"{batch:010d}.json", json.dumps(
            {"batch": batch, "late_events": late_events,
             "late_watermark_ms": late_watermark_ms}))

    @property
    def query_spec_path(self) -> Path:
        """``_statekit/query.json``: what ``start_query`` last started on this checkpoint."""
        return self.statekit_dir / "query.json"

    def ledger_path(self, topic: str) -> Path:
        """Where the changelog writer keeps its ledger for ``topic``."""
        return self.statekit_dir / "changelog" / f"{topic}.json"

    # --- progress reports -----------------------------------------------------------------
    def progress_path(self, batch: int) -> Path:
        return self.progress_dir / f"{batch:010d}.json"

    def progress_files(self) -> list[Path]:
        """The progress reports kept, in batch order."""
        try:
            names = listdir(self.progress_dir)
        except FileNotFoundError:
            return []
        return [self.progress_dir / n for n in sorted(names)
                if n.endswith(".json") and n[:-5].isdigit()]

    def write_progress(self, batch: int, report_json: str) -> None:
        """Keep one batch's progress report (Spark's JSON text), atomically."""
        self.require_local("keeping progress reports")
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
