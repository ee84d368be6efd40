"""Where a Spark query's state lives on disk, and how much of it there is.

Two places, as in Kafka Streams (whose ``state.dir`` holds one RocksDB directory per task
and store, rebuilt from the changelog when lost):

* the **checkpoint** (durable, shared storage in production): per operator and partition,
  a delta file ``N.changelog`` per version, snapshots ``N.zip``, and the SST files the
  snapshots share (``SSTs/``);
* the **local RocksDB directories** on the executor's disk: one
  ``StateStoreId(opId=…,partId=…,name=…)-<uuid>`` per store instance, under a ``spark-<uuid>``
  folder of ``spark.local.dir`` (``/tmp`` by default), holding the live database
  (``workingDir-*``). They are a cache of the checkpoint: lose them and the next batch loads
  the latest snapshot and replays the deltas after it.

Example:
    >>> state_on_disk("/tmp/ck", local_root="/tmp/spark-1234")          # doctest: +SKIP
                 place                   what  files  bytes
    0       checkpoint  delta files (N.changelog)     36  52341
    ...
"""

from __future__ import annotations

import os
from pathlib import Path

from statekit._lazy import pd
from statekit.errors import BadArgument
from statekit.spark_state.checkpoint import Checkpoint

#: The name prefix of a RocksDB store instance's local folder (Spark's ``StateStoreId``).
LOCAL_PREFIX = "StateStoreId("
COLUMNS = ["place", "what", "files", "bytes"]


def _walk(folder: Path):
    for root, _dirs, names in os.walk(folder):
        for name in names:
            path = Path(root, name)
            try:
                yield path, path.stat().st_size
            except OSError:  # a file RocksDB removed while we walked
                continue


def _checkpoint_rows(checkpoint: Checkpoint) -> list[tuple[str, str, int, int]]:
    kinds = {"delta files (N.changelog, N.delta)": 0, "snapshots (N.zip, N.snapshot)": 0,
             "shared SST files (SSTs/)": 0, "other (metadata, checksums)": 0}
    counts = dict.fromkeys(kinds, 0)
    state = checkpoint.state_dir
    for path, size in (_walk(state) if state.is_dir() else ()):
        name = path.name
        if path.parent.name == "SSTs" and name.endswith(".sst"):
            what = "shared SST files (SSTs/)"
        elif name.endswith((".changelog", ".delta")):
            what = "delta files (N.changelog, N.delta)"
        elif name.endswith((".zip", ".snapshot")):
            what = "snapshots (N.zip, N.snapshot)"
        else:
            what = "other (metadata, checksums)"
        kinds[what] += size
        counts[what] += 1
    return [("checkpoint", what, counts[what], kinds[what]) for what in kinds]


def local_store_dirs(local_root: str | os.PathLike) -> list[Path]:
    """The local folders of RocksDB store instances under ``local_root`` (a ``spark-<uuid>``
    folder)."""
    root = Path(local_root)
    if not root.is_dir():
        raise BadArgument("local_root", str(root),
                          "an existing folder: the Spark session's local root "
                          "(spark_local_root(spark))")
    return sorted(p for p in root.iterdir() if p.is_dir() and p.name.startswith(LOCAL_PREFIX))


def spark_local_root(spark) -> Path:
    """The local folder of a classic (not Connect) Spark session in which its RocksDB state
    store instances keep their databases (``Utils.getLocalDir``, under spark.local.dir)."""
    jvm = getattr(spark, "_jvm", None) or getattr(getattr(spark, "sparkContext", None),
                                                  "_jvm", None)
    if jvm is None:
        raise BadArgument("spark", type(spark).__name__,
                          "a classic SparkSession on this machine (a Spark Connect session "
                          "has its executors' disks elsewhere)")
    conf = spark.sparkContext._jsc.sc().conf()
    return Path(str(jvm.org.apache.spark.util.Utils.getLocalDir(conf)))


def state_on_disk(checkpoint: str | os.PathLike,
                  local_root: str | os.PathLike | None = None) -> pd.DataFrame:
    """Bytes and files of a query's state: its checkpoint's ``state/`` by kind, and (given
    ``local_root``) the local RocksDB store instances, one row for all of them.

    Columns: ``place`` (``checkpoint`` or ``local``), ``what``, ``files``, ``bytes``;
    ``attrs["local_dirs"]``: the local store folders found.
    """
    rows = _checkpoint_rows(Checkpoint(checkpoint))
    local: list[Path] = []
    if local_root is not None:
        local = local_store_dirs(local_root)
        files = [size for folder in local for _path, size in _walk(folder)]
        instances = f"{len(local)} store instance" + ("" if len(local) == 1 else "s")
        rows.append(("local", f"RocksDB working copies ({instances})", len(files),
                     sum(files)))
    frame = pd.DataFrame(rows, columns=COLUMNS)
    frame.attrs["local_dirs"] = [str(p) for p in local]
    return frame
