"""Kafka log compaction of a changelog, modelled in pandas: which records survive."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from statekit.changelog.compaction import compact, compaction_stats, upto_batch
from statekit.changelog.log import Changelog, materialize, records_of
from statekit.errors import BadArgument

T0 = pd.Timestamp("2026-01-05 10:00")
KEY_COLUMNS = ["player", "window_start", "window_end"]
VALUE_COLUMNS = ["count", "sum_score", "max_score"]


def synthetic_changelog(batches: int = 12, players: int = 6, partitions: int = 3,
                        batches_per_window: int = 4, p_update: float = 0.6,
                        seed: int = 0) -> Changelog:
    """A changelog shaped like the reader's: a tumbling-window count/sum/max per player.

    Each batch (trigger every 30 s) updates a random subset of players' current window;
    when a new window starts, every key of the previous window gets a tombstone (the
    watermark evicted it). Player ``i`` lives in partition ``i % partitions``.
    About ``batches * players * p_update`` records (1M for 2000, 1000, 0.45, 20).
    """
    rng = np.random.default_rng(seed)
    window = pd.Timedelta(minutes=10)
    updated = rng.random((batches, players)) < p_update
    b_put, p_put = np.nonzero(updated)
    w_put = b_put // batches_per_window
    # tombstones: at the first batch of window w, for every key of window w - 1 that was put
    seen = np.zeros((batches // batches_per_window + 1, players), dtype=bool)
    seen[w_put, p_put] = True
    w_dead, p_dead = np.nonzero(seen[:-1])
    b_dead = (w_dead + 1) * batches_per_window
    alive = b_dead < batches
    w_dead, p_dead, b_dead = w_dead[alive], p_dead[alive], b_dead[alive]
    frame = pd.DataFrame({
        "batch": np.r_[b_dead, b_put].astype("int64"),
        "p": np.r_[p_dead, p_put],
        "w": np.r_[w_dead, w_put],
        "tombstone": np.r_[np.ones(len(b_dead), bool), np.zeros(len(b_put), bool)],
    })
    frame["partition"] = (frame["p"] % partitions).astype("int32")
    # in a batch: tombstones of evicted windows first, then the puts, each in key order
    frame = frame.sort_values(["partition", "batch", "tombstone", "p", "w"],
                              ascending=[True, True, False, True, True], kind="stable")
    frame = frame.reset_index(drop=True)
    frame["offset"] = frame.groupby("partition").cumcount().astype("int64")
    frame["seq"] = frame.groupby(["partition", "batch"]).cumcount().astype("int64")
    frame["timestamp"] = (T0 + pd.to_timedelta(frame["batch"] * 30, unit="s")).astype(
        "datetime64[ns]")
    names = np.array([f"p{i:04d}" for i in range(players)], dtype=object)
    starts = [T0 + window * i for i in range(seen.shape[0])]
    iso = [s.strftime("%Y-%m-%dT%H:%M:%S.000Z") for s in starts]
    iso_end = [(s + window).strftime("%Y-%m-%dT%H:%M:%S.000Z") for s in starts]
    ids = frame["p"].to_numpy() * seen.shape[0] + frame["w"].to_numpy()
    uniq, inverse = np.unique(ids, return_inverse=True)
    texts = np.array([f'{{"player":"{names[u // seen.shape[0]]}",'
                      f'"window_start":"{iso[u % seen.shape[0]]}",'
                      f'"window_end":"{iso_end[u % seen.shape[0]]}"}}' for u in uniq],
                     dtype=object)
    frame["key"] = texts[inverse]
    frame["player"] = names[frame["p"].to_numpy()]
    frame["window_start"] = (T0 + window * frame["w"]).astype("datetime64[ns]")
    frame["window_end"] = frame["window_start"] + window
    score = pd.Series(rng.integers(0, 100, len(frame)), index=frame.index)
    puts = ~frame["tombstone"]
    by_key = frame.loc[puts, "key"]
    counts = puts[puts].groupby(by_key).cumsum()
    sums = score[puts].groupby(by_key).cumsum()
    maxes = score[puts].groupby(by_key).cummax()
    for name, values in (("count", counts), ("sum_score", sums), ("max_score", maxes)):
        frame[name] = pd.array([pd.NA] * len(frame), dtype="Int64")
        frame.loc[puts, name] = values.astype("int64")
    frame = frame[["partition", "offset", "timestamp", "batch", "seq", "tombstone", "key",
                   *KEY_COLUMNS, *VALUE_COLUMNS]]
    return Changelog(frame, "leaderboard-counts-changelog", KEY_COLUMNS, VALUE_COLUMNS,
                     int(frame["batch"].max()))


def log(rows: list[tuple]) -> pd.DataFrame:
    """A hand-written one-partition-or-more log: (partition, offset, minute, key, tombstone)."""
    frame = pd.DataFrame(rows, columns=["partition", "offset", "minute", "key", "tombstone"])
    frame["timestamp"] = (T0 + pd.to_timedelta(frame.pop("minute"), unit="min")).astype(
        "datetime64[ns]")
    frame["partition"] = frame["partition"].astype("int32")
    frame["offset"] = frame["offset"].astype("int64")
    frame["batch"] = frame["timestamp"].rank(method="dense").astype("int64") - 1
    frame["count"] = pd.array([None if t else 1 for t in frame["tombstone"]], dtype="Int64")
    return frame


def offsets(frame, partition: int = 0) -> list[int]:
    records = records_of(frame)
    return records.loc[records["partition"] == partition, "offset"].tolist()


# --- compact: which records survive ---------------------------------------------------------
def test_only_the_latest_record_per_key_survives_and_offsets_are_kept():
    raw = log([(0, 0, 0, "a", False), (0, 1, 0, "b", False), (0, 2, 1, "a", False),
               (0, 3, 1, "c", False), (0, 4, 2, "a", False), (0, 5, 2, "b", False)])
    out = compact(raw)
    assert offsets(out) == [3, 4, 5]
    assert out["key"].tolist() == ["c", "a", "b"]
    assert list(out.columns) == list(raw.columns)
    assert isinstance(out, pd.DataFrame)  # a frame in, a frame out
    assert out.dtypes.equals(raw.dtypes)
    assert len(raw) == 6  # the input is not modified


def test_keys_are_compacted_within_their_own_partition():
    raw = log([(0, 0, 0, "a", False), (0, 1, 1, "a", False),
               (1, 0, 0, "a", False), (1, 1, 0, "b", False)])
    out = compact(raw)
    assert offsets(out, 0) == [1]
    assert offsets(out, 1) == [0, 1]


def test_a_tombstone_removes_the_key_s_older_records_and_stays_within_delete_retention():
    raw = log([(0, 0, 0, "a", False), (0, 1, 1, "a", False), (0, 2, 2, "a", True),
               (0, 3, 2, "b", False)])
    out = compact(raw)  # now = minute 2: the tombstone is brand new
    assert offsets(out) == [2, 3]
    assert out["tombstone"].tolist() == [True, False]


def test_tombstones_older_than_delete_retention_are_dropped():
    raw = log([(0, 0, 0, "a", False), (0, 1, 1, "a", True), (0, 2, 5, "b", True),
               (0, 3, 10, "c", False)])
    # now = minute 10: a's tombstone is 9 minutes old, b's 5 minutes old
    out = compact(raw, delete_retention_ms=6 * 60_000)
    assert offsets(out) == [2, 3]
    out = compact(raw, delete_retention_ms=4 * 60_000)
    assert offsets(out) == [3]
    # exactly at the limit it is kept ("older than", strictly)
    out = compact(raw, delete_retention_ms=5 * 60_000)
    assert offsets(out) == [2, 3]
    # default: one day: every tombstone is still there
    assert compact(raw)["tombstone"].sum() == 2


def test_now_defaults_to_the_latest_timestamp_and_can_be_given():
    raw = log([(0, 0, 0, "a", True), (0, 1, 1, "b", False)])
    assert offsets(compact(raw, delete_retention_ms=60_000)) == [0, 1]   # 1 min old: kept
    later = T0 + pd.Timedelta(minutes=5)
    assert offsets(compact(raw, now=later, delete_retention_ms=60_000)) == [1]
    assert offsets(compact(raw, now="2026-01-05T10:05:00Z", delete_retention_ms=60_000)) == [1]


def test_min_compaction_lag_keeps_the_head_uncompacted():
    raw = log([(0, 0, 0, "a", False), (0, 1, 1, "a", False), (0, 2, 5, "a", False),
               (0, 3, 6, "a", False), (0, 4, 9, "a", False), (0, 5, 10, "a", False)])
    # now = minute 10; lag 5 min: records newer than minute 5 (offset 3 on) are the head
    out = compact(raw, min_compaction_lag_ms=5 * 60_000)
    # in the compactable prefix (offsets 0-2) only the latest a survives; a later "a"
    # in the head does not remove it (the cleaner's map stops at the head)
    assert offsets(out) == [2, 3, 4, 5]
    assert offsets(compact(raw)) == [5]


def test_head_starts_at_the_first_young_record_even_if_an_older_one_follows():
    raw = log([(0, 0, 0, "a", False), (0, 1, 8, "a", False), (0, 2, 1, "a", False),
               (0, 3, 10, "b", False)])
    out = compact(raw, min_compaction_lag_ms=5 * 60_000)
    assert offsets(out) == [0, 1, 2, 3]


def test_tombstones_in_the_head_are_never_dropped():
    raw = log([(0, 0, 0, "a", False), (0, 1, 9, "a", True), (0, 2, 10, "b", False)])
    out = compact(raw, now=T0 + pd.Timedelta(minutes=10), min_compaction_lag_ms=2 * 60_000,
                  delete_retention_ms=0)
    assert offsets(out) == [0, 1, 2]
    out = compact(raw, now=T0 + pd.Timedelta(minutes=10), delete_retention_ms=0)
    assert offsets(out) == [2]


def test_time_retention_deletes_the_oldest_records_of_a_compact_delete_topic():
    raw = log([(0, 0, 0, "a", False), (0, 1, 1, "b", False), (0, 2, 5, "c", False),
               (0, 3, 10, "a", False)])
    out = compact(raw, retention_ms=6 * 60_000)   # minutes 0 and 1 are past retention
    assert offsets(out) == [2, 3]


def test_unsorted_input_is_taken_in_offset_order():
    raw = log([(0, 0, 0, "a", False), (0, 1, 1, "a", False), (1, 0, 0, "b", False)])
    shuffled = raw.iloc[[2, 1, 0]]
    out = compact(shuffled)
    assert out[["partition", "offset"]].values.tolist() == [[0, 1], [1, 0]]


def test_empty_changelog_compacts_to_empty():
    raw = log([(0, 0, 0, "a", False)]).iloc[0:0]
    out = compact(raw)
    assert out.empty and list(out.columns) == list(raw.columns)


def test_synthetic_changelog_keeps_exactly_one_record_per_key():
    raw = synthetic_changelog(batches=40, players=20, partitions=3)
    out = compact(raw)
    assert isinstance(out, Changelog)  # a Changelog in, a Changelog out: same topic, columns
    assert (out.topic, out.key_columns, out.value_columns, out.last_batch) == (
        raw.topic, raw.key_columns, raw.value_columns, raw.last_batch)
    kept, records = out.records, raw.records
    assert len(kept) == records.groupby(["partition", "key"]).ngroups
    latest = records.groupby(["partition", "key"])["offset"].max().sort_index()
    assert kept.set_index(["partition", "key"])["offset"].sort_index().equals(latest)
    # the reader's ordering is preserved
    assert kept.equals(kept.sort_values(["partition", "offset"]).reset_index(drop=True))
    # and what compaction keeps still describes the same table
    pd.testing.assert_frame_equal(materialize(out), materialize(raw))


def test_synthetic_changelog_has_the_reader_shape():
    raw = synthetic_changelog().records
    assert raw["partition"].dtype == "int32" and raw["offset"].dtype == "int64"
    assert raw["timestamp"].dtype == "datetime64[ns]" and raw["count"].dtype == "Int64"
    assert raw.loc[raw["tombstone"], "count"].isna().all()
    assert raw.groupby("partition")["offset"].apply(lambda s: (s.diff().dropna() == 1).all()).all()


# --- upto_batch ------------------------------------------------------------------------------
def test_upto_batch_keeps_the_batches_so_far():
    raw = synthetic_changelog(batches=10)
    first = upto_batch(raw, np.int64(3))  # a batch id read out of a frame
    assert first.records["batch"].max() == 3
    assert len(first) == (raw.records["batch"] <= 3).sum()
    assert first.value_columns == raw.value_columns and first.last_batch == raw.last_batch
    assert upto_batch(raw.records, 0)["batch"].max() == 0
    for bad in ("3", 3.0, True, -1):
        with pytest.raises(BadArgument, match="batch"):
            upto_batch(raw, bad)


# --- stats -----------------------------------------------------------------------------------
def test_compaction_stats_per_partition():
    raw = log([(0, 0, 0, "a", False), (0, 1, 1, "a", False), (0, 2, 2, "b", True),
               (0, 3, 3, "a", False), (1, 0, 0, "c", False), (1, 1, 3, "d", True)])
    out = compact(raw)
    stats = compaction_stats(raw, out)
    assert stats.to_dict("list") == {
        "partition": [0, 1], "records_before": [4, 2], "records_after": [2, 2],
        "keys": [2, 2], "tombstones_before": [1, 1], "tombstones_after": [1, 1],
        "ratio": [0.5, 1.0]}


def test_compaction_stats_counts_a_partition_emptied_by_compaction():
    raw = log([(0, 0, 0, "a", False), (1, 0, 0, "b", False), (1, 1, 1, "b", True)])
    out = compact(raw, now=T0 + pd.Timedelta(days=2))
    stats = compaction_stats(raw, out).set_index("partition")
    assert stats.loc[1, "records_after"] == 0 and stats.loc[1, "ratio"] == 0.0
    assert stats.loc[0, "ratio"] == 1.0


# --- bad input -------------------------------------------------------------------------------
def test_missing_column_is_named_with_the_columns_accepted():
    raw = log([(0, 0, 0, "a", False)]).drop(columns="key")
    with pytest.raises(BadArgument, match="missing column 'key'") as err:
        compact(raw)
    assert "partition, offset, timestamp, key, tombstone" in str(err.value)
    with pytest.raises(BadArgument, match="missing column 'batch'"):
        upto_batch(raw.drop(columns="batch"), 1)
    with pytest.raises(BadArgument, match="missing column 'tombstone'"):
        compaction_stats(raw.assign(key="a").drop(columns="tombstone"), raw)


@pytest.mark.parametrize("option", ["delete_retention_ms", "min_compaction_lag_ms",
                                    "retention_ms"])
def test_negative_durations_are_refused(option):
    raw = log([(0, 0, 0, "a", False)])
    with pytest.raises(BadArgument, match=option):
        compact(raw, **{option: -1})


def test_not_a_frame_is_refused():
    with pytest.raises(BadArgument, match="a Changelog .* or its records frame"):
        compact([1, 2, 3])
