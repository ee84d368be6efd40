"""Files that are either whole or absent: atomic writes and versioned JSON files.

Modelled on Kafka Streams' ``OffsetCheckpoint``: one class owns one file; the
file names its format and version; a write goes to a temporary file in the same
folder, is flushed and fsynced, then renamed over the old one (and the folder
fsynced), so a crash at any moment leaves the old file or the new one, never
half of either; a read validates what it finds and names the file when it
cannot be trusted.

Example:
    >>> import tempfile, os
    >>> folder = tempfile.mkdtemp()
    >>> ledger = VersionedJsonFile(os.path.join(folder, "ledger.json"), "example", 1)
    >>> ledger.read() is None
    True
    >>> ledger.write({"last_batch": 3})
    >>> ledger.read()
    {'last_batch': 3}
    >>> with open(ledger.path) as f: print(f.read())
    {"format": "example", "version": 1, "last_batch": 3}
    >>> import shutil; shutil.rmtree(folder)
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

from statekit.errors import CheckpointError, DiskFull, StatekitError

_FULL = (errno.ENOSPC, errno.EDQUOT)


def write_atomic(path: str | os.PathLike, data: bytes | str) -> None:
    """Write ``data`` to ``path`` so that a crash leaves the old file or the new, whole.

    The folder is created when missing. A full file system raises ``DiskFull`` naming the
    file, the bytes it needs and the space left; the old file stays as it was.
    """
    target = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        _replace(target, payload)
    except OSError as exc:
        if exc.errno not in _FULL or isinstance(exc, DiskFull):
            raise
        raise DiskFull.for_file(str(target), len(payload), _free_bytes(target.parent)) from None
    _fsync_folder(target.parent)


def _replace(target: Path, payload: bytes) -> None:
    # a temporary name of its own for each writer: two threads writing the same file (a
    # listener and a reader catching up) each rename a whole file, the last one wins
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(payload)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes it 0600; the file is no secret
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _free_bytes(folder: Path) -> int | None:
    """Bytes free for this user on ``folder``'s file system (None when it cannot be told)."""
    for candidate in (folder, *folder.parents):
        with contextlib.suppress(OSError):
            return shutil.disk_usage(candidate).free
    return None


def _fsync_folder(folder: Path) -> None:
    """Make the rename durable (POSIX); a no-op where folders cannot be opened."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class VersionedJsonFile:
    """One JSON object file of one ``kind``, at format ``version`` (or older), written atomically.

    The file holds ``{"format": kind, "version": N, ...payload}``. ``read()``
    returns the payload (None when the file does not exist) and raises ``error``
    naming the path for a file that is not JSON, of another kind, or of a newer
    version than this statekit writes.

    Args:
        path: the file.
        kind: what the file is (``"statekit.changelog.ledger"``).
        version: the format version written (and the newest one read).
        error: the exception class raised for a bad file (one message argument).
        remedy: what a user can do about a bad file, appended to the message (or a
            function that says it, asked when the file is found bad).
    """

    def __init__(self, path: str | os.PathLike, kind: str, version: int, *,
                 error: Callable[[str], StatekitError] = CheckpointError,
                 remedy: str | Callable[[], str] = ""):
        self.path, self.kind, self.version = Path(path), kind, version
        self._error, self._remedy = error, remedy

    def bad(self, detail: str) -> StatekitError:
        """The error for this file found bad: ``detail``, then the remedy."""
        remedy = self._remedy() if callable(self._remedy) else self._remedy
        remedy = f"; {remedy}" if remedy else ""
        return self._error(f"{self.kind} file {str(self.path)!r} {detail}{remedy}")

    def exists(self) -> bool:
        return self.path.exists()

    def read(self) -> dict | None:
        """The payload (without ``format`` and ``version``), or None when there is no file."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise self.bad(f"is not JSON ({exc})") from None
        if not isinstance(data, dict):
            raise self.bad(f"holds a JSON {type(data).__name__}, not an object")
        kind, version = data.pop("format", None), data.pop("version", None)
        if kind != self.kind:
            raise self.bad(f"is not a {self.kind} file (its format is {kind!r})")
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise self.bad(f"has no valid version ({version!r})")
        if version > self.version:
            raise self.bad(f"was written in version {version}, newer than version "
                             f"{self.version} that this statekit reads: upgrade statekit")
        return data

    def write(self, payload: Mapping[str, object]) -> None:
        """Replace the file with ``payload`` (atomically, durably)."""
        data = {"format": self.kind, "version": self.version, **payload}
        write_atomic(self.path, json.dumps(data))

    def delete(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    def __repr__(self) -> str:
        return f"VersionedJsonFile({str(self.path)!r}, {self.kind!r}, v{self.version})"
