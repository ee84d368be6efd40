"""The same query on both engines, row by row: statekit on Spark and the reference Kafka
Streams application, reading one topic with one ``QuerySpec``.

Where both hold a (key, window), the values must be equal. Where only one holds it, the engines
differ by design, and the comparison says which way:

- **only in Kafka Streams**: a window Spark has evicted, still in Kafka Streams' record cache.
  Spark removes a window's state once the watermark passes its end. Kafka Streams' window store
  answers for a window while it starts after the task's stream time minus the store's
  retention (the window size plus the grace: ``AbstractRocksDBSegmentedBytesStore``), the same
  windows as Spark when the grace equals the watermark's delay; but with the record cache on,
  an interactive query also reads the cache (``CachingWindowStore.all``), which keeps the
  flushed updates of windows past the retention. With ``cache_max_bytes=0`` both hold the same
  (key, window), measured;
- **only on Spark**: a window Kafka Streams has not written yet, or dropped (an event later
  than the grace: Kafka Streams drops it record by record, Spark at the batch's watermark).

The changelog each engine wrote is counted too: Kafka Streams writes one record per update
that leaves its record cache (every update with the cache at 0; fewer with a cache, flushed at
each commit), statekit one per key per micro-batch.

And where each engine keeps the same (key, window): Spark hashes the grouping values with
murmur3 into its shuffle partitions, the window first (``statekit.serve.routing.placement``), so
one key's windows spread over the partitions; Kafka Streams hashes the key's bytes with murmur2
into the repartition topic's partitions, the window left out, so all of a key's windows live in
one partition and one instance answers for them.

Example:
    >>> both = side_by_side(query, app)          # doctest: +SKIP
    >>> both.agrees, both.counts                 # doctest: +SKIP
    (True, {'both': 120, 'only in Kafka Streams': 359, 'only on Spark': 0, 'values differ': 0})
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from statekit.errors import BadArgument
from statekit.model.query_spec import QuerySpec
from statekit.reference.aggregates import rows_differing

KAFKA_STREAMS_ONLY, SPARK_ONLY, DIFFER, BOTH = ("only in Kafka Streams", "only on Spark",
                                                 "values differ", "both")
_WHERE = {"store only": KAFKA_STREAMS_ONLY, "expected only": SPARK_ONLY,
          "values differ": DIFFER}


@dataclass
class SideBySide:
    """Spark's and Kafka Streams' store of one ``spec``: ``spark`` and ``kafka_streams`` (the
    two snapshots, in the spec's columns and each row's ``partition``), ``differences`` (one
    row per (key, window) not held alike, ``where`` saying how), ``changelog_records`` per
    engine; ``placement()`` where each engine keeps a key's windows."""

    spec: QuerySpec
    spark: pd.DataFrame
    kafka_streams: pd.DataFrame
    differences: pd.DataFrame
    changelog_records: dict[str, int] = field(default_factory=dict)

    def placement(self) -> pd.DataFrame:
        """Per group key (the spec's keys, the window left out): how many partitions hold its
        windows on each engine, over the (key, window) both hold."""
        keys, columns = list(self.spec.keys), list(self.spec.key_columns)
        held = self.spark[[*columns, "partition"]].merge(
            self.kafka_streams[[*columns, "partition"]], on=columns,
            suffixes=("_spark", "_kafka_streams"))
        return (held.groupby(keys)
                .agg(windows=("partition_spark", "size"),
                     spark_partitions=("partition_spark", "nunique"),
                     kafka_streams_partitions=("partition_kafka_streams", "nunique"))
                .reset_index())

    def held(self) -> pd.DataFrame:
        """Every (key, window) either engine holds, once: its key columns, ``where`` (``both``,
        ``only in Kafka Streams``, ``only on Spark``) and the partition each engine keeps it
        in (``partition_spark``, ``partition_kafka_streams``; <NA> where it holds none)."""
        columns = list(self.spec.key_columns)
        merged = self.spark[[*columns, "partition"]].merge(
            self.kafka_streams[[*columns, "partition"]], on=columns, how="outer",
            suffixes=("_spark", "_kafka_streams"), indicator="where")
        merged["where"] = merged["where"].astype(str).map(
            {"both": BOTH, "left_only": SPARK_ONLY, "right_only": KAFKA_STREAMS_ONLY})
        for column in ("partition_spark", "partition_kafka_streams"):
            merged[column] = merged[column].astype("Int64")
        return merged.sort_values(columns, ignore_index=True)

    @property
    def counts(self) -> dict[str, int]:
        """How many (key, window) both hold with equal values, and how many not alike."""
        where = self.differences["where"].value_counts()
        keys = list(self.spec.key_columns)
        held = len(self.spark[keys].merge(self.kafka_streams[keys], on=keys))
        return {BOTH: held - int(where.get(DIFFER, 0)),
                **{name: int(where.get(name, 0)) for name in (KAFKA_STREAMS_ONLY, SPARK_ONLY,
                                                             DIFFER)}}

    @property
    def agrees(self) -> bool:
        """No (key, window) held by both with other values, none held by Spark alone (Kafka
        Streams answering for more is its record cache, not a disagreement)."""
        counts = self.counts
        return counts[DIFFER] == 0 and counts[SPARK_ONLY] == 0

    def summary(self) -> str:
        counts = self.counts
        logs = ", ".join(f"{engine} {n:,}" for engine, n in self.changelog_records.items())
        return (f"{counts[BOTH]} (key, window) held by both with equal values"
                f"{'' if counts[DIFFER] == 0 else f', {counts[DIFFER]} with other values'}; "
                f"{counts[KAFKA_STREAMS_ONLY]} only in Kafka Streams (closed windows still in its "
                f"record cache, Spark evicted at the watermark); "
                f"{counts[SPARK_ONLY]} only on Spark"
                + (f"; changelog records written: {logs}" if logs else ""))


