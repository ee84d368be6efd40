"""Exercises of notebook 08 (monitoring a running query, state growth and TTL)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from statekit.workshop.answers import number
from statekit.workshop.choices import Choices
from statekit.workshop.registry import exercise, review
from statekit.workshop.verdict import Point

NOTEBOOK = "08_monitoring_growth_and_ttl"


@exercise("08.1", "How many rows does the running aggregate keep?", NOTEBOOK, "predict")
def running_rows(answer: object, *, events: int, per_user: int, rows: int, windowed: int = -1,
                 ttl: int = -1):
    """``rows``: the running query's last ``state_rows_total``; ``windowed`` and ``ttl`` the
    other two queries' (to name the confusion when the answer is theirs)."""
    value = number(answer)
    if value is None:
        return [Point(False, f"{answer!r} is not a number of rows")]
    if value == rows:
        return [Point(True, f"{rows:,} rows: one per user ({events:,} events / {per_user} per "
                            f"user), and none is ever removed: without a window nothing "
                            f"tells Spark a key is done")]
    if value == events:
        return [Point(False, f"{events:,} is one row per event; a store keeps one row per key "
                             f"(the user), updated in place")]
    if value == windowed:
        return [Point(False, f"{windowed:,} is what the windowed query holds at the end: its "
                             f"watermark evicts closed windows; the running aggregate has none")]
    if value == ttl:
        return [Point(False, f"{ttl:,} is what the TTL query holds: it forgets idle users; "
                             f"the running aggregate forgets nobody")]
    return [Point(False, f"{value:,.0f} is not it: count the distinct users in the input "
                         f"({events:,} events, a new user every {per_user})")]


STALLED = Choices(
    {"a": "the window is too long: a 1-hour window holds more keys than a 10-minute one",
     "b": "the watermark has not moved: no event newer than the latest one arrives (or, "
          "with two input streams, one is idle), so no window ever closes",
     "c": "the changelog is switched off (changelog=False), so state is never cleaned",
     "d": "the TTL is too long"},
    right="b",
    why={"a": "a longer window holds more rows at once, but they are still evicted once the "
              "watermark passes the window's end: that bounds it, and here nothing is removed",
         "b": "right: growth_warning says so ('the watermark has not moved for N batches'). "
              "Within one stream Spark's watermark is the latest event time seen (over all "
              "partitions) minus the delay, so late-but-within-delay events cannot move it; "
              "across input streams it takes the minimum "
              "(spark.sql.streaming.multipleWatermarkPolicy=min), so an idle stream holds "
              "it back",
         "c": "the changelog is statekit's copy for Kafka Streams' ideas; Spark evicts windows "
              "from its state store whatever statekit ships, and changelog=False does not "
              "change eviction",
         "d": "a windowed aggregation has no TTL: its rows go when the watermark passes the "
              "window's end"})


review("08.2", "Debug this: a windowed query whose state only grows", NOTEBOOK, STALLED,
       kind="debug")


#: The dashboard frame of exercise 08.3: column → what it holds.
DASHBOARD_COLUMNS = {
    "batch": "the batch id",
    "state_rows": "rows in the store after the batch (state_rows_total)",
    "rows_added": "state rows minus the previous batch's (the first batch: its state rows)",
    "cache_hit_ratio": "block cache hits / (hits + misses); NaN without block reads",
    "latency_ms": "the batch's duration (duration_ms)",
}


def dashboard_frame(progress: pd.DataFrame) -> pd.DataFrame:
    """The solution of exercise 08.3, from ``query.progress()``."""
    hits = progress["rocksdbReadBlockCacheHitCount"].fillna(0).astype(float)
    reads = hits + progress["rocksdbReadBlockCacheMissCount"].fillna(0).astype(float)
    rows = progress["state_rows_total"].astype("int64")
    return pd.DataFrame({
        "batch": progress["batch"].astype("int64"),
        "state_rows": rows,
        "rows_added": rows.diff().fillna(rows.iloc[0] if len(rows) else 0).astype("int64"),
        "cache_hit_ratio": hits / reads.where(reads > 0),
        "latency_ms": progress["duration_ms"].astype(float),
    }).reset_index(drop=True)


@exercise("08.3", "Build a monitoring dashboard's numbers", NOTEBOOK, "build")
def dashboard_numbers(answer: object, *, progress: pd.DataFrame):
    """``answer``: a frame with ``DASHBOARD_COLUMNS``, one row per batch of ``progress``."""
    if not isinstance(answer, pd.DataFrame):
        return [Point(False, f"expected a pandas DataFrame, got {type(answer).__name__}")]
    expected = dashboard_frame(progress)
    missing = [c for c in DASHBOARD_COLUMNS if c not in answer.columns]
    points = []
    if missing:
        points.append(Point(False, "missing column(s): " + ", ".join(
            f"{c} ({DASHBOARD_COLUMNS[c]})" for c in missing)))
    if "batch" in answer.columns:
        got = answer.sort_values("batch").reset_index(drop=True)
    else:
        got = answer.reset_index(drop=True)
    if len(got) != len(expected):
        points.append(Point(False, f"{len(got)} rows; the query ran {len(expected)} batches "
                                   f"(one row per batch)"))
        return points
    for column, meaning in DASHBOARD_COLUMNS.items():
        if column in missing:
            continue
        want = expected[column].to_numpy(dtype=float)
        try:
            have = pd.to_numeric(got[column]).to_numpy(dtype=float)
        except (TypeError, ValueError):
            points.append(Point(False, f"{column}: not numbers"))
            continue
        same = np.allclose(have, want, rtol=1e-6, equal_nan=True)
        if same:
            points.append(Point(True, f"{column}: {meaning}"))
        elif column == "rows_added" and np.allclose(have[1:], want[1:], equal_nan=True):
            points.append(Point(False, "rows_added: right from the second batch on; the first "
                                       "batch added all its state rows (fillna with them)"))
        elif column == "cache_hit_ratio" and np.allclose(np.nan_to_num(have),
                                                         np.nan_to_num(want)):
            points.append(Point(False, "cache_hit_ratio: a batch with no block reads has no "
                                       "ratio: NaN, not 0 (a 0 would read as 'every read "
                                       "missed')"))
        else:
            bad = int(np.flatnonzero(~np.isclose(have, want, equal_nan=True))[0])
            points.append(Point(False, f"{column}: batch {int(expected['batch'][bad])} has "
                                       f"{have[bad]:g}, the progress says {want[bad]:g} "
                                       f"({meaning})"))
    return points


