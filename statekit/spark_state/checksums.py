"""Hadoop's checksum files: the ``.<name>.crc`` beside every file Spark writes to a local disk.

Hadoop's local file system writes ``.<name>.crc`` with every file: ``crc\\0``, the bytes per
checksum (4 bytes, big-endian), then one CRC-32 per chunk. Spark refuses a file that does
not match it (Hadoop's ``ChecksumException``); statekit checks the same, to name the file.

Example:
    >>> import tempfile, zlib
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / "1.delta").write_bytes(b"state")
    >>> crc = b"crc\\0" + (512).to_bytes(4, "big") + zlib.crc32(b"state").to_bytes(4, "big")
    >>> _ = (folder / ".1.delta.crc").write_bytes(crc)
    >>> checksum_problem(folder / "1.delta") is None
    True
    >>> _ = (folder / "1.delta").write_bytes(b"sta")
    >>> checksum_problem(folder / "1.delta")
    'its bytes do not match its checksum file .1.delta.crc (truncated or changed)'
"""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path

from statekit.spark.object_store import ObjectPath, as_path


def crc_file(path: str | os.PathLike | ObjectPath) -> Path | ObjectPath:
    """The checksum file Hadoop's local file system writes beside ``path``."""
    path = as_path(path)
    return path.with_name(f".{path.name}.crc")


def checksum_problem(path: str | os.PathLike, data: bytes | None = None) -> str | None:
    """Why ``path`` (or ``data``, its bytes already read) does not match the ``.<name>.crc``
    file beside it, or None when it does (or when there is no such file: a file system that
    keeps no checksums)."""
    path = as_path(path)
    crc_path = crc_file(path)
    try:
        crc = crc_path.read_bytes()
    except FileNotFoundError:
        return None
    if data is None:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return "it is missing"
    if len(crc) < 8 or crc[:4] != b"crc\0" or (len(crc) - 8) % 4:
        return f"its checksum file {crc_path.name} is not in Hadoop's format"
    chunk = struct.unpack(">i", crc[4:8])[0]
    if chunk <= 0:
        return f"its checksum file {crc_path.name} is not in Hadoop's format"
    expected = [struct.unpack(">I", crc[i:i + 4])[0] for i in range(8, len(crc), 4)]
    actual = [zlib.crc32(data[i:i + chunk]) for i in range(0, len(data), chunk)]
    if expected != actual:
        return f"its bytes do not match its checksum file {crc_path.name} (truncated or changed)"
    return None
