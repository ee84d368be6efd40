"""Is one state file whole? Checks of single files by their content: an LZ4 stream cut
short (Spark's deltas and snapshots), an SST file without RocksDB's closing magic number, a
RocksDB snapshot ``N.zip`` that is not whole, and ``.crc`` checksums of a file listing.

Each check returns what is wrong as text (None, or an empty list, when the file is whole);
``statekit.spark_state.integrity`` turns them into problems of a checkpoint.

Example:
    >>> lz4_stream_problem(b"LZ4Block")
    'its LZ4 stream is cut short inside a block header (truncated)'
"""

from __future__ import annotations

import json
import os
import struct
import zipfile

import pandas as pd

from statekit.spark.object_store import as_path, open_binary
from statekit.spark_state.checksums import checksum_problem, crc_file
from statekit.validate import require_columns

LZ4_MAGIC = b"LZ4Block"
LZ4_HEADER = 21  # magic, token, compressed length, original length, checksum
#: RocksDB's block-based table magic number, the last 8 bytes of every SST file it writes
SST_MAGIC = bytes.fromhex("f7cff485b741e288")
STREAM_EXTENSIONS = (".changelog", ".delta", ".snapshot")


def lz4_stream_problem(data: bytes) -> str | None:
    """Why ``data`` is not a whole LZ4 block stream (Spark's ``lz4`` codec: blocks that start
    with ``LZ4Block``, closed by an empty block), or None when it is.

    Only the framing is checked (block headers, lengths, the closing block), not the
    compressed bytes: a file cut short anywhere is caught.

    Example:
        >>> end = LZ4_MAGIC + bytes([0x15]) + bytes(12)
        >>> block = LZ4_MAGIC + bytes([0x15]) + (3).to_bytes(4, "little") * 2 + bytes(4) + b"abc"
        >>> lz4_stream_problem(block + end) is None
        True
        >>> lz4_stream_problem(block)
        'its LZ4 stream has no closing block (truncated)'
        >>> lz4_stream_problem(block + block[:-1])
        'its LZ4 stream is cut short inside a block (truncated)'
    """
    pos, size = 0, len(data)
    if size == 0:
        return "it is empty (truncated)"
    while True:
        if pos == size:
            return "its LZ4 stream has no closing block (truncated)"
        if size - pos < LZ4_HEADER:
            return "its LZ4 stream is cut short inside a block header (truncated)"
        if data[pos:pos + 8] != LZ4_MAGIC:
            return (f"it is not an LZ4 block stream at byte {pos} (no 'LZ4Block' header): "
                    f"corrupt, or written with another compression codec")
        compressed, original = struct.unpack_from("<ii", data, pos + 9)
        method = data[pos + 8] & 0xF0
        if method not in (0x10, 0x20) or compressed < 0 or original < 0:
            return f"its LZ4 block header at byte {pos} is not valid (corrupt)"
        pos += LZ4_HEADER
        if original == 0:  # the closing block
            return None if pos == size else f"it has {size - pos} bytes after its closing block"
        if size - pos < compressed:
            return "its LZ4 stream is cut short inside a block (truncated)"
        pos += compressed


#: What a delta file holds, its LZ4 framing taken off, when its batch changed nothing: format
#: v1 (RocksDB without column families, and every HDFS-backed ``N.delta``) only its end mark,
#: the int -1; format v2 (column families: ``transformWithState``) its version ``"v2"`` as
#: Java's ``writeUTF`` writes it, then the end record, a 0 byte. Formats v3 and v4 (state
#: checkpoint format v2) carry a lineage and are never matched.
EMPTY_DELTAS = (b"\xff\xff\xff\xff", b"\x00\x02v2\x00")
#: Bytes above which an LZ4 delta file surely holds a row (an empty one is 46 or 47 bytes:
#: a stored block of its 4 or 5 bytes and the closing block)
EMPTY_DELTA_MAX_BYTES = 2 * LZ4_HEADER + max(len(e) for e in EMPTY_DELTAS)
_STORED = 0x10  # lz4-java's block method for bytes kept as they are (too few to compress)


