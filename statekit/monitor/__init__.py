"""Monitoring a running query: RocksDB metrics and memory sizing, the micro-batch as record
cache, and the cheap incremental reads a live dashboard needs.

Names resolve on first use (``statekit.monitor.rocksdb_stats`` loads without pyspark).
"""

from statekit._lazy import lazy_exports

_NAMES = {
    **dict.fromkeys(("COMMIT_PHASES", "METRICS", "rocksdb_metrics", "wide"),
                    "statekit.monitor.rocksdb_stats"),
    **dict.fromkeys(("MemoryEstimate", "RocksDBSizes", "memory_by_batch", "memory_estimate"),
                    "statekit.monitor.memory_sizing"),
    **dict.fromkeys(("measure_record_cache", "summarize", "write_coalescing"),
                    "statekit.monitor.record_cache"),
    **dict.fromkeys(("compare_presets", "rate_events"), "statekit.monitor.presets"),
    **dict.fromkeys(("ChangelogCounts", "Monitor", "ProgressTail", "Reading", "top_rows"),
                    "statekit.monitor.watch"),
}
__getattr__, __dir__ = lazy_exports(__name__, _NAMES)
__all__ = sorted(_NAMES)
