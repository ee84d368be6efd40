"""The tuning presets side by side on a small query, in one session and one run.

``compare_presets(spark)`` runs the same rate-fed windowed count once with Spark's
defaults and once under each preset of ``statekit.spark.tuning`` (each on its own
``spark.newSession()`` with the preset's ``spark.sql.streaming.stateStore.rocksdb.*``
settings), stops each after ``batches`` batches and returns one row per configuration
read from the queries' own progress reports (``rocksdb_metrics``). It is the notebook
sized version of ``python -m bench.tuning``: small enough to run in seconds, so it shows
what each preset *changes* (a get per put fewer, memtables charged to a shared cache,
state rows no longer counted), not how fast a big store gets: that needs the bench's
million keys.

One caveat the bench avoids by starting a JVM per configuration: with
``boundedMemoryUsage`` Spark creates one block cache and write buffer manager per JVM,
at the first query that asks for it, so its size is the one of the first such query.

Example:
    >>> table = compare_presets(spark, batches=3)     # doctest: +SKIP
    >>> table.set_index("config").loc["write_heavy", "gets_per_put"]   # doctest: +SKIP
    1.0
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from statekit.errors import BadArgument
from statekit.monitor.rocksdb_stats import rocksdb_metrics, wide
from statekit.spark.tuning import PRESETS
from statekit.validate import whole_number

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

CONFIGS = ("default", *PRESETS)
COLUMNS = ["config", "batches", "input_rows", "rows_per_s", "state_rows", "gets_per_put",
           "memory_peak_bytes", "memory_pinned_bytes", "commit_ms", "checkpoint_bytes"]
START_MS = 1_704_067_200_000  # 2024-01-01T00:00:00Z


def rate_events(spark: SparkSession, rows_per_batch: int = 2000, keys: int = 500) -> DataFrame:
    """Game-like events from Spark's ``rate-micro-batch`` source: ``player`` (one of
    ``keys``), ``score`` and ``ts`` (one second of event time per batch)."""
    from pyspark.sql import functions as F

    rows_per_batch = whole_number(rows_per_batch, "rows_per_batch", minimum=1)
    keys = whole_number(keys, "keys", minimum=1)
    raw = (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", rows_per_batch)
           .option("advanceMillisPerBatch", 1000).option("startTimestamp", START_MS)
           .option("numPartitions", 2).load())
    return raw.select(
        F.concat(F.lit("p"), (F.abs(F.hash("value")) % keys).cast("string")).alias("player"),
        (F.col("value") % 100).alias("score"), F.col("timestamp").alias("ts"))


def _tree_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def compare_presets(spark: SparkSession, configs: Sequence[str] = CONFIGS, *, batches: int = 4,
                    rows_per_batch: int = 2000, keys: int = 500,
                    workdir: str | os.PathLike | None = None,
                    timeout: float = 300.0) -> pd.DataFrame:
    """Run the same query under each configuration; one row each (``COLUMNS``).

    ``rows_per_s``: median ``processedRowsPerSecond`` of the batches after the first;
    ``gets_per_put``: RocksDB gets per put (2 with Spark's row counting: a get before the
    put, and the aggregation's own read); ``memory_peak_bytes`` / ``memory_pinned_bytes``:
    the highest ``memoryUsedBytes`` and pinned blocks; ``commit_ms``: median state commit
    time; ``checkpoint_bytes``: the bytes under the checkpoint's ``state/`` after the stop.
    """
    from statekit.model.query_spec import QuerySpec, tumbling
    from statekit.options.query import RunOptions
    from statekit.query.start import start_query

    unknown = [c for c in configs if c not in CONFIGS]
    if unknown or not configs:
        raise BadArgument("configs", list(configs), list(CONFIGS))
    batches = whole_number(batches, "batches", minimum=2)
    base = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix="statekit-"))
    rows = []
    for name in configs:
        session = spark.newSession()
        for setting, value in dict(PRESETS.get(name, {})).items():
            session.conf.set(setting, value)
        checkpoint = base / f"preset-{name}"
        spec = QuerySpec(keys=["player"], window=tumbling("1 hour"),
                         aggregates=["count", "sum(score)"], watermark="1 day")
        query = start_query(rate_events(session, rows_per_batch, keys), spec, spark=session,
                            run=RunOptions(name=f"preset_{name}", checkpoint=str(checkpoint),
                                           trigger="1 second"))  # batches take less
        try:
            query.wait_for_batches(batches, timeout=timeout)
        finally:
            query.close()
        progress = query.progress()
        table = wide(rocksdb_metrics(progress))
        busy = progress[progress["input_rows"] > 0]
        rows.append({
            "config": name, "batches": len(busy), "input_rows": int(busy["input_rows"].sum()),
            "rows_per_s": float(busy["processed_rows_per_second"].iloc[1:].median()),
            "state_rows": int(table["state_rows"].iloc[-1]),
            "gets_per_put": float(table["gets"].sum() / max(table["puts"].sum(), 1)),
            "memory_peak_bytes": float(table["memory_used"].max()),
            "memory_pinned_bytes": float(table["memory_pinned_blocks"].max()),
            "commit_ms": float(table["commit_total"].median()),
            "checkpoint_bytes": _tree_bytes(checkpoint / "state"),
        })
    return pd.DataFrame(rows, columns=COLUMNS)
