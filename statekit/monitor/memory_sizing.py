"""RocksDB's memory in Spark's state store: the ceiling the settings allow, and what the
working set uses (``memory_estimate``), beside the measured ``memory_used`` per batch.

The seed reading on Kafka Streams state
stores sizes an instance as JVM heap + RocksDB block cache + write buffers (64 MB per
buffer, three per store) + a share for the OS page cache. Only the RocksDB terms live
in Spark's state store, once per **store instance** (shuffle partition × stateful
operator), so statekit's ceiling is::

    ceiling = instances × (blockCacheSizeMB + writeBufferSizeMB × maxWriteBufferNumber)
              (or maxMemoryUsageMB, shared, when boundedMemoryUsage is on)

That is what memory *can* reach; a store that holds little uses far less. What it
*uses* — the working set, which ``memory_used`` measures — is estimated as::

    memtables  = per instance: rows written since the last flush × row bytes × overhead,
                 rounded up to RocksDB's 1 MiB arena blocks, at least one block once
                 anything was written, at most writeBufferSizeMB × maxWriteBufferNumber
    block cache = min(state rows × row bytes, instances × blockCacheSizeMB), only once
                 rows live in SST files (after the first snapshot flush)
    indexes and filters = state rows × 10 bits (bloom filter) + one index entry per block

``overhead`` = 1.2 was measured here: 100,000 puts of 105-byte rows grew
``size-all-mem-tables`` by 125.8 bytes each (internal key + skip-list node). On small
states the arena block dominates: the game query (3 partitions, ~100 rows) measures
3,152,160 bytes = 3 × 1 MiB + table readers. ``tests/monitor/test_monitor.py`` checks the
estimate against a real query's ``memory_used`` within ``TOLERANCE`` (a factor of 3
either way on the peak).

Example:
    >>> est = memory_estimate(state_rows=100, row_bytes=100, instances=3)
    >>> round(est.total / 2**20, 2), round(est.ceiling / 2**20)
    (3.01, 408)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from statekit.errors import BadArgument
from statekit.spark.tuning import ROCKSDB_MAX_WRITE_BUFFERS, ROCKSDB_WRITE_BUFFER_MB, setting
from statekit.validate import require_columns, whole_number

MIB = 1 << 20
#: RocksDB allocates memtable memory in arena blocks of min(1 MiB, write buffer / 8).
ARENA_BLOCK = MIB
#: Memtable bytes per byte written (internal key and skip-list node), measured (see above).
MEMTABLE_OVERHEAD = 1.2
#: Bloom filter bits per key (Spark's ``BloomFilter()``: 10 bits) and bytes per index entry.
BLOOM_BITS_PER_KEY = 10
INDEX_ENTRY_BYTES = 48
#: How far the estimate may be from the measured peak ``memory_used`` (either way).
TOLERANCE = 3.0


@dataclass(frozen=True)
class MemoryEstimate:
    """What ``memory_estimate`` found, in bytes (``components`` is a frame of the terms)."""

    memtables: float
    block_cache: float
    indexes_and_filters: float
    ceiling: float
    instances: int

    @property
    def total(self) -> float:
        """The working set: memtables + block cache + indexes and filters (≤ ceiling)."""
        return min(self.memtables + self.block_cache + self.indexes_and_filters, self.ceiling)

    @property
    def components(self) -> pd.DataFrame:
        return pd.DataFrame({"component": ["memtables", "block cache", "indexes and filters"],
                             "bytes": [self.memtables, self.block_cache,
                                       self.indexes_and_filters]})

    def within(self, measured: float, tolerance: float = TOLERANCE) -> bool:
        """True when ``measured`` bytes are within ``tolerance`` times of ``total`` either way."""
        if measured <= 0 or self.total <= 0:
            return False
        return 1 / tolerance <= measured / self.total <= tolerance


@dataclass(frozen=True)
class RocksDBSizes:
    """The sizes that bound RocksDB's memory, read from Spark settings."""

    block_cache_mb: float
    write_buffer_mb: float
    max_write_buffers: int
    block_size_kb: float
    bounded_mb: float | None

    @classmethod
    def from_conf(cls, conf: Mapping[str, str] | None = None) -> RocksDBSizes:
        """From Spark settings (a tuning preset, ``spark.conf``'s values); Spark's and
        RocksDB's defaults for what is not set."""
        conf = dict(conf or {})
        wbs = float(setting(conf, "writeBufferSizeMB"))
        count = int(setting(conf, "maxWriteBufferNumber"))
        bounded = setting(conf, "boundedMemoryUsage").lower() == "true"
        return cls(block_cache_mb=float(setting(conf, "blockCacheSizeMB")),
                   write_buffer_mb=wbs if wbs > 0 else ROCKSDB_WRITE_BUFFER_MB,
                   max_write_buffers=count if count > 0 else ROCKSDB_MAX_WRITE_BUFFERS,
                   block_size_kb=float(setting(conf, "blockSizeKB")),
                   bounded_mb=float(setting(conf, "maxMemoryUsageMB")) if bounded else None)


