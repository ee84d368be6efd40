"""What plays the part of Kafka Streams' record cache in Spark: the micro-batch.

Kafka Streams puts a record cache in front of a store: updates to the same key
within a commit interval are merged in memory, and only the latest reaches the
store and its changelog (``statestore.cache.max.bytes``, ``commit.interval.ms``).
Spark has no such cache, and needs none for a streaming aggregation: each
micro-batch aggregates its input first, then writes **each key it touched once**
(one put; evicted windows one delete). The batch is the cache, and its size —
the trigger interval × the input rate, or ``max_offsets_per_trigger`` — sets how
many input events collapse into one changelog record.

``write_coalescing(changelog, progress)`` measures it per batch of a real query;
``measure_record_cache`` runs the same input at several batch sizes and stacks the
results (``statekit.charts.record_cache_chart`` draws them).

Example:
    >>> import pandas as pd
    >>> records = pd.DataFrame({"batch": [0, 0, 1], "partition": [0, 1, 0],
    ...     "key": ["a", "b", "a"], "tombstone": [False, False, False]})
    >>> progress = pd.DataFrame({"batch": [0, 1], "input_rows": [6, 2]})
    >>> write_coalescing(records, progress)[["batch", "records", "keys",
    ...     "records_per_key", "events_per_key"]].to_dict("records")
    ... # doctest: +NORMALIZE_WHITESPACE
    [{'batch': 0, 'records': 2, 'keys': 2, 'records_per_key': 1.0, 'events_per_key': 3.0},
     {'batch': 1, 'records': 1, 'keys': 1, 'records_per_key': 1.0, 'events_per_key': 2.0}]
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from statekit.errors import BadArgument
from statekit.validate import require_columns, whole_number

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from statekit.changelog.log import Changelog
    from statekit.model.connection import Kafka
    from statekit.model.query_spec import QuerySpec

COLUMNS = ["batch", "input_rows", "records", "puts", "tombstones", "keys", "records_per_key",
           "events_per_key", "records_per_event"]


def _records(changelog) -> pd.DataFrame:
    records = getattr(changelog, "records", changelog)
    require_columns(records, ["batch", "partition", "key", "tombstone"], "changelog records",
                    "as StatefulQuery.read_changelog() gives")
    return records


def write_coalescing(changelog: Changelog | pd.DataFrame, progress: pd.DataFrame) -> pd.DataFrame:
    """Per batch: input events, changelog records, distinct keys written, and their ratios.

    Args:
        changelog: the query's changelog (``query.read_changelog()``) or its records.
        progress: the query's progress (``query.progress()``): ``input_rows`` per batch.

    Returns one row per batch that read input or wrote records: ``input_rows``
    (events read, malformed and late ones included), ``records`` (changelog records:
    ``puts`` + ``tombstones``), ``keys`` (distinct state keys written),
    ``records_per_key`` = records / keys (Spark writes a key at most once a batch, so
    ≤ 1), ``events_per_key`` = input rows / puts (events folded into each put: what a
    record cache would have merged) and ``records_per_event`` = records / input rows.
    """
    records = _records(changelog)
    require_columns(progress, ["batch", "input_rows"], "progress frame",
                    "as StatefulQuery.progress() gives")
    grouped = records.groupby("batch")
    per_batch = pd.DataFrame({
        "records": grouped.size(),
        "tombstones": grouped["tombstone"].sum().astype("int64"),
        "keys": records.drop_duplicates(["batch", "partition", "key"]).groupby("batch").size(),
    })
    inputs = progress[["batch", "input_rows"]].drop_duplicates("batch", keep="last")
    frame = inputs.set_index("batch").join(per_batch, how="outer").fillna(0)
    frame = frame[(frame["input_rows"] > 0) | (frame["records"] > 0)].astype("int64")
    frame["puts"] = frame["records"] - frame["tombstones"]
    frame["records_per_key"] = frame["records"] / frame["keys"].where(frame["keys"] > 0)
    frame["events_per_key"] = frame["input_rows"] / frame["puts"].where(frame["puts"] > 0)
    frame["records_per_event"] = frame["records"] / frame["input_rows"].where(
        frame["input_rows"] > 0)
    frame.index.name = "batch"
    return frame.reset_index()[COLUMNS]


def summarize(frame: pd.DataFrame, by: str = "batch_size") -> pd.DataFrame:
    """One row per run (``by``): batches, events, records, and the reduction they show.

    ``records_per_event`` = all records / all events (what reaches the changelog per
    input event), ``max_records_per_key`` (≤ 1 when every key is written once a batch)
    and ``mean_events_per_key`` (events merged into each put, averaged over batches).

    Example:
        >>> frame = pd.DataFrame({"batch_size": [10, 10], "batch": [0, 1],
        ...     "input_rows": [10, 10], "records": [4, 5], "puts": [4, 5],
        ...     "records_per_key": [1.0, 1.0], "events_per_key": [2.5, 2.0]})
        >>> summarize(frame)[["batch_size", "batches", "records_per_event"]].to_dict("records")
        [{'batch_size': 10, 'batches': 2, 'records_per_event': 0.45}]
    """
    require_columns(frame, [by, "batch", "input_rows", "records", "records_per_key",
                            "events_per_key"], "record cache frame",
                    "as write_coalescing or measure_record_cache gives")
    grouped = frame.groupby(by, sort=True)
    out = pd.DataFrame({
        "batches": grouped["batch"].nunique(),
        "input_rows": grouped["input_rows"].sum(),
        "records": grouped["records"].sum(),
        "max_records_per_key": grouped["records_per_key"].max(),
        "mean_events_per_key": grouped["events_per_key"].mean(),
    })
    out["records_per_event"] = out["records"] / out["input_rows"].where(out["input_rows"] > 0)
    return out.reset_index()


def measure_record_cache(
    topic: str,
    spec: QuerySpec,
    kafka: Kafka,
    batch_sizes: Sequence[int] = (250, 1000, 5000),
    *,
    spark: SparkSession | None = None,
    workdir: str | Path | None = None,
    name: str = "record-cache",
    timeout: float = 600.0,
    **source_options: Any,
) -> pd.DataFrame:
    """Run the same input at each batch size; ``write_coalescing`` of each, stacked.

    Each run is a fresh query (own checkpoint and changelog topic
    ``<name>-<size>-counts-changelog``) reading ``topic`` from the start with
    ``max_offsets_per_trigger`` = the batch size, drained, then stopped. In a live
    stream the batch size is the trigger interval × the input rate: a longer trigger
    is a bigger batch. Returns the per-batch frame with a ``batch_size`` column first.
    ``source_options``: how ``topic`` is read, as ``SourceOptions``' fields
    (``event_schema``, ``required_fields``, ...; not ``max_offsets_per_trigger``, which is
    the batch size).
    """
    from statekit.options.base import route
    from statekit.options.query import RunOptions, SourceOptions
    from statekit.query.start import start_query

    accepted = [f for f in SourceOptions.field_names()
                if f not in ("kafka", "max_offsets_per_trigger")]
    given = route(source_options, dict.fromkeys(accepted, "source"), "measure_record_cache")
    source = SourceOptions(kafka=kafka, **given.get("source", {}))

    sizes = [whole_number(s, "batch size", minimum=1) for s in batch_sizes]
    if not sizes:
        raise BadArgument("batch_sizes", batch_sizes, "one or more positive whole numbers")
    base = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix="statekit-rc-"))
    frames = []
    for size in sizes:
        query = start_query(
            topic, spec, spark=spark,
            source_options=replace(source, max_offsets_per_trigger=size),
            run=RunOptions(name=f"{name}-{size}", checkpoint=str(base / f"size-{size}"),
                           store_name="counts", trigger="100 milliseconds"))
        try:
            query.wait_until_drained(timeout)
            frame = write_coalescing(query.read_changelog(progress=False), query.progress())
        finally:
            query.close()
        frames.append(frame.assign(batch_size=size)[["batch_size", *COLUMNS]])
    return pd.concat(frames, ignore_index=True)
