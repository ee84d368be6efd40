"""``ObjectPath``: an ``s3a://bucket/key`` location with the part of ``pathlib.Path``'s API
that checkpoint readers use, read through ``pyarrow.fs.S3FileSystem`` with the settings of
``statekit.spark.s3a_settings``. Read only: statekit writes nothing to object storage.

Example:
    >>> path = ObjectPath.parse("s3a://bucket/ck/")
    >>> str(path / "offsets" / "3")
    's3a://bucket/ck/offsets/3'
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from statekit.errors import BadArgument, ObjectStoreError
from statekit.spark.s3a_settings import SCHEME, WHERE_SETTINGS_COME_FROM, S3ASettings


@dataclass(frozen=True)
class _Stat:
    st_size: int
    st_mtime: float


@dataclass(frozen=True)
class ObjectEntry:
    """An ``os.DirEntry`` look-alike for one object or prefix of a listing."""

    object_path: ObjectPath
    is_folder: bool
    size: int
    mtime: float

    @property
    def name(self) -> str:
        return self.object_path.name

    @property
    def path(self) -> str:
        return str(self.object_path)

    def is_file(self) -> bool:
        return not self.is_folder

    def is_dir(self) -> bool:
        return self.is_folder

    def is_symlink(self) -> bool:
        return False

    def stat(self) -> _Stat:
        return _Stat(self.size, self.mtime)


class ObjectPath:
    """An ``s3a://bucket/key`` location with the part of ``pathlib.Path``'s API checkpoint
    readers use (``/``, ``name``, ``parent``, ``is_dir``, ``read_bytes``, ``iterdir``, ...),
    read through ``pyarrow.fs.S3FileSystem``. Folders are key prefixes. Read only: statekit
    writes nothing to object storage.

    Example:
        >>> path = ObjectPath.parse("s3a://bucket/ck/")
        >>> str(path / "offsets" / "3"), (path / "offsets").name, str(path.parent)
        ('s3a://bucket/ck/offsets/3', 'offsets', 's3a://bucket')
    """

    def __init__(self, bucket: str, key: str, settings: S3ASettings | None = None):
        self.bucket, self.key = bucket, key.strip("/")
        #: the settings and file system, resolved once and shared with every path made
        #: from this one (``/``, ``parent``, listings)
        self._connection: dict[str, Any] = {"settings": settings, "fs": None}

    @classmethod
    def parse(cls, text: str) -> ObjectPath:
        """``s3a://bucket/key`` → ObjectPath; BadArgument naming a text without a bucket."""
        rest = text[len(SCHEME):] if text.startswith(SCHEME) else ""
        bucket, _, key = rest.partition("/")
        if not re.fullmatch(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", bucket):
            raise BadArgument("checkpoint", text, "s3a://bucket/path with a bucket name of "
                              "3-63 lower-case letters, digits, dots and hyphens")
        return cls(bucket, "/".join(p for p in key.split("/") if p not in ("", ".")))

    # --- the settings and the file system, resolved on first use -----------------------
    @property
    def settings(self) -> S3ASettings:
        if self._connection["settings"] is None:
            self._connection["settings"] = S3ASettings.resolve(self.bucket)
        return self._connection["settings"]

    @property
    def filesystem(self) -> Any:
        if self._connection["fs"] is None:
            self._connection["fs"] = self.settings.filesystem()
        return self._connection["fs"]

    def _child(self, key: str) -> ObjectPath:
        child = ObjectPath(self.bucket, key)
        child._connection = self._connection
        return child

    def at_endpoint(self) -> str:
        endpoint = self.settings.endpoint
        return f" at {endpoint}" if endpoint else " (AWS S3)"

    @contextlib.contextmanager
    def _calling(self, what: str) -> Iterator[None]:
        """pyarrow's and the AWS SDK's errors as ObjectStoreError naming the location (a
        missing object stays FileNotFoundError, as for a local file)."""
        try:
            yield
        except (FileNotFoundError, NotADirectoryError):
            raise
        except OSError as exc:
            text = str(exc)
            if "NoSuchBucket" in text or "bucket does not exist" in text.lower():
                raise FileNotFoundError(str(self)) from None
            reason = text.splitlines()[0][:300] if text else type(exc).__name__
            raise ObjectStoreError(
                f"cannot {what} {str(self)!r}{self.at_endpoint()} with the credentials from "
                f"{self.settings.source}: {reason}. Check the endpoint and the keys: "
                f"{WHERE_SETTINGS_COME_FROM}") from None

    @property
    def _arrow_path(self) -> str:
        return f"{self.bucket}/{self.key}" if self.key else self.bucket

    def _info(self) -> Any:
        from pyarrow import fs

        try:
            with self._calling("read"):
                return self.filesystem.get_file_info(self._arrow_path)
        except FileNotFoundError:  # the bucket is not there
            return fs.FileInfo(self._arrow_path, fs.FileType.NotFound)

    def bucket_exists(self) -> bool:
        from pyarrow import fs

        with self._calling("list"):
            return self.filesystem.get_file_info(self.bucket).type != fs.FileType.NotFound

    # --- pathlib.Path's API ---------------------------------------------------------------
    def __truediv__(self, name: str) -> ObjectPath:
        return self._child(f"{self.key}/{name}".strip("/"))

    @property
    def name(self) -> str:
        return self.key.rsplit("/", 1)[-1] if self.key else ""

    @property
    def suffix(self) -> str:
        name = self.name
        return name[name.rindex("."):] if "." in name.lstrip(".") else ""

    @property
    def parent(self) -> ObjectPath:
        return self._child(self.key.rsplit("/", 1)[0] if "/" in self.key else "")

    @property
    def parents(self) -> list[ObjectPath]:
        found, path = [], self
        while path.key:
            path = path.parent
            found.append(path)
        return found

    def with_name(self, name: str) -> ObjectPath:
        return self.parent / name

    def relative_to(self, other: ObjectPath) -> Path:
        if other.bucket != self.bucket or not (self.key + "/").startswith(
                other.key + "/" if other.key else ""):
            raise ValueError(f"{self} is not in {other}")
        return Path(self.key[len(other.key):].lstrip("/") or ".")

    def is_dir(self) -> bool:
        from pyarrow import fs

        return self._info().type == fs.FileType.Directory

    def is_file(self) -> bool:
        from pyarrow import fs

        return self._info().type == fs.FileType.File

    def exists(self) -> bool:
        from pyarrow import fs

        return self._info().type != fs.FileType.NotFound

    def is_symlink(self) -> bool:
        return False

    def stat(self) -> _Stat:
        from pyarrow import fs

        info = self._info()
        if info.type == fs.FileType.NotFound:
            raise FileNotFoundError(str(self))
        return _Stat(info.size or 0, info.mtime.timestamp() if info.mtime else 0.0)

    def read_bytes(self) -> bytes:
        with self._calling("read"), self.filesystem.open_input_stream(self._arrow_path) as src:
            return src.read()

    @contextlib.contextmanager
    def open_binary(self) -> Iterator[Any]:
        """A seekable binary file (``pyarrow.fs``'s random-access file)."""
        with self._calling("read"), self.filesystem.open_input_file(self._arrow_path) as src:
            yield src

    def read_text(self, encoding: str = "utf-8") -> str:
        return self.read_bytes().decode(encoding)

    def scandir(self) -> list[ObjectEntry]:
        """One listing of this folder (FileNotFoundError when it is not one)."""
        from pyarrow import fs

        with self._calling("list"):
            infos = self.filesystem.get_file_info(fs.FileSelector(self._arrow_path))
        return [ObjectEntry(self._child(info.path.split("/", 1)[1]),
                             info.type == fs.FileType.Directory, info.size or 0,
                             info.mtime.timestamp() if info.mtime else 0.0)
                for info in infos]

    def iterdir(self) -> Iterator[ObjectPath]:
        return iter([entry.object_path for entry in self.scandir()])

    def __str__(self) -> str:
        return f"{SCHEME}{self._arrow_path}"

    def __repr__(self) -> str:
        return f"ObjectPath({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ObjectPath) and (other.bucket, other.key) == (self.bucket,
                                                                                self.key)

    def __lt__(self, other: ObjectPath) -> bool:
        return str(self) < str(other)

    def __hash__(self) -> int:
        return hash((self.bucket, self.key))