def require_same_spec(spark_query, spec: QuerySpec) -> None:
    """Refuse ``spark_query`` unless it computes ``spec`` (the same keys, window and
    aggregates): the engines are compared on one query."""
    own = getattr(spark_query, "spec", None)
    if own is not None and (own.keys, own.window, own.aggregates) != (
            spec.keys, spec.window, spec.aggregates):
        raise BadArgument("spark_query", spark_query,
                          f"a query of the app's spec (keys {spec.keys}, window "
                          f"{spec.window}, aggregates {[a.text for a in spec.aggregates]})")


def side_by_side(spark_query, app, *, changelogs: bool = True) -> SideBySide:
    """Compare a statekit query on Spark (``spark_query``, e.g. ``start_query``'s) with the
    reference Kafka Streams application (``app``, ``statekit.kafka_streams.start``'s) of the
    same spec; both should have read the same input (``wait_until_drained`` /
    ``wait_until_consumed``). ``changelogs``: count each engine's changelog records too."""
    spec = getattr(app, "spec", None)
    if not isinstance(spec, QuerySpec):
        raise BadArgument("app", app, "a running reference Kafka Streams application "
                          "(statekit.kafka_streams.start)")
    require_same_spec(spark_query, spec)
    columns = [*spec.key_columns, *spec.value_columns, "partition"]
    spark = spark_query.snapshot()[columns].reset_index(drop=True)
    streams = app.snapshot()[columns].reset_index(drop=True)
    values = columns[:-1]
    differing = rows_differing(streams[values], spark[values], spec.key_columns)
    differing = differing.assign(where=differing["where"].map(_WHERE))
    records = {}
    if changelogs:
        # statekit ships a batch's changelog after Spark commits it: count every batch's
        shipping = getattr(spark_query, "changelog", None)
        if shipping is not None and getattr(spark_query, "last_batch", -1) >= 0:
            shipping.wait_shipped(spark_query.last_batch)
        records = {"Spark (statekit)": len(spark_query.read_changelog()),
                   "Kafka Streams": len(app.read_changelog())}
    return SideBySide(spec, spark, streams, differing, records)
