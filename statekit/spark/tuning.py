"""RocksDB state store presets: ``spark.sql.streaming.stateStore.rocksdb.*`` settings, explained.

Three presets for the three workloads of the tuning exercise (a write-heavy store, a
read-heavy store, a memory-bounded machine). Each is a plain dict of Spark settings,
so it goes wherever Spark settings go::

    spark = spark_session(conf=PRESETS["memory_bounded"])

They are SQL settings, read when a query starts (``StateStoreConf``), so they may also be
set on ``spark.newSession().conf`` before a query. Two of them take effect only once per
executor JVM: with ``boundedMemoryUsage`` the first store instance creates the shared
block cache and write buffer manager from *its* settings, and later queries reuse them.
Apply a bounded preset when the session starts (``bench.tuning`` runs each preset in a
fresh process for that reason).

What each setting does (Spark 4.x, ``RocksDBConf``; "-1" means RocksDB's own default):

====================================  ========  =============================================
setting (after ``...rocksdb.``)        default   what it does
====================================  ========  =============================================
``blockCacheSizeMB``                   8         LRU cache of uncompressed data blocks, one
                                                 per store instance (unless bounded)
``blockSizeKB``                        4         data per SST block: the unit of a read and
                                                 of the cache; bigger = smaller index, more
                                                 bytes read per point lookup
``writeBufferSizeMB``                  -1 (64)   size of one memtable; a full one becomes
                                                 immutable and is flushed to an SST file
``maxWriteBufferNumber``               -1 (2)    memtables per instance (active + immutable)
                                                 before writes stall waiting for a flush
``boundedMemoryUsage``                 false     one block cache and write buffer manager
                                                 shared by every instance of the executor,
                                                 memtables charged to the cache
``maxMemoryUsageMB``                   500       that shared budget (bounded only)
``writeBufferCacheRatio``              0.5       share of the budget memtables may take
``highPriorityPoolRatio``              0.1       share kept for index and filter blocks
``trackTotalNumberOfRows``             true      a ``get`` before every put and delete to
                                                 count rows (``numRowsTotal``)
``compression``                        lz4       SST block compression
``compactOnCommit``                    false     full compaction at every snapshot commit
``changelogCheckpointing.enabled``     false     upload changed rows per batch, snapshots
                                                 every ``minDeltasForSnapshot`` (statekit
                                                 turns it on)
====================================  ========  =============================================

Example:
    >>> PRESETS["memory_bounded"][key("boundedMemoryUsage")]
    'true'
    >>> sorted(PRESETS)
    ['memory_bounded', 'read_heavy', 'write_heavy']
    >>> describe("write_heavy")[0]
    ('spark.sql.streaming.stateStore.rocksdb.writeBufferSizeMB', '128', '-1')
"""

from __future__ import annotations

from types import MappingProxyType

from statekit.errors import BadArgument

PREFIX = "spark.sql.streaming.stateStore.rocksdb."


def key(name: str) -> str:
    """The full Spark setting of a RocksDB option: ``key("blockCacheSizeMB")``."""
    return PREFIX + name


#: Spark's defaults for the settings the presets touch (``RocksDBConf``, Spark 4.x).
SPARK_DEFAULTS: dict[str, str] = {
    key("blockCacheSizeMB"): "8",
    key("blockSizeKB"): "4",
    key("writeBufferSizeMB"): "-1",
    key("maxWriteBufferNumber"): "-1",
    key("boundedMemoryUsage"): "false",
    key("maxMemoryUsageMB"): "500",
    key("writeBufferCacheRatio"): "0.5",
    key("highPriorityPoolRatio"): "0.1",
    key("trackTotalNumberOfRows"): "true",
    key("compression"): "lz4",
    key("compactOnCommit"): "false",
}
#: What RocksDB uses when Spark passes -1 (``ColumnFamilyOptions`` defaults).
ROCKSDB_WRITE_BUFFER_MB = 64
ROCKSDB_MAX_WRITE_BUFFERS = 2