UNBOUNDED = Choices(
    {"a": "add shuffle partitions, so that each state store instance holds fewer keys",
     "b": "bound it: aggregate per window with a watermark (closed windows are evicted) or "
          "give each key a TTL (in Spark: transformWithState's TTL) so idle keys are removed",
     "c": "switch the changelog off (changelog=False)",
     "d": "give RocksDB a bigger block cache "
          "(spark.sql.streaming.stateStore.rocksdb.blockCacheSizeMB)"},
    right="b",
    why={"a": "more partitions spread the same rows over more instances; the total still grows "
              "with every key (and partitions are fixed by the checkpoint once it exists)",
         "b": "right: growth stops only when rows are removed — a watermark evicting windows, "
              "or a TTL; then watch state_rows_total and state_rows_removed in the progress",
         "c": "the changelog is statekit's Kafka copy of the changes; Spark's own state "
              "(in its checkpoint) grows exactly the same without it",
         "d": "a cache holds copies of blocks for faster reads; the store underneath still "
              "grows"})


review("08.4", "Review: a state store that grows without bound", NOTEBOOK, UNBOUNDED)


TTL_CLOCK = Choices(
    {"a": "10 minutes of event time pass without an event for the key (the watermark)",
     "b": "10 minutes of processing time pass since the key's state was last written",
     "c": "10 minutes after the key first entered the store, updates or not",
     "d": "Kafka deletes the key's changelog records (retention.ms)"},
    right="b",
    why={"a": "that is how windows end (watermark); Spark's state TTL is not event time",
         "b": "right: transformWithState's TTL counts processing time (the batch's timestamp) "
              "and restarts whenever the value is updated, so a key that keeps getting events "
              "stays",
         "c": "each update resets the TTL: an active key is never expired",
         "d": "Spark never reads the changelog topic (statekit ships it for the Kafka Streams "
              "ideas); its state and its TTL live in the checkpoint's state store"})


review("08.5", "Review: which clock does ttl='10 minutes' follow?", NOTEBOOK, TTL_CLOCK)


SOURCE_TOMBSTONE = Choices(
    {"a": "it deletes the user's row, as a KTable's store deletes a key on a tombstone",
     "b": "it counts the record as malformed (its value is no JSON object) and keeps the "
          "user's row: a Spark aggregation reads events and has no delete",
     "c": "it fails the query",
     "d": "it writes a tombstone to statekit's changelog topic, and the row goes at the next "
          "compaction"},
    right="b",
    why={"a": "that is Kafka Streams' KTable; Spark has no table source: a streaming "
              "aggregation only adds events into its buffers, and no input removes a key",
         "b": "right: the running query's malformed() lists the tombstones ('not a JSON "
              "object') and its state rows keep growing; a transformWithState processor that "
              "reads the Kafka key and sees the null value (table_stream) can delete",
         "c": "statekit keeps bad records aside and counts them; nothing fails",
         "d": "the changelog records what the state did; Spark's state kept the row, so "
              "nothing is written for it"})

review("08.6", "Review: a tombstone in the source of a Spark aggregation", NOTEBOOK,
       SOURCE_TOMBSTONE)


CLEANUP_VS_TTL = Choices(
    {"a": "the TTL: it is inside the operator and costs no scan; but it counts processing "
          "time since the last write",
     "b": "the clean-up job: it can delete by event time (or any rule, or by another "
          "system's decision) from one place, at the cost of a scan of the store and a round "
          "trip through Kafka per pass, and keys live until the batch after the pass",
     "c": "neither: only a window with a watermark removes state in Spark",
     "d": "the TTL, because it also deletes the key's changelog records"},
    right="b",
    why={"a": "a TTL would remove idle users too, but by processing time: a replay of a "
              "day's events in a minute expires nothing, and 'idle for an hour of event "
              "time' cannot be said with it",
         "b": "right: the job's rule was 'newest event more than a minute of event time "
              "behind the newest in the store'; the chart shows what it costs: the rows "
              "drop only after each pass, one batch late",
         "c": "the TTL run and the clean-up job both removed rows without a window",
         "d": "Spark's TTL acts on its own state store; statekit's changelog only mirrors it"})

review("08.7", "Review: idle users gone by event time — TTL or clean-up job?", NOTEBOOK,
       CLEANUP_VS_TTL)