def memory_estimate(
    state_rows: int,
    row_bytes: float,
    instances: int,
    *,
    writes_since_flush: int | None = None,
    in_sst: bool = True,
    conf: Mapping[str, str] | None = None,
    overhead: float = MEMTABLE_OVERHEAD,
) -> MemoryEstimate:
    """The memory RocksDB state stores use, by the rule in the module docstring.

    Args:
        state_rows: rows in the store, all instances together (``state_rows``).
        row_bytes: key + value bytes of a row as RocksDB stores it (``bytes_per_put`` of
            ``rocksdb_metrics``; about 100 for a window, a player and three aggregates).
        instances: state store instances: shuffle partitions × stateful operators.
        writes_since_flush: puts and deletes since the last snapshot flush, all
            instances (default ``state_rows``: each row written once). A store whose rows
            change every batch holds up to ``minDeltasForSnapshot`` writes per row.
        in_sst: whether rows live in SST files yet (False before the first snapshot
            flush: nothing to cache).
        conf: Spark settings (e.g. ``statekit.spark.tuning.PRESETS[...]``) for the sizes.
        overhead: memtable bytes per byte written.
    """
    rows = whole_number(state_rows, "state_rows", minimum=0)
    inst = whole_number(instances, "instances", minimum=1)
    writes = rows if writes_since_flush is None else whole_number(
        writes_since_flush, "writes_since_flush", minimum=0)
    if not (isinstance(row_bytes, (int, float, np.number)) and math.isfinite(row_bytes)
            and row_bytes > 0):
        raise BadArgument("row_bytes", row_bytes, "a number of bytes > 0")
    sizes = RocksDBSizes.from_conf(conf)
    per_instance_cap = sizes.write_buffer_mb * MIB * sizes.max_write_buffers
    per_instance = writes / inst * float(row_bytes) * overhead
    arena = min(ARENA_BLOCK, sizes.write_buffer_mb * MIB / 8)
    memtable = 0.0 if writes == 0 else min(max(math.ceil(per_instance / arena), 1) * arena,
                                           per_instance_cap)
    data = rows * float(row_bytes)
    cache = min(data, inst * sizes.block_cache_mb * MIB) if in_sst else 0.0
    blocks = math.ceil(data / (sizes.block_size_kb * 1024)) if in_sst else 0
    indexes = (rows * BLOOM_BITS_PER_KEY / 8 + blocks * INDEX_ENTRY_BYTES) if in_sst else 0.0
    if sizes.bounded_mb is not None:
        ceiling = sizes.bounded_mb * MIB
    else:
        ceiling = inst * (sizes.block_cache_mb * MIB + per_instance_cap) + indexes
    return MemoryEstimate(memtables=memtable * inst, block_cache=cache,
                          indexes_and_filters=indexes, ceiling=ceiling, instances=inst)


def memory_by_batch(progress: pd.DataFrame, instances: int,
                    conf: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Measured ``memory_used`` beside ``memory_estimate`` for every batch of ``progress``.

    The estimate's inputs come from the same reports: state rows, bytes per put (all
    batches so far), puts since the last batch whose commit flushed memtables
    (``flush_bytes_written`` > 0: the memtables are empty right after it), and whether
    SST files exist yet. Columns: ``batch``, ``measured``, ``estimate``, ``memtables``,
    ``block_cache``, ``indexes_and_filters``, ``ceiling``, ``ratio`` (measured /
    estimate).
    """
    needed = ["batch", "state_rows_total", "state_memory_bytes", "rocksdbTotalBytesWritten",
              "rocksdbPutCount", "rocksdbTotalBytesWrittenByFlush", "rocksdbSstFileSize"]
    require_columns(progress, needed, "progress frame with RocksDB metrics",
                    "StatefulQuery.progress() of a query on the RocksDB state store")
    frame = progress.sort_values("batch").reset_index(drop=True)
    puts = frame["rocksdbPutCount"].fillna(0).astype(float)
    written = frame["rocksdbTotalBytesWritten"].fillna(0).astype(float).cumsum()
    row_bytes = (written / puts.cumsum().where(lambda s: s > 0)).ffill()
    flushed = frame["rocksdbTotalBytesWrittenByFlush"].fillna(0) > 0
    rows, since = [], 0.0
    for i, batch in enumerate(frame["batch"]):
        since = 0.0 if flushed.iloc[i] else since + puts.iloc[i]
        size = row_bytes.iloc[i]
        measured = float(frame["state_memory_bytes"].iloc[i])
        if not math.isfinite(size) or size <= 0:
            rows.append({"batch": int(batch), "measured": measured})
            continue
        est = memory_estimate(int(frame["state_rows_total"].iloc[i]), float(size), instances,
                              writes_since_flush=int(since), conf=conf,
                              in_sst=bool(frame["rocksdbSstFileSize"].iloc[i] > 0))
        rows.append({"batch": int(batch), "measured": measured, "estimate": est.total,
                     "memtables": est.memtables, "block_cache": est.block_cache,
                     "indexes_and_filters": est.indexes_and_filters, "ceiling": est.ceiling})
    out = pd.DataFrame(rows, columns=["batch", "measured", "estimate", "memtables",
                                      "block_cache", "indexes_and_filters", "ceiling"])
    out["ratio"] = out["measured"] / out["estimate"].where(out["estimate"] > 0)
    return out