#: Write-heavy: every key of a big store changes every batch (counts over many players).
WRITE_HEAVY: dict[str, str] = {
    # Bigger memtables: more of a batch's puts land in memory before a flush is needed, so
    # fewer (and larger) SST files, fewer compactions and fewer write stalls. With
    # changelog checkpointing a flush happens at snapshot time anyway; this keeps a busy
    # instance from flushing in between.
    key("writeBufferSizeMB"): "128",
    # Room for immutable memtables waiting to be flushed, so a burst does not stall
    # writers (RocksDB stalls when all memtables are full).
    key("maxWriteBufferNumber"): "4",
    # Spark's own advice for write-heavy stores: counting rows costs one extra ``get`` per
    # put and delete. The price: ``numRowsTotal`` (state rows in progress reports and in
    # statekit's charts) is no longer counted; read the store (``snapshot()``) instead.
    key("trackTotalNumberOfRows"): "false",
}

#: Read-heavy: a large store whose keys are looked up far more often than rewritten.
READ_HEAVY: dict[str, str] = {
    # Eight times the default cache per instance: a lookup that misses the memtable reads
    # an SST block; a cached block costs no read and no decompression. Watch
    # ``block_cache_hit_ratio`` in ``statekit.monitor.rocksdb_stats``.
    key("blockCacheSizeMB"): "64",
    # Keep the row count (and the get it costs): reads dominate here, and numRowsTotal
    # stays visible.
    key("trackTotalNumberOfRows"): "true",
    # The default 4 KB blocks are kept on purpose: a point lookup reads one whole block,
    # and bigger blocks would read (and cache) more bytes per lookup.
    key("blockSizeKB"): "4",
}

#: Memory-bounded: many queries or partitions on a small executor; RocksDB must not grow.
MEMORY_BOUNDED: dict[str, str] = {
    # One block cache and one write buffer manager for all instances of the executor:
    # native memory stops growing with the number of partitions.
    key("boundedMemoryUsage"): "true",
    # The whole budget, shared: data blocks, memtables, index and filter blocks.
    key("maxMemoryUsageMB"): "256",
    # Half of it for memtables; when they reach it RocksDB flushes the largest.
    key("writeBufferCacheRatio"): "0.5",
    # Index and filter blocks (pinned for L0) in a high-priority pool, so scans of data
    # blocks cannot evict them.
    key("highPriorityPoolRatio"): "0.1",
    # Small memtables per instance, so one busy partition cannot take the whole budget.
    key("writeBufferSizeMB"): "16",
    key("maxWriteBufferNumber"): "2",
}

#: The presets by name (read-only views; copy with ``dict(...)`` to change one).
PRESETS = MappingProxyType({
    "write_heavy": MappingProxyType(WRITE_HEAVY),
    "read_heavy": MappingProxyType(READ_HEAVY),
    "memory_bounded": MappingProxyType(MEMORY_BOUNDED),
})


def preset(name: str) -> dict[str, str]:
    """A copy of the preset ``name``: ``write_heavy``, ``read_heavy`` or ``memory_bounded``."""
    if name not in PRESETS:
        raise BadArgument("tuning preset", name, sorted(PRESETS))
    return dict(PRESETS[name])


def describe(name: str) -> list[tuple[str, str, str]]:
    """(setting, preset value, Spark's default) for each setting of preset ``name``."""
    return [(k, v, SPARK_DEFAULTS.get(k, "")) for k, v in preset(name).items()]


def setting(conf: dict[str, str] | None, name: str) -> str:
    """The value of RocksDB option ``name`` in ``conf`` (a preset or any Spark settings),
    Spark's default when absent."""
    full = key(name)
    found = {k.lower(): v for k, v in (conf or {}).items()}
    return str(found.get(full.lower(), SPARK_DEFAULTS.get(full, "")))
