"""A scratch copy of a checkpoint on which a changed query can run one empty batch, leaving the
checkpoint itself untouched.

Spark checks a restarted query's stateful operators and state schemas against the checkpoint
when it plans the run's first batch; the surest way to learn what it will say is to let it plan
one. ``rehearsal_copy`` makes the place to do that: Spark's logs up to the last committed
batch N and one more offset entry, N + 1, ending where N ended (so Spark runs batch N + 1 as a
restart's first batch, with no row to read; a re-run of N would not do: Spark skips the
operator check when the first batch of a run is batch 0), the sources' logs, the operators'
metadata and schema files copied; the state files themselves (``N.zip``, ``N.changelog``,
``N.delta``, SST files: the bulk of a checkpoint) linked, not copied. Spark writes new files by
renaming a finished temporary file into place, which replaces a link and never writes through
it; files it rewrites in place (metadata, schemas) are copies. A fresh query id is written, so
the rehearsal runs beside the person's query if it is still running.

Example:
    >>> copy = rehearsal_copy(Checkpoint("/tmp/ck"), "/tmp/scratch")   # doctest: +SKIP
    >>> copy.batch              # the empty batch Spark will run   # doctest: +SKIP
    8
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

from statekit.errors import CheckpointError
from statekit.spark_state.checkpoint import Checkpoint

#: folders under ``state/<operator>/`` Spark rewrites in place: copied, never linked
_REWRITTEN = {"_metadata", "_stateSchema"}


@dataclass(frozen=True)
class RehearsalCopy:
    """The scratch checkpoint (``path``) and the empty batch Spark will run on it."""

    path: Path
    batch: int


def rehearsal_copy(checkpoint: Checkpoint, scratch: str | os.PathLike) -> RehearsalCopy:
    """Copy ``checkpoint`` into the empty folder ``scratch`` so that a query started on it
    runs one batch after the last committed one, reading nothing; CheckpointError when it has
    no committed batch.
    """
    checkpoint.require_local("a restart rehearsal (check_restart of a DataFrame)")
    batches = checkpoint.committed_batches()
    if not batches:
        raise CheckpointError(f"the checkpoint {str(checkpoint)!r} has no committed batch: "
                              "there is nothing a restart could be refused for")
    last = batches[-1]
    dest = Checkpoint(scratch)
    dest.path.mkdir(parents=True, exist_ok=True)
    dest.metadata_path.write_text(json.dumps({"id": str(uuid.uuid4())}) + "\n")
    _copy_log(checkpoint.offsets_dir, dest.offsets_dir, last)
    _copy_log(checkpoint.commits_dir, dest.commits_dir, last)
    for name in (str(last), f".{last}.crc"):   # batch last + 1: from where last ended, to there
        if (dest.offsets_dir / name).is_file():
            shutil.copy2(dest.offsets_dir / name,
                         dest.offsets_dir / name.replace(str(last), str(last + 1)))
    sources = checkpoint.path / "sources"
    if sources.is_dir():
        shutil.copytree(sources, dest.path / "sources")
    for operator in checkpoint.operator_ids():
        _link_state(checkpoint.operator_dir(operator), dest.operator_dir(operator))
    return RehearsalCopy(dest.path, last + 1)


def _copy_log(source: Path, dest: Path, up_to: int) -> None:
    """A Spark log's batch files ``0..up_to`` (and their checksums), nothing later."""
    dest.mkdir(parents=True, exist_ok=True)
    if not source.is_dir():
        return
    for entry in os.scandir(source):
        batch = entry.name.lstrip(".").split(".")[0]
        if batch.isdigit() and int(batch) <= up_to and entry.is_file():
            shutil.copy2(entry.path, dest / entry.name)


def _link_state(source: Path, dest: Path) -> None:
    """One operator's state folder: files linked, ``_REWRITTEN`` folders copied whole."""
    dest.mkdir(parents=True, exist_ok=True)
    for entry in os.scandir(source):
        target = dest / entry.name
        if entry.is_dir(follow_symlinks=False):
            if entry.name in _REWRITTEN:
                shutil.copytree(entry.path, target)
            else:
                _link_state(Path(entry.path), target)
        elif entry.is_file():
            os.symlink(os.path.abspath(entry.path), target)
