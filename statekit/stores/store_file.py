"""One versioned JSON file of a store directory: read whole and checked, written atomically.

The base of ``StoreMetadataFile`` and ``OffsetCheckpointFile`` (as Kafka
Streams' ``OffsetCheckpoint``, one class owns one file). The file is a JSON
object with a ``format_version`` field; a file without one is version 1 (as
the first stores wrote). Reading names the file and the bad value: a file that
is not a JSON object, or whose version is not a whole number >= 1, raises
``StoreCorrupt``; a version newer than this statekit reads raises
``StoreMismatch``. Writing goes through ``statekit.atomic.write_atomic``
(a temporary file, fsync, rename), so a crash leaves the old file or the new one.

Example:
    >>> import tempfile
    >>> class NotesFile(StoreFile):
    ...     NAME, VERSION, WHAT = "notes.json", 1, "notes"
    ...     REMEDY = "delete it"
    >>> notes = NotesFile(tempfile.mkdtemp())
    >>> notes.read_object() is None
    True
    >>> notes.write_object({"format_version": 1, "text": "hi"})
    >>> notes.read_object()
    ({'format_version': 1, 'text': 'hi'}, 1)
    >>> _ = notes.path.write_text('{"format_version": 0}')
    >>> notes.read_object()                                          # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    statekit.errors.StoreCorrupt: store file '.../notes.json' is unreadable \
(notes format_version 0 is unknown; accepted 1 (a file without one is read as 1)); delete it
    >>> import shutil; shutil.rmtree(notes.directory)
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import ClassVar

from statekit.atomic import write_atomic
from statekit.errors import StoreCorrupt, StoreMismatch
from statekit.validate import is_whole_number

#: The version of a file written before files carried one.
UNVERSIONED = 1


class StoreFile:
    """The file ``NAME`` in a store ``directory``, at format ``VERSION`` (or older).

    Subclasses set ``NAME`` (the file name), ``VERSION`` (the newest format read,
    the one written), ``WHAT`` (what the file is, for messages) and ``REMEDY``
    (what a user can do about a bad file).
    """

    NAME: ClassVar[str]
    VERSION: ClassVar[int]
    WHAT: ClassVar[str]
    REMEDY: ClassVar[str]

    def __init__(self, directory: str | os.PathLike):
        self.directory = Path(directory)
        self.path = self.directory / self.NAME

    def exists(self) -> bool:
        return self.path.exists()

    def corrupt(self, detail: str) -> StoreCorrupt:
        """The error for this file found bad: ``detail`` names the value and what is accepted."""
        return StoreCorrupt(self.path, detail, self.REMEDY)

    def read_object(self) -> tuple[dict, int] | None:
        """The file's JSON object and its format version, or None when there is no file."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except UnicodeDecodeError as exc:
            raise self.corrupt(f"not UTF-8 text: {exc}") from None
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise self.corrupt(f"not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise self.corrupt(f"a JSON {type(data).__name__}, not an object")
        return data, self._version(data.get("format_version", UNVERSIONED))

    def _version(self, version: object) -> int:
        accepted = (f"accepted {self._versions_read()} "
                    f"(a file without one is read as {UNVERSIONED})")
        if not is_whole_number(version) or version < 1:
            raise self.corrupt(f"{self.WHAT} format_version {version!r} is unknown; {accepted}")
        if version > self.VERSION:
            raise StoreMismatch(
                self.directory, "format version", version, self.VERSION,
                f"upgrade statekit, or {self.REMEDY}",
                message=(f"store file {str(self.path)!r} was written in {self.WHAT} format "
                         f"{version}, newer than format {self.VERSION} that this statekit "
                         f"reads ({accepted})"))
        return int(version)

    def _versions_read(self) -> str:
        return str(self.VERSION) if self.VERSION == 1 else f"1 to {self.VERSION}"

    def write_object(self, data: dict) -> None:
        """Replace the file with ``data`` (atomically, durably)."""
        write_atomic(self.path, json.dumps(data, indent=1))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.directory)!r})"
