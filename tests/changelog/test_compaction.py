"""Kafka log compaction of a changelog, modelled in pandas: which records survive."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from helpers.changelogs import T0, log, synthetic_changelog

from statekit.changelog.compaction import compact, compaction_stats, upto_batch
from statekit.changelog.log import Changelog, materialize, records_of
from statekit.errors import BadArgument


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
