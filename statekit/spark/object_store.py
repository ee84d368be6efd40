"""A checkpoint location and how to list and read its files: a local folder (``pathlib.Path``)
or an ``s3a://bucket/key`` one (``ObjectPath``, read with ``pyarrow.fs.S3FileSystem``).

Every reader of checkpoint files takes its paths from ``location()`` and lists folders with
``listdir``/``scandir`` here, so the same code reads both. An ``s3a://`` location is
reached with one set of settings (``S3ASettings``), for statekit's own reads and for
Spark's (``spark_settings()``: ``spark.hadoop.fs.s3a.*``), each taken from the first place
that has it:

1. Spark's conf: ``spark.hadoop.fs.s3a.bucket.<bucket>.<name>``, then
   ``spark.hadoop.fs.s3a.<name>`` (``access.key``, ``secret.key``, ``session.token``,
   ``endpoint``, ``endpoint.region``, ``path.style.access``);
2. the environment: ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
   ``AWS_SESSION_TOKEN``, ``AWS_ENDPOINT_URL_S3`` or ``AWS_ENDPOINT_URL``, ``AWS_REGION``
   or ``AWS_DEFAULT_REGION``;
3. ``~/.aws/credentials`` and ``~/.aws/config`` (profile ``AWS_PROFILE``, else
   ``default``; ``AWS_SHARED_CREDENTIALS_FILE``, ``AWS_CONFIG_FILE``).

Keys missing everywhere are an ObjectStoreError naming these settings (statekit asks no
instance-metadata service). Other schemes (``hdfs://``, ``s3://``, ``gs://``) are refused:
mount them and give the mount point.

The settings live in ``statekit.spark.s3a_settings``, ``ObjectPath`` in
``statekit.spark.object_path``; this module owns what a location is and how it is listed.

Example:
    >>> location("/tmp/ck") == Path("/tmp/ck")
    True
    >>> location("hdfs://nn/ck")
    Traceback (most recent call last):
    ...
    statekit.errors.BadArgument: bad checkpoint: 'hdfs://nn/ck'; accepted: a local path or an \
s3a://bucket/path location (statekit reads other schemes' checkpoints as files: mount the \
hdfs:// location and give its mount point)
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from statekit.errors import BadArgument, CheckpointError, ObjectStoreError
from statekit.spark.object_path import ObjectEntry, ObjectPath
from statekit.spark.s3a_settings import SCHEME

_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


# --- locations ------------------------------------------------------------------------------
def is_object_store(path: object) -> bool:
    """True for an ``s3a://`` location (text or ``ObjectPath``)."""
    return isinstance(path, ObjectPath) or (isinstance(path, str) and path.startswith(SCHEME))


def as_path(path: str | os.PathLike | ObjectPath) -> Path | ObjectPath:
    """``path`` as a ``Path``, or an ``ObjectPath`` for ``s3a://`` (kept as it is, not
    made absolute: ``location`` checks and normalizes a checkpoint's)."""
    if isinstance(path, ObjectPath):
        return path
    text = os.fspath(path)
    return ObjectPath.parse(text) if isinstance(text, str) and text.startswith(SCHEME) \
        else Path(text)


@contextlib.contextmanager
def open_binary(path: Path | ObjectPath) -> Iterator[Any]:
    """A seekable binary file of ``path`` (local, or ``s3a://`` read through pyarrow)."""
    if isinstance(path, ObjectPath):
        with path.open_binary() as src:
            yield src
        return
    with open(path, "rb") as src:
        yield src


def location(path: str | os.PathLike | ObjectPath, what: str = "checkpoint"
             ) -> Path | ObjectPath:
    """``path`` as a ``Path`` (a local folder, made absolute; ``file://`` dropped) or an
    ``ObjectPath`` (``s3a://``); BadArgument for another scheme (mount it instead)."""
    if isinstance(path, ObjectPath):
        return path
    text = os.fspath(path)
    if not isinstance(text, str):
        raise BadArgument(what, path, "a folder's path (a str or os.PathLike naming a folder)")
    if text.startswith("file://"):
        text = text[len("file://"):]
    elif text.startswith(SCHEME):
        return ObjectPath.parse(text)
    elif text.startswith(("s3://", "s3n://")):
        raise BadArgument(what, text, f"a local path or an s3a://bucket/path location "
                          f"(Hadoop's S3A connector: s3a://{text.split('://', 1)[1]})")
    elif _URL.match(text):
        scheme = text.split("://", 1)[0]
        raise BadArgument(what, text, f"a local path or an s3a://bucket/path location "
                          f"(statekit reads other schemes' checkpoints as files: mount the "
                          f"{scheme}:// location and give its mount point)")
    return Path(os.path.abspath(text))


def listdir(folder: Path | ObjectPath) -> list[str]:
    """The names in ``folder`` (``os.listdir``'s errors: FileNotFoundError,
    NotADirectoryError)."""
    if isinstance(folder, ObjectPath):
        return [entry.name for entry in folder.scandir()]
    return os.listdir(folder)


@contextlib.contextmanager
def scandir(folder: Path | ObjectPath) -> Iterator[Any]:
    """``os.scandir`` of a local folder, or the same entries (``name``, ``path``,
    ``is_file()``, ``is_dir()``, ``stat()``) of an ``s3a://`` one, from one listing."""
    if isinstance(folder, ObjectPath):
        yield iter(folder.scandir())
        return
    with os.scandir(folder) as entries:
        yield entries


def entry_path(entry: Any) -> Path | ObjectPath:
    """The path of a ``scandir`` entry."""
    return entry.object_path if isinstance(entry, ObjectEntry) else Path(entry.path)


def missing_error(path: Path | ObjectPath, what: str = "checkpoint") -> CheckpointError:
    """The error of a ``path`` that is not a folder, naming it: for ``s3a://``, a bucket that
    does not exist is an ObjectStoreError naming the bucket and the endpoint."""
    if isinstance(path, ObjectPath) and path.key and not path.bucket_exists():
        return ObjectStoreError(f"{what} {str(path)!r}: bucket {path.bucket!r} does not exist"
                                f"{path.at_endpoint()}")
    return CheckpointError(f"{what} {str(path)!r} does not exist or is not a directory")
