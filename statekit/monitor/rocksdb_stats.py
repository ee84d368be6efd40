"""RocksDB in numbers: Spark's state store metrics as a tidy frame, one row per batch and metric.

**The metrics.** Every progress report carries, per stateful operator, Spark's
``memoryUsedBytes``, ``commitTimeMs`` and ``customMetrics`` — the RocksDB provider's
counters (``rocksdbGetCount``, ``rocksdbReadBlockCacheHitCount``, ...).
``statekit.spark_state.progress.progress_frame`` keeps them as raw columns (summed over
operators); ``rocksdb_metrics`` turns them into one row per (batch, metric) with
readable names and a unit (``METRICS`` lists them), plus derived ones:
``block_cache_hit_ratio`` (hits / (hits + misses); NaN in a batch without block reads),
``memory_unpinned`` (memory used minus pinned blocks), ``commit_sync_other`` (file sync
time not spent writing the changelog file or uploading a snapshot) and
``bytes_per_put`` (key + value bytes RocksDB saw per put).

How Spark counts them (Spark 4.x ``RocksDB.metrics``, ``RocksDBStateStoreProvider``):
counters and timings are per batch (statistics reset at each load) and **summed over
the state store instances** (partitions), so a "time" is task time, not wall time;
``memory_used`` is, per instance, RocksDB's ``estimate-table-readers-mem`` (indexes and
filters) + ``size-all-mem-tables`` (memtables) + ``block-cache-usage``, then summed
(with ``boundedMemoryUsage`` each instance reports the shared total divided by the
number of instances, so the sum is the shared total). The commit phases: ``flush``,
``compact`` and ``checkpoint`` happen only when the batch makes a snapshot (every
``minDeltasForSnapshot`` batches with changelog checkpointing); ``file_sync`` wraps the
write of the batch's changelog file (``commit_changelog_file``) and any snapshot
upload done in the commit (``commit_zip_upload``).

How much memory that comes to, and a rule to size it: ``statekit.monitor.memory_sizing``.

Example:
    >>> import pandas as pd
    >>> progress = pd.DataFrame({"batch": [0], "state_rows_total": [80],
    ...     "state_memory_bytes": [3152160], "rocksdbReadBlockCacheHitCount": [30],
    ...     "rocksdbReadBlockCacheMissCount": [10], "rocksdbPinnedBlocksMemoryUsage": [264]})
    >>> tidy = rocksdb_metrics(progress)
    >>> row = tidy.set_index("metric").loc["block_cache_hit_ratio"]
    >>> float(row["value"]), row["unit"]
    (0.75, 'ratio')
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pandas as pd

from statekit.validate import require_columns


@dataclass(frozen=True)
class Metric:
    """A metric of the tidy frame: its name, unit and what it counts."""

    name: str
    unit: str
    meaning: str


def _m(name: str, unit: str, meaning: str) -> Metric:
    return Metric(name, unit, meaning)


#: progress-frame column (Spark's name) → the tidy metric. Operator fields first, then
#: the RocksDB provider's custom metrics, in Spark's spelling.
METRICS: dict[str, Metric] = {
    "state_rows_total": _m("state_rows", "rows", "rows in the store (numRowsTotal)"),
    "state_memory_bytes": _m("memory_used", "bytes",
                             "memtables + block cache + indexes and filters (memoryUsedBytes)"),
    "state_commit_ms": _m("commit_total", "ms", "the operator's commit (commitTimeMs)"),
    "rocksdbPinnedBlocksMemoryUsage": _m("memory_pinned_blocks", "bytes",
                                         "block cache entries pinned in memory"),
    "rocksdbSstFileSize": _m("sst_size", "bytes", "SST files on local disk"),
    "rocksdbReadBlockCacheHitCount": _m("block_cache_hits", "count",
                                        "block reads served by the block cache"),
    "rocksdbReadBlockCacheMissCount": _m("block_cache_misses", "count",
                                         "block reads that went to the SST files"),
    "rocksdbGetCount": _m("gets", "count", "RocksDB get calls"),
    "rocksdbPutCount": _m("puts", "count", "RocksDB write calls (puts and deletes)"),
    "rocksdbGetLatency": _m("get_time", "ms", "time in get calls"),
    "rocksdbPutLatency": _m("put_time", "ms", "time in write calls"),
    "rocksdbCommitFlushLatency": _m("commit_flush", "ms", "flushing memtables (snapshots)"),
    "rocksdbCommitCompactLatency": _m("commit_compact", "ms", "compaction at commit"),
    "rocksdbCommitCheckpointLatency": _m("commit_checkpoint", "ms",
                                         "RocksDB checkpoint of a snapshot"),
    "rocksdbCommitFileSyncLatencyMs": _m("commit_file_sync", "ms",
                                         "syncing to the checkpoint (changelog file, uploads)"),
    "rocksdbChangeLogWriterCommitLatencyMs": _m("commit_changelog_file", "ms",
                                                "writing the batch's changelog file"),
    "rocksdbSaveZipFilesLatencyMs": _m("commit_zip_upload", "ms",
                                       "uploading a snapshot during the commit"),
    "rocksdbLoadLatencyMs": _m("load_time", "ms", "loading the store's version"),
    "rocksdbLoadFromSnapshotLatencyMs": _m("load_snapshot_time", "ms",
                                           "loading a snapshot from the checkpoint"),
    "rocksdbReplayChangeLogLatencyMs": _m("load_replay_time", "ms",
                                          "replaying changelog files at load"),
    "rocksdbNumReplayChangelogFiles": _m("load_changelog_files", "count",
                                         "changelog files replayed at load"),
    "rocksdbNumLoadedFromDfs": _m("loads_from_checkpoint", "count",
                                  "loads that read the checkpoint (not the live instance)"),
    "rocksdbTotalBytesRead": _m("bytes_read", "bytes", "uncompressed bytes read by gets"),
    "rocksdbTotalBytesWritten": _m("bytes_written", "bytes", "uncompressed bytes written"),
    "rocksdbTotalBytesReadThroughIterator": _m("bytes_read_iterator", "bytes",
                                               "bytes read by iterators (evictions, scans)"),
    "rocksdbTotalBytesReadByCompaction": _m("compaction_bytes_read", "bytes",
                                            "bytes read by compactions"),
    "rocksdbTotalBytesWrittenByCompaction": _m("compaction_bytes_written", "bytes",
                                               "bytes written by compactions"),
    "rocksdbTotalBytesWrittenByFlush": _m("flush_bytes_written", "bytes",
                                          "bytes written by memtable flushes"),
    "rocksdbTotalCompactionLatencyMs": _m("compaction_time", "ms",
                                          "compaction time, background included"),
    "rocksdbWriterStallLatencyMs": _m("write_stall_time", "ms",
                                      "writers waiting for a flush or compaction"),
    "rocksdbBytesCopied": _m("snapshot_bytes_copied", "bytes", "bytes uploaded with snapshots"),
    "rocksdbFilesCopied": _m("snapshot_files_copied", "count", "files uploaded with snapshots"),
    "rocksdbFilesReused": _m("snapshot_files_reused", "count",
                             "SST files a snapshot reused from the previous one"),
    "rocksdbZipFileBytesUncompressed": _m("snapshot_zip_bytes", "bytes",
                                          "uncompressed bytes of snapshot zip files"),
    "rocksdbForceSnapshotCount": _m("forced_snapshots", "count", "snapshots forced on commit"),
    "rocksdbNumSnapshotsAutoRepaired": _m("snapshots_auto_repaired", "count",
                                          "corrupt snapshots skipped at load"),
    "rocksdbNumExternalColumnFamilies": _m("column_families", "count", "column families"),
    "rocksdbNumInternalColumnFamilies": _m("internal_column_families", "count",
                                           "Spark's internal column families"),
    "rocksdbNumInternalColFamiliesKeys": _m("internal_column_family_keys", "count",
                                            "keys in internal column families"),
}
#: Derived metrics, computed from the ones above.
DERIVED: dict[str, Metric] = {
    "block_cache_hit_ratio": _m("block_cache_hit_ratio", "ratio",
                                "hits / (hits + misses); NaN without block reads"),
    "memory_unpinned": _m("memory_unpinned", "bytes",
                          "memory used minus pinned blocks (memtables, cache, indexes)"),
    "commit_sync_other": _m("commit_sync_other", "ms",
                            "file sync minus changelog file and snapshot upload"),
    "bytes_per_put": _m("bytes_per_put", "bytes", "bytes written per put (key + value)"),
    "gets_per_put": _m("gets_per_put", "ratio", "get calls per put"),
    "last_snapshot_version": _m("last_snapshot_version", "version",
                                "oldest last-uploaded snapshot over partitions (-1: none)"),
}
#: The commit phases as disjoint parts of a commit (stacked in ``commit_phases_chart``).
COMMIT_PHASES = ("commit_flush", "commit_compact", "commit_checkpoint", "commit_changelog_file",
                 "commit_zip_upload", "commit_sync_other")
UNITS = ("rows", "bytes", "ms", "count", "ratio", "version")
COLUMNS = ["batch", "metric", "value", "unit", "spark_metric"]
_SNAPSHOT_UPLOADED = re.compile(r"^SnapshotLastUploaded\.partition_(\d+)_(.+)$")
#: progress-frame columns that are not RocksDB metrics.
_NOT_METRICS = {"batch", "timestamp", "input_rows", "input_rows_per_second",
                "processed_rows_per_second", "duration_ms", "state_rows_updated",
                "state_rows_removed", "dropped_by_watermark", "watermark", "malformed_rows"}
SOURCE = "as StatefulQuery.progress() or statekit.spark_state.progress.progress_frame gives"


def _unit_of(name: str) -> str:
    """A unit for a custom metric this module does not know (a newer Spark's)."""
    if re.search(r"Bytes|Size|MemoryUsage", name):
        return "bytes"
    if re.search(r"Latency|Ms$|Time", name):
        return "ms"
    return "count"


def _ratio(num: pd.Series, den: pd.Series) -> pd.Series:
    num, den = num.astype(float), den.astype(float)
    return (num / den.where(den > 0)).astype(float)


def rocksdb_metrics(progress: pd.DataFrame) -> pd.DataFrame:
    """Spark's state store metrics of ``progress`` as a tidy frame, derived metrics included.

    ``progress``: one row per batch with RocksDB custom metrics as raw columns
    (``StatefulQuery.progress()``). Returns ``batch``, ``metric`` (``METRICS`` and
    ``DERIVED`` names; a custom metric this module does not know keeps Spark's name),
    ``value`` (float), ``unit`` (one of ``UNITS``) and ``spark_metric`` (where it came
    from), sorted by batch in catalogue order. Metrics a report lacks are left out (a
    query on another state store provider has no ``rocksdb*`` columns).
    """
    require_columns(progress, ["batch"], "progress frame", SOURCE)
    frame = progress.reset_index(drop=True)
    parts: list[pd.DataFrame] = []
    order: list[str] = []

    def add(name: str, unit: str, values: pd.Series, spark: str) -> None:
        order.append(name)
        parts.append(pd.DataFrame({"batch": frame["batch"].astype("int64"), "metric": name,
                                   "value": pd.to_numeric(values, errors="coerce").astype(float),
                                   "unit": unit, "spark_metric": spark}))

    for column, metric in METRICS.items():
        if column in frame:
            add(metric.name, metric.unit, frame[column], column)
    uploaded = [c for c in frame.columns if _SNAPSHOT_UPLOADED.match(str(c))]
    unknown = [c for c in frame.columns if c not in METRICS and c not in _NOT_METRICS
               and c not in uploaded and str(c).startswith("rocksdb")]
    for column in unknown:
        add(str(column), _unit_of(str(column)), frame[column], str(column))

    if {"rocksdbReadBlockCacheHitCount", "rocksdbReadBlockCacheMissCount"} <= set(frame):
        hits = frame["rocksdbReadBlockCacheHitCount"].fillna(0)
        add("block_cache_hit_ratio", "ratio",
            _ratio(hits, hits + frame["rocksdbReadBlockCacheMissCount"].fillna(0)),
            "rocksdbReadBlockCacheHitCount, rocksdbReadBlockCacheMissCount")
    if {"state_memory_bytes", "rocksdbPinnedBlocksMemoryUsage"} <= set(frame):
        add("memory_unpinned", "bytes",
            (frame["state_memory_bytes"] - frame["rocksdbPinnedBlocksMemoryUsage"]).clip(lower=0),
            "state_memory_bytes - rocksdbPinnedBlocksMemoryUsage")
    if "rocksdbCommitFileSyncLatencyMs" in frame:
        inside = sum(frame[c].fillna(0) for c in ("rocksdbChangeLogWriterCommitLatencyMs",
                                                   "rocksdbSaveZipFilesLatencyMs") if c in frame)
        add("commit_sync_other", "ms",
            (frame["rocksdbCommitFileSyncLatencyMs"].fillna(0) - inside).clip(lower=0),
            "rocksdbCommitFileSyncLatencyMs - changelog file - zip upload")
    if {"rocksdbTotalBytesWritten", "rocksdbPutCount"} <= set(frame):
        add("bytes_per_put", "bytes",
            _ratio(frame["rocksdbTotalBytesWritten"], frame["rocksdbPutCount"]),
            "rocksdbTotalBytesWritten / rocksdbPutCount")
    if {"rocksdbGetCount", "rocksdbPutCount"} <= set(frame):
        add("gets_per_put", "ratio", _ratio(frame["rocksdbGetCount"], frame["rocksdbPutCount"]),
            "rocksdbGetCount / rocksdbPutCount")
    if uploaded:
        add("last_snapshot_version", "version", frame[uploaded].min(axis=1),
            "SnapshotLastUploaded.partition_*")

    if not parts:
        return pd.DataFrame({c: pd.Series(dtype=t) for c, t in zip(
            COLUMNS, ("int64", "object", "float64", "object", "object"), strict=True)})
    tidy = pd.concat(parts, ignore_index=True)
    tidy["_order"] = tidy["metric"].map({name: i for i, name in enumerate(order)})
    return (tidy.sort_values(["batch", "_order"], kind="stable").drop(columns="_order")
            .reset_index(drop=True))


def wide(metrics: pd.DataFrame) -> pd.DataFrame:
    """The tidy frame back to one row per batch, one column per metric.

    Example:
        >>> tidy = pd.DataFrame({"batch": [0, 0], "metric": ["gets", "puts"],
        ...                      "value": [4.0, 2.0], "unit": "count"})
        >>> wide(tidy).to_dict("records")
        [{'batch': 0, 'gets': 4.0, 'puts': 2.0}]
    """
    require_columns(metrics, ["batch", "metric", "value"], "metrics frame",
                    "as rocksdb_metrics gives")
    table = metrics.pivot_table(index="batch", columns="metric", values="value",
                                aggfunc="last", dropna=False, sort=False)
    table.columns.name = None
    return table.reset_index()