def delta_holds_no_rows(data: bytes) -> bool:
    """True only when ``data`` (a delta file of Spark's ``lz4`` codec) is whole and holds no
    row: its blocks stored uncompressed, their bytes one of ``EMPTY_DELTAS``. Any other
    content — a row, a compressed block, another codec, a file cut short — is False: only
    reading it tells what it holds.

    Example:
        >>> def stream(content):  # one stored block, then the closing block
        ...     head = LZ4_MAGIC + bytes([0x15]) + len(content).to_bytes(4, "little") * 2
        ...     return head + bytes(4) + content + LZ4_MAGIC + bytes([0x15]) + bytes(12)
        >>> [delta_holds_no_rows(stream(empty)) for empty in EMPTY_DELTAS]
        [True, True]
        >>> one_row = bytes.fromhex("00000001" "6b" "00000001" "76" "ffffffff")  # k -> v, end
        >>> delta_holds_no_rows(stream(one_row)), delta_holds_no_rows(stream(EMPTY_DELTAS[0])[:-1])
        (False, False)
    """
    if len(data) > EMPTY_DELTA_MAX_BYTES or lz4_stream_problem(data) is not None:
        return False
    content, pos = b"", 0
    while True:
        compressed, original = struct.unpack_from("<ii", data, pos + 9)
        if original == 0:  # the closing block (lz4_stream_problem: nothing after it)
            return content in EMPTY_DELTAS
        if data[pos + 8] & 0xF0 != _STORED or compressed != original:
            return False
        start = pos + LZ4_HEADER
        content += data[start:start + compressed]
        pos = start + compressed


def sst_problem(path: str | os.PathLike, expected_size: int | None = None) -> str | None:
    """Why an SST file is not whole (missing, another size than its snapshot lists, no
    RocksDB closing magic number), or None."""
    path = as_path(path)
    try:
        size = path.stat().st_size
        with open_binary(path) as src:
            src.seek(max(size - 8, 0))
            tail = src.read(8)
    except FileNotFoundError:
        return "it is missing"
    if expected_size is not None and size != expected_size:
        return f"it has {size:,} bytes where its snapshot lists {expected_size:,} (truncated)"
    if tail != SST_MAGIC:
        return "it does not end with RocksDB's table magic number (truncated or corrupt)"
    return None


def zip_problems(path: str | os.PathLike) -> list[tuple[str, str]]:
    """(file, problem) for a RocksDB snapshot ``N.zip``: the zip itself (whole, each member's
    CRC) and the SST files its ``metadata`` lists under ``SSTs/`` (present, of that size)."""
    path = as_path(path)
    try:
        with open_binary(path) as src, zipfile.ZipFile(src) as archive:
            bad = archive.testzip()
            if bad is not None:
                return [(str(path), f"its member {bad!r} fails its CRC (corrupt)")]
            names = archive.namelist()
            meta = archive.read("metadata").decode("utf-8") if "metadata" in names else None
    except (zipfile.BadZipFile, EOFError, OSError, UnicodeDecodeError) as exc:
        return [(str(path), f"it is not a whole zip file ({exc}): truncated or corrupt")]
    if meta is None:
        return []  # not RocksDB's layout (no SST list to follow)
    try:
        listed = json.loads(meta.split("\n", 1)[1] if meta.startswith("v") else meta)
        ssts = [(f["dfsSstFileName"], int(f["sizeBytes"])) for f in listed.get("sstFiles", [])]
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        return [(str(path), f"its 'metadata' member is not RocksDB's file list ({exc})")]
    found = []
    for name, size in ssts:
        sst = path.parent / "SSTs" / name
        problem = sst_problem(sst, size)
        if problem:
            found.append((str(sst), f"{problem} (an SST file of snapshot {path.name})"))
    return found


def file_problems(path: str | os.PathLike, codec: str = "lz4") -> list[tuple[str, str]]:
    """(file, problem) for one state file: its checksum, then its content (a delta's or an
    HDFS snapshot's compressed stream when ``codec`` is lz4, a zip and its SST files)."""
    path = as_path(path)
    problem = checksum_problem(path)
    if problem:
        return [(str(path), problem)]
    try:
        if path.suffix in STREAM_EXTENSIONS and codec == "lz4":
            problem = lz4_stream_problem(path.read_bytes())
            return [(str(path), problem)] if problem else []
        if path.suffix == ".zip":
            return zip_problems(path)
    except FileNotFoundError:
        return [(str(path), "it is missing")]
    return []


def verify_checksums(files: pd.DataFrame) -> pd.DataFrame:
    """``files`` (as ``state_files`` gives) plus a column ``checksum``: ``"ok"``, ``"no crc"``
    (no checksum file beside it) or what is wrong (``checksum_problem``).

    Example:
        >>> checked = verify_checksums(state_files("/tmp/ck"))           # doctest: +SKIP
        >>> checked[checked["checksum"] != "ok"]                         # doctest: +SKIP
    """
    require_columns(files, ("partition", "version", "kind", "file"), "state files frame",
                    "as state_files() gives")
    out = files.copy()
    results = [checksum_problem(p) or ("ok" if crc_file(p).exists() else "no crc")
               for p in out["file"]]
    out["checksum"] = pd.Series(results, index=out.index, dtype=object)
    return out
