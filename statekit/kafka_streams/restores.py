"""How each engine restores the same state, side by side and timed: Kafka Streams' restore
consumer, Spark's snapshot and delta files, statekit's restore of its changelog topic.

- **Kafka Streams** keeps its store's changelog topic itself. An instance that starts with an
  empty state directory reads the changelog with its *restore consumer*, from the first
  offset to the end, into RocksDB, before it processes a record; its
  ``StateRestoreListener`` reports each partition's records and time (``app.restores()``).
- **Spark** writes no changelog topic. A restarted query's task loads its partition from the
  checkpoint: the newest snapshot zip, then every delta file (``N.changelog``) after it
  (``statekit.spark_state.spark_files.restore_plan``). Spark's own state reader makes the
  same load; statekit times it reading the last batch into pandas.
- **statekit** ships a Kafka changelog for Spark's store and rebuilds local rocksdict stores
  from it (``statekit.restore.restore_stores``), as Kafka Streams' restore consumer does.

``compare_restores`` runs all three on one spec's state and checks what each restored holds
what it held before.

Example:
    >>> restored = compare_restores(query, app, workdir="/tmp/restores")  # doctest: +SKIP
    >>> restored.table[["engine", "records", "files", "seconds", "rows"]]  # doctest: +SKIP
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd

from statekit.errors import BadArgument
from statekit.kafka_streams.comparison import require_same_spec
from statekit.restore.rebuild import restore_stores
from statekit.restore.result import wall_seconds
from statekit.spark_state.spark_files import restore_plan, state_files

TABLE_COLUMNS = ["engine", "how", "records", "files", "seconds", "rows", "equal"]
KAFKA_STREAMS, SPARK, STATEKIT = ("Kafka Streams", "Spark", "statekit")


@dataclass
class RestoreComparison:
    """``table``: one row per engine (``TABLE_COLUMNS``: how it restores, the changelog
    records or checkpoint files it read, wall seconds, the rows restored, and whether they
    equal the state before: for Kafka Streams its store before, for statekit Spark's store,
    for Spark ``<NA>``, itself the reference); ``kafka_streams``: the fresh instance's
    ``restores()``, per partition; ``spark_plan``: ``restore_plan``, per partition, the
    snapshot and delta files."""

    table: pd.DataFrame
    kafka_streams: pd.DataFrame
    spark_plan: pd.DataFrame

    @property
    def agrees(self) -> bool:
        """Whether Kafka Streams restored exactly what its store held, and statekit exactly
        what Spark's store holds (Spark's load is the reference)."""
        return bool(self.table["equal"].fillna(True).all())


def _same(restored: pd.DataFrame, before: pd.DataFrame, columns: list[str]) -> bool:
    def tidy(frame: pd.DataFrame) -> pd.DataFrame:
        return frame[columns].sort_values(columns).reset_index(drop=True)
    return len(restored) == len(before) and tidy(restored).equals(tidy(before))


def restore_kafka_streams(app, state_dir: str | os.PathLike, timeout: float = 120.0
                          ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Start one instance of ``app``'s application (closed first: the group must be free) on
    the empty ``state_dir``, wait until it has restored every changelog partition, and give
    its ``restores()`` and its store's snapshot; the instance is closed after."""
    from statekit.kafka_streams.app import start

    fresh = replace(app.options, application_id=app.application_id, state_dir=state_dir)
    with start(app.topic, app.spec, kafka=app.kafka, instances=1, standbys=0,
               cache_max_bytes=app.cache_max_bytes, options=fresh, timeout=timeout) as again:
        restores = again.wait_until_restored(timeout)
        return restores, again.snapshot(sort=True)


def compare_restores(spark_query, app, *, workdir: str | os.PathLike,
                     timeout: float = 120.0) -> RestoreComparison:
    """Restore the same spec's state three ways and time each (see the module's text).

    ``spark_query``: a statekit query of ``app``'s spec that shipped its changelog
    (``start_query(..., kafka=...)``), drained; ``app``: the running reference Kafka Streams
    application (``statekit.kafka_streams.start``), its input consumed. The app is
    **closed** here (its store read first): a fresh instance of its application id then
    restores from the changelog, alone in the group. ``workdir``: a folder for the restored
    stores.
    """
    writer = getattr(spark_query, "changelog", None)
    if writer is None or not hasattr(writer, "topic"):
        raise BadArgument("spark_query", spark_query,
                          "a statekit query that ships its changelog (start_query(..., "
                          "kafka=...), logging on)")
    spec = getattr(app, "spec", None)
    if spec is None or not hasattr(app, "restores"):
        raise BadArgument("app", app, "a running reference Kafka Streams application "
                          "(statekit.kafka_streams.start)")
    require_same_spec(spark_query, spec)
    if not app.is_active:
        raise BadArgument("app", app, "a running app: its store is read before it is closed "
                          "and restored")
    work = Path(workdir)
    columns = [*spec.key_columns, *spec.value_columns]

    streams_before = app.snapshot(sort=True)
    app.close()
    restores, streams_after = restore_kafka_streams(app, work / "kafka-streams", timeout)

    plan = restore_plan(state_files(spark_query.checkpoint))
    started = time.perf_counter()
    spark_after = spark_query.snapshot()
    spark_seconds = time.perf_counter() - started

    with restore_stores(writer.kafka, writer.topic, spark_query.spec,
                        str(work / "statekit")) as rebuilt:
        statekit_after = rebuilt.table()
        statekit_records = int(rebuilt.report["records"].sum())
        statekit_seconds = rebuilt.wall_seconds

    files = int(plan["snapshot_version"].notna().sum() + plan["delta_files"].sum())
    rows = [
        (KAFKA_STREAMS, "a fresh instance's restore consumer reads the store's changelog topic "
         "into RocksDB", int(restores["records"].sum()), pd.NA, wall_seconds(restores),
         len(streams_after), _same(streams_after, streams_before, columns)),
        (SPARK, "each partition's task loads the newest snapshot zip and replays the delta "
         "files after it", pd.NA, files, spark_seconds, len(spark_after), pd.NA),
        (STATEKIT, "restore_stores reads statekit's changelog topic into rocksdict stores",
         statekit_records, pd.NA, statekit_seconds, len(statekit_after),
         _same(statekit_after, spark_after, columns)),
    ]
    table = pd.DataFrame(rows, columns=TABLE_COLUMNS).astype(
        {"records": "Int64", "files": "Int64", "equal": "boolean"})
    return RestoreComparison(table, restores, plan)
