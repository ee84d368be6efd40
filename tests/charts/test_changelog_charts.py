"""Charts of a changelog and of its compaction, and the batch scrubber widget (headless)."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from helpers.changelogs import T0, log, synthetic_changelog
from helpers.chartspec import marks, rows

from statekit.changelog.compaction import compact, compaction_stats, upto_batch
from statekit.charts.changelog import (
    compaction_stats_chart,
    key_history_chart,
    log_vs_compacted_chart,
    state_files_chart,
)
from statekit.errors import BadArgument
from statekit.widgets.scrubber import ChangelogScrubber


@pytest.fixture(scope="module")
def changelog():
    return synthetic_changelog(batches=24, players=9, partitions=3)


@pytest.fixture(scope="module")
def raw(changelog) -> pd.DataFrame:
    """The records frame alone: charts take it as well as a Changelog."""
    return changelog.records


# --- (a) raw log next to the compacted log --------------------------------------------------
def test_detail_view_has_one_point_per_record_of_each_view(raw):
    kept = compact(raw)
    spec = log_vs_compacted_chart(raw, kept).to_dict()
    data = pd.DataFrame(rows(spec))
    assert len(data) == len(raw) + len(kept)
    assert (data["view"] == "raw log").sum() == len(raw)
    assert (data["view"] == "compacted").sum() == len(kept)
    compacted_points = data[data["view"] == "compacted"]
    assert sorted(map(tuple, compacted_points[["partition", "offset"]].values)) == \
        sorted(map(tuple, kept[["partition", "offset"]].values))
    assert (data["record"] == "tombstone").sum() == raw["tombstone"].sum() + kept["tombstone"].sum()
    assert spec["facet"]["column"]["sort"] == ["raw log", "compacted"]
    assert spec["facet"]["row"]["field"] == "partition"
    assert marks(spec) == ["point"]
    # a key sits on the same line in both views
    lines = data.groupby(["partition", "key"])["key_row"].nunique()
    assert (lines == 1).all()


def test_detail_view_is_not_stopped_by_altair_row_limit():
    big = synthetic_changelog(batches=60, players=100, partitions=2, p_update=0.75)
    assert 5000 < len(big) < 6000
    spec = log_vs_compacted_chart(big, compact(big), max_points=6000).to_dict()
    assert len(rows(spec)) == len(big) + len(compact(big))


def test_binned_view_counts_every_record_and_tombstone_in_shared_bins(raw):
    kept = compact(raw)
    spec = log_vs_compacted_chart(raw, kept, max_points=50, bins=10).to_dict()
    data = pd.DataFrame(rows(spec))
    assert marks(spec) == ["rect"]
    by_view = data.groupby("view")[["records", "tombstones"]].sum()
    assert by_view.loc["raw log", "records"] == len(raw)
    assert by_view.loc["compacted", "records"] == len(kept)
    assert by_view.loc["raw log", "tombstones"] == raw["tombstone"].sum()
    assert by_view.loc["compacted", "tombstones"] == kept["tombstone"].sum()
    assert data.groupby(["view", "partition"]).size().max() <= 10
    bins = data.set_index(["partition", "first_offset"])
    raw_bins = set(bins[bins["view"] == "raw log"].index)
    assert set(bins[bins["view"] == "compacted"].index) <= raw_bins
    # each bin's records lie within its offsets
    for row in data[data["view"] == "raw log"].itertuples():
        inside = raw[(raw["partition"] == row.partition)
                     & raw["offset"].between(row.first_offset, row.last_offset)]
        assert len(inside) == row.records


def test_a_million_record_changelog_becomes_a_small_chart():
    big = synthetic_changelog(batches=2000, players=1000, partitions=4, batches_per_window=20,
                              p_update=0.45)
    assert len(big) > 950_000
    kept = compact(big)
    spec = log_vs_compacted_chart(big, kept).to_dict()
    data = pd.DataFrame(rows(spec))
    assert len(data) <= 4 * 100 * 2
    assert data.groupby("view")["records"].sum().to_dict() == {
        "raw log": len(big), "compacted": len(kept)}


def test_empty_logs_chart_without_error(raw):
    empty = raw.iloc[:0]
    spec = log_vs_compacted_chart(empty, empty).to_dict()
    assert rows(spec) == []


def test_log_chart_bad_input(raw):
    with pytest.raises(BadArgument, match="missing column 'offset'"):
        log_vs_compacted_chart(raw.drop(columns="offset"), raw)
    with pytest.raises(BadArgument, match="max_points"):
        log_vs_compacted_chart(raw, raw, max_points=0)
    with pytest.raises(BadArgument, match="bins"):
        log_vs_compacted_chart(raw, raw, bins=2.5)


# --- (b) one key's history -------------------------------------------------------------------
def test_key_history_by_json_text_shows_each_put_and_the_tombstone(raw):
    dead = raw.loc[raw["tombstone"], "key"].iloc[0]
    history = raw[raw["key"] == dead]
    spec = key_history_chart(raw, dead).to_dict()
    data = pd.DataFrame(rows(spec))
    assert data["offset"].tolist() == history["offset"].tolist()
    assert (data["record"] == "tombstone").sum() == 1
    puts = data[data["record"] == "put"]
    assert puts["count"].tolist() == list(range(1, len(puts) + 1))
    assert spec["layer"][0]["encoding"]["y"]["field"] == "count"
    assert spec["title"]["subtitle"][0] == dead
    assert marks(spec) == ["line", "rule", "text"]


def test_key_history_by_key_columns_and_value_column(raw):
    row = raw[~raw["tombstone"]].iloc[3]
    key = {"player": row["player"], "window_start": str(row["window_start"]),
           "window_end": row["window_end"]}
    spec = key_history_chart(raw, key, value_column="max_score", x="batch").to_dict()
    data = pd.DataFrame(rows(spec))
    assert set(data["batch"]) == set(raw.loc[raw["key"] == row["key"], "batch"])
    assert spec["layer"][0]["encoding"]["y"]["field"] == "max_score"
    assert spec["layer"][0]["encoding"]["x"]["field"] == "batch"
    # the JSON key written with spaces is found too
    spaced = json.dumps(json.loads(row["key"]), indent=1)
    assert len(rows(key_history_chart(raw, spaced).to_dict())) == len(data)


def test_unknown_key_is_named_with_example_keys(raw):
    with pytest.raises(BadArgument, match="nobody") as err:
        key_history_chart(raw, '{"player":"nobody"}')
    assert raw["key"].iloc[0] in str(err.value)
    with pytest.raises(BadArgument, match="matches"):
        key_history_chart(raw, {"player": raw["player"].iloc[0]})   # every window of a player
    with pytest.raises(BadArgument, match="key column"):
        key_history_chart(raw, {"team": "x"})
    with pytest.raises(BadArgument, match="window_start"):
        key_history_chart(raw, {"player": "p0001", "window_start": "ten o'clock"})
    with pytest.raises(BadArgument, match="value column"):
        key_history_chart(raw, raw["key"].iloc[0], value_column="avg_score")
    with pytest.raises(BadArgument, match="x axis"):
        key_history_chart(raw, raw["key"].iloc[0], x="timestamp")


# --- (c) stats --------------------------------------------------------------------------------
def test_compaction_stats_chart_has_before_and_after_bars_and_the_ratio():
    raw = log([(0, 0, 0, "a", False), (0, 1, 1, "a", False), (1, 0, 0, "b", False)])
    spec = compaction_stats_chart(compaction_stats(raw, compact(raw))).to_dict()
    data = rows(spec)
    bars = [r for r in data if "when" in r]
    assert sorted((r["partition"], r["when"], r["records"]) for r in bars) == [
        (0, "after compaction", 1), (0, "before compaction", 2),
        (1, "after compaction", 1), (1, "before compaction", 1)]
    assert sorted(r["label"] for r in data if "label" in r) == ["kept 100%", "kept 50%"]
    with pytest.raises(BadArgument, match="missing column 'ratio'"):
        compaction_stats_chart(pd.DataFrame({"partition": [0], "records_before": [1],
                                             "records_after": [1]}))


def test_broker_compaction_chart_has_three_bars_per_partition_and_the_verdict():
    from statekit.changelog.broker_compaction import compare
    from statekit.charts import broker_compaction_chart

    raw = log([(0, 0, 0, "a", False), (0, 1, 1, "a", False), (1, 0, 0, "b", False)])
    agreeing = compare(raw, raw.iloc[[1, 2]], {0: 2})  # a@0 superseded, cleaned away
    spec = broker_compaction_chart(agreeing).to_dict()
    bars = sorted((r["partition"], r["what"], r["records"]) for r in rows(spec))
    assert bars == [(0, "shipped", 2), (0, "statekit predicts", 1), (0, "the broker kept", 1),
                    (1, "shipped", 1), (1, "statekit predicts", 1), (1, "the broker kept", 1)]
    assert "agree record for record" in spec["title"]["subtitle"][0]
    wrong = broker_compaction_chart(compare(raw, raw, {0: 2})).to_dict()  # nothing cleaned
    assert "differ: 0 missing, 1 unexpected" in wrong["title"]["subtitle"][0]


# --- (d) state files --------------------------------------------------------------------------
def test_state_files_chart_highlights_the_files_a_restore_reads():
    files = pd.DataFrame({
        "partition": [0, 0, 0, 0, 0], "version": [1, 2, 2, 3, 4], "batch": [0, 1, 1, 2, 3],
        "kind": ["delta", "delta", "snapshot", "delta", "delta"],
        "file": [f"/ck/state/0/0/{n}" for n in
                 ("1.changelog", "2.changelog", "2.zip", "3.changelog", "4.changelog")],
        "used_by_restore": [False, False, True, True, False]})
    files.attrs["restore_version"] = 3
    spec = state_files_chart(files).to_dict()
    roles = [r["role"] for r in rows(spec)]
    assert roles == ["delta", "delta", "snapshot loaded", "delta replayed", "delta"]
    assert rows(spec)[2]["file"] == "2.zip"
    assert "restore of version 3" in spec["title"]["text"]
    plain = state_files_chart(files.drop(columns="used_by_restore")).to_dict()
    assert {r["role"] for r in rows(plain)} == {"delta", "snapshot"}
    with pytest.raises(BadArgument, match="missing column 'kind'"):
        state_files_chart(files.drop(columns="kind"))


def test_charts_render_to_svg(raw, tmp_path):
    kept = compact(raw)
    for name, chart in {"log": log_vs_compacted_chart(raw, kept),
                        "binned": log_vs_compacted_chart(raw, kept, max_points=10),
                        "key": key_history_chart(raw, raw.loc[raw["tombstone"], "key"].iloc[0]),
                        "stats": compaction_stats_chart(compaction_stats(raw, kept))}.items():
        target = tmp_path / f"{name}.svg"
        chart.save(str(target))
        assert target.read_text().startswith("<svg")


# --- the scrubber ----------------------------------------------------------------------------
def test_scrubber_shows_the_log_up_to_a_batch_and_its_compaction(raw):
    scrubber = ChangelogScrubber(raw, {"delete_retention_ms": 60_000})
    last = int(raw["batch"].max())
    assert scrubber.batch == last and scrubber._slider.max == last
    pd.testing.assert_frame_equal(scrubber.raw_view, upto_batch(raw, last))
    for batch in (5, 0, 13):
        scrubber.batch = batch
        assert scrubber._slider.value == batch
        expected_raw = upto_batch(raw, batch)
        expected = compact(expected_raw, delete_retention_ms=60_000)
        pd.testing.assert_frame_equal(scrubber.raw_view, expected_raw)
        pd.testing.assert_frame_equal(scrubber.compacted_view, expected)
        spec = scrubber.chart_widget.spec
        data = pd.DataFrame(rows(spec))
        assert len(data) == len(expected_raw) + len(expected)
        assert (data["view"] == "compacted").sum() == len(expected)
        assert f"after batch {batch}" in spec["title"]["text"]
        assert scrubber.summary.startswith(f"After batch {batch}: raw log {len(expected_raw)} "
                                           f"records")
        assert f"compacted {len(expected)} records" in scrubber.summary


def test_scrubber_moves_with_its_slider_and_uses_binned_views_for_big_logs(raw):
    scrubber = ChangelogScrubber(raw, max_points=20, bins=5)
    scrubber._slider.value = 10   # what dragging the slider does
    assert scrubber.batch == 10
    assert scrubber.raw_view["batch"].max() == 10
    data = pd.DataFrame(rows(scrubber.chart_widget.spec))
    assert data.groupby("view")["records"].sum().to_dict() == {
        "raw log": len(scrubber.raw_view), "compacted": len(scrubber.compacted_view)}
    assert isinstance(scrubber.offline, bool)
    assert scrubber.children[-1] is scrubber.chart_widget


def test_scrubber_bad_input(raw):
    scrubber = ChangelogScrubber(raw)
    with pytest.raises(BadArgument, match="batch"):
        scrubber.batch = 1000
    with pytest.raises(BadArgument, match="compact option"):
        ChangelogScrubber(raw, {"retention": 5})
    with pytest.raises(BadArgument, match="delete_retention_ms"):
        ChangelogScrubber(raw, {"delete_retention_ms": -5})
    with pytest.raises(BadArgument, match="empty"):
        ChangelogScrubber(raw.iloc[:0])
    with pytest.raises(BadArgument, match="missing column 'batch'"):
        ChangelogScrubber(raw.drop(columns="batch"))


def test_scrubber_can_compact_at_a_fixed_time(raw):
    later = T0 + pd.Timedelta(days=3)
    scrubber = ChangelogScrubber(raw, {"now": later})
    scrubber.batch = 8
    assert not scrubber.compacted_view["tombstone"].any()   # all older than a day


def test_charts_take_a_changelog_and_show_its_value_columns(changelog):
    spec = log_vs_compacted_chart(changelog, changelog.compact()).to_dict()
    fields = [t["field"] for t in spec["spec"]["encoding"]["tooltip"]]
    assert {"count", "sum_score", "max_score"} <= set(fields)
    only = log_vs_compacted_chart(changelog, changelog.compact(), value_columns=["count"])
    fields = [t["field"] for t in only.to_dict()["spec"]["encoding"]["tooltip"]]
    assert "count" in fields and "sum_score" not in fields
    dead = changelog.records.loc[changelog.records["tombstone"], "key"].iloc[0]
    history = key_history_chart(changelog, dead, value_column="sum_score").to_dict()
    assert history["layer"][0]["encoding"]["y"]["field"] == "sum_score"
    with pytest.raises(BadArgument, match="key column: 'game'.*player, window_start"):
        key_history_chart(changelog, {"game": "g1"})
    scrubber = ChangelogScrubber(changelog)
    assert scrubber.batch == changelog.last_batch


def test_every_compaction_view_says_it_is_the_least_a_full_clean_keeps(raw):
    """A real broker never cleans the active segment: the model is a lower bound, and says so."""
    kept = compact(raw)
    for chart in (log_vs_compacted_chart(raw, kept),
                  log_vs_compacted_chart(raw, kept, max_points=10),
                  compaction_stats_chart(compaction_stats(raw, kept))):
        subtitle = " ".join(chart.to_dict()["title"]["subtitle"])
        assert "the least a real topic keeps" in subtitle and "active segment" in subtitle
