"""How big the same state is on disk under each RocksDB compression codec.

RocksDB compresses each SST block with one codec (Kafka Streams: a ``RocksDBConfigSetter``
calling ``options.setCompressionType``; Spark:
``spark.sql.streaming.stateStore.rocksdb.compression``, ``lz4`` by default).
``compressed_sizes`` writes the same rows into one fresh RocksDB database per codec, flushes
them to SST files, and reports the bytes of each; the codecs are those this machine's
RocksDB (rocksdict) has compiled in.

Example:
    >>> import pandas as pd, tempfile
    >>> rows = pd.DataFrame({"player": [f"p{i % 50:02d}" for i in range(2000)],
    ...                      "window": [i // 50 for i in range(2000)], "count": 3})
    >>> sizes = compressed_sizes(rows, ["player", "window"], tempfile.mkdtemp())
    >>> list(sizes["codec"]), bool(sizes.set_index("codec")["ratio"]["zstd"] < 1)
    (['none', 'snappy', 'lz4', 'zstd'], True)
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from rocksdict import DBCompressionType, Options, Rdict

from statekit._lazy import pd
from statekit.errors import BadArgument

#: The codecs measured, as Spark's setting spells them (all compiled into rocksdict).
CODECS = ("none", "snappy", "lz4", "zstd")
#: Spark's setting, and its default.
SPARK_SETTING, SPARK_DEFAULT = "spark.sql.streaming.stateStore.rocksdb.compression", "lz4"


def _encoded(frame: pd.DataFrame, key_columns: Sequence[str]) -> list[tuple[bytes, bytes]]:
    """Each row as (key JSON, value JSON) bytes, the layout of statekit's local stores."""
    missing = [c for c in key_columns if c not in frame.columns]
    if missing or not key_columns:
        raise BadArgument("key_columns", list(key_columns),
                          f"one or more of the frame's columns: {list(frame.columns)}")
    values = [c for c in frame.columns if c not in key_columns]
    keys = frame[list(key_columns)].to_json(orient="records", lines=True, date_format="iso")
    vals = frame[values].to_json(orient="records", lines=True, date_format="iso")
    return list(zip((k.encode() for k in keys.splitlines()),
                    (v.encode() for v in vals.splitlines()), strict=True))


def sst_size(records: Sequence[tuple[bytes, bytes]], folder: str | os.PathLike,
             codec: str) -> int:
    """Bytes of the SST files that hold ``records`` in a new RocksDB at ``folder``."""
    if codec not in CODECS:
        raise BadArgument("compression codec", codec, CODECS)
    options = Options(raw_mode=True)
    options.create_if_missing(True)
    options.set_compression_type(getattr(DBCompressionType, codec)())
    db = Rdict(str(folder), options)
    try:
        for key, value in records:
            db.put(key, value)
        db.flush(True)
        return int(db.property_int_value("rocksdb.live-sst-files-size") or 0)
    finally:
        db.close()


def compressed_sizes(frame: pd.DataFrame, key_columns: Sequence[str],
                     workdir: str | os.PathLike, codecs: Sequence[str] = CODECS
                     ) -> pd.DataFrame:
    """The rows of ``frame`` (keyed by ``key_columns``) on disk under each codec.

    Columns: ``codec``, ``sst_bytes``, ``ratio`` (to ``none``, or to the first codec when
    ``none`` is not measured), ``rows``, ``raw_bytes`` (keys + values, uncompressed).
    """
    if not isinstance(frame, pd.DataFrame) or frame.empty:
        raise BadArgument("frame", type(frame).__name__, "a non-empty DataFrame of state rows")
    records = _encoded(frame, key_columns)
    raw = sum(len(k) + len(v) for k, v in records)
    root = Path(workdir)
    sizes = {}
    for codec in codecs:
        folder = root / f"compression-{codec}"
        shutil.rmtree(folder, ignore_errors=True)
        sizes[codec] = sst_size(records, folder, codec)
        shutil.rmtree(folder, ignore_errors=True)
    base = sizes.get("none", next(iter(sizes.values()), 0)) or 1
    return pd.DataFrame({"codec": list(sizes), "sst_bytes": list(sizes.values()),
                         "ratio": [s / base for s in sizes.values()],
                         "rows": len(records), "raw_bytes": raw})
