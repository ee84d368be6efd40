"""Monitoring: RocksDB metrics and the sizing rule, tuning presets, the micro-batch as record
cache, the monitor charts and the live dashboard — on real queries (shared fixtures)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from helpers.chartspec import marks, rows

from statekit.monitor import (
    COMMIT_PHASES,
    memory_by_batch,
    memory_estimate,
    rocksdb_metrics,
    summarize,
    top_rows,
    wide,
    write_coalescing,
)
from statekit.monitor.memory_sizing import ARENA_BLOCK, MIB, TOLERANCE
from statekit.monitor.rocksdb_stats import UNITS
from statekit.spark.tuning import PREFIX, PRESETS, SPARK_DEFAULTS, key

#: Metrics every batch of a RocksDB query reports (statekit names).
NAMED = ("state_rows", "memory_used", "memory_pinned_blocks", "memory_unpinned", "sst_size",
         "block_cache_hits", "block_cache_misses", "block_cache_hit_ratio", "gets", "puts",
         "bytes_written", "bytes_per_put", *COMMIT_PHASES, "commit_file_sync", "commit_total")
INSTANCES = 3   # the shared session's shuffle partitions (tests/conftest.py)


@pytest.fixture(scope="module")
def measured(logged):
    query, log = logged
    progress = query.progress()
    return query, log, progress, rocksdb_metrics(progress)


# --- RocksDB in numbers ---------------------------------------------------------------------
def test_the_tidy_frame_has_spark_rocksdb_metrics_with_sane_values(measured):
    _, log, progress, tidy = measured
    assert list(tidy.columns) == ["batch", "metric", "value", "unit", "spark_metric"]
    assert not tidy.duplicated(["batch", "metric"]).any()
    assert set(tidy["unit"]) <= set(UNITS)
    assert set(tidy["batch"]) == set(progress["batch"])
    table = wide(tidy).set_index("batch")
    missing = [m for m in NAMED if m not in table]
    assert not missing, missing
    assert (table["memory_used"] > 0).all()
    assert (table["memory_pinned_blocks"] >= 0).all()
    assert (table["memory_unpinned"] + table["memory_pinned_blocks"]
            == table["memory_used"]).all()
    ratio = table["block_cache_hit_ratio"]
    reads = table["block_cache_hits"] + table["block_cache_misses"]
    assert ratio[reads > 0].between(0, 1).all() and ratio[reads == 0].isna().all()
    assert (reads > 0).any(), "the batch after the first snapshot reads SST blocks"
    assert np.allclose(ratio[reads > 0], (table["block_cache_hits"] / reads)[reads > 0])
    # every RocksDB write of the aggregation is one record of statekit's changelog
    shipped = log.records.groupby("batch").size().reindex(table.index, fill_value=0)
    assert (table["puts"] == shipped).all()
    assert table["bytes_per_put"].dropna().between(40, 400).all()
    # the snapshot batch (changelog checkpointing: every 10th version) flushes and checkpoints
    flushed = table.index[table["flush_bytes_written"] > 0]
    assert len(flushed) and (table.loc[flushed, "sst_size"] > 0).all()
    assert (table.loc[table.index < flushed[0], "sst_size"] == 0).all()
    # the file sync wraps the changelog file: the phases never exceed it
    inside = table[["commit_changelog_file", "commit_zip_upload", "commit_sync_other"]].sum(1)
    assert (inside == table["commit_file_sync"]).all()


def test_the_tidy_frame_keeps_spark_names_it_does_not_know_and_rejects_other_frames():
    progress = pd.DataFrame({"batch": [0], "rocksdbSomethingNewBytes": [7],
                             "rocksdbNewLatencyMs": [3], "input_rows": [5]})
    tidy = rocksdb_metrics(progress)
    assert dict(zip(tidy["metric"], tidy["unit"], strict=True)) == {
        "rocksdbSomethingNewBytes": "bytes", "rocksdbNewLatencyMs": "ms"}
    assert rocksdb_metrics(pd.DataFrame({"batch": []})).empty
    from statekit.errors import BadArgument
    with pytest.raises(BadArgument, match="missing column 'batch'"):
        rocksdb_metrics(pd.DataFrame({"x": [1]}))


def test_the_sizing_rule_lands_within_its_tolerance_of_measured_memory(measured):
    """The documented rule (statekit.monitor.rocksdb_stats) against memoryUsedBytes of a real
    query:
    the peak within a factor TOLERANCE either way, and no batch above the ceiling."""
    _, _, progress, tidy = measured
    by_batch = memory_by_batch(progress, INSTANCES)
    assert len(by_batch) == len(progress)
    assert (by_batch["measured"] <= by_batch["ceiling"]).all()
    peak_measured, peak_estimate = by_batch["measured"].max(), by_batch["estimate"].max()
    assert 1 / TOLERANCE <= peak_measured / peak_estimate <= TOLERANCE, by_batch
    # the same from the one-shot rule with the store's size: state rows, bytes per put
    table = wide(tidy)
    rows_ = int(table["state_rows"].max())
    size = float(table["bytes_written"].sum() / table["puts"].sum())
    estimate = memory_estimate(rows_, size, INSTANCES)
    assert estimate.within(peak_measured)
    # pinned blocks are part of memory used (a few bytes per instance, nothing pinned
    # without bounded memory)
    assert (table["memory_pinned_blocks"] <= table["memory_used"]).all()


def test_the_sizing_rule_by_hand():
    small = memory_estimate(100, 100, 3)
    assert small.memtables == 3 * ARENA_BLOCK           # one arena block per instance
    assert small.total == pytest.approx(3 * MIB + 100 * 100 + 100 * 10 / 8 + 3 * 48, rel=0.01)
    assert small.ceiling == 3 * (8 + 64 * 2) * MIB + small.indexes_and_filters
    big = memory_estimate(10_000_000, 100, 2, writes_since_flush=30_000_000)
    assert big.memtables == 2 * 64 * 2 * MIB            # capped at write buffers × count
    assert big.block_cache == 2 * 8 * MIB               # capped at the cache
    assert big.total <= big.ceiling
    bounded = memory_estimate(10_000_000, 100, 8, conf=PRESETS["memory_bounded"])
    assert bounded.ceiling == 256 * MIB and bounded.total <= bounded.ceiling
    assert memory_estimate(0, 100, 2, writes_since_flush=0).total == 0
    assert memory_estimate(5, 100, 1, in_sst=False).block_cache == 0
    components = small.components
    assert components["bytes"].sum() == pytest.approx(small.memtables + small.block_cache
                                                      + small.indexes_and_filters)
    from statekit.errors import BadArgument
    with pytest.raises(BadArgument, match="row_bytes"):
        memory_estimate(1, 0, 1)
    with pytest.raises(BadArgument, match="instances"):
        memory_estimate(1, 10, 0)


# --- tuning presets -------------------------------------------------------------------------
def _valid(name: str, value: str) -> bool:
    kind = {"boundedMemoryUsage": "bool", "trackTotalNumberOfRows": "bool",
            "compactOnCommit": "bool", "writeBufferCacheRatio": "ratio",
            "highPriorityPoolRatio": "ratio", "compression": "codec"}.get(name, "int")
    if kind == "bool":
        return value in ("true", "false")
    if kind == "ratio":
        return 0.0 <= float(value) <= 1.0
    if kind == "codec":
        return value in ("none", "snappy", "zlib", "bzip2", "lz4", "lz4hc", "zstd")
    return int(value) >= -1


def test_presets_are_rocksdb_settings_spark_accepts():
    assert set(PRESETS) == {"write_heavy", "read_heavy", "memory_bounded"}
    for name, conf in PRESETS.items():
        assert conf, name
        for setting, value in conf.items():
            assert setting.startswith(PREFIX) and setting in SPARK_DEFAULTS, setting
            assert isinstance(value, str) and _valid(setting[len(PREFIX):], value), (
                name, setting, value)
    assert PRESETS["memory_bounded"][key("boundedMemoryUsage")] == "true"
    with pytest.raises(TypeError):
        PRESETS["write_heavy"][key("blockCacheSizeMB")] = "1"   # read-only


def test_compare_presets_refuses_unknown_configurations():
    from statekit.errors import BadArgument
    from statekit.monitor import compare_presets

    with pytest.raises(BadArgument, match="'fast'.*default"):
        compare_presets(None, ["default", "fast"])
    with pytest.raises(BadArgument, match="batches"):
        compare_presets(None, ["default"], batches=1)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_every_preset_starts_a_query_and_takes_effect(spark, tmp_path):
    """Each preset, set on its own session, runs a query; its settings show in the metrics:
    write_heavy stops counting rows (one get per put fewer), memory_bounded charges the
    memtables to a shared cache (pinned), read_heavy changes neither."""
    from statekit.monitor import compare_presets

    table = compare_presets(spark, batches=3, rows_per_batch=400, keys=50,
                            workdir=tmp_path).set_index("config")
    assert list(table.index) == ["default", *PRESETS]
    assert (table["batches"] >= 3).all() and (table["input_rows"] >= 3 * 400).all()
    assert table.loc["write_heavy", "gets_per_put"] < table.loc["default", "gets_per_put"] - 0.5
    assert table.loc["write_heavy", "state_rows"] == 0      # numRowsTotal no longer counted
    assert 0 < table.loc["read_heavy", "state_rows"] <= 50
    assert table.loc["read_heavy", "state_rows"] == table.loc["default", "state_rows"]
    pinned = table["memory_pinned_bytes"]
    assert pinned["memory_bounded"] > 100 * pinned["default"], pinned
    assert table.loc["memory_bounded", "memory_peak_bytes"] <= 256 * MIB
    assert (table["checkpoint_bytes"] > 0).all() and (table["commit_ms"] >= 0).all()


# --- the record cache -----------------------------------------------------------------------
def test_each_key_is_written_once_per_batch_however_many_events_it_got(measured):
    _, log, progress, _ = measured
    frame = write_coalescing(log, progress)
    assert (frame["records_per_key"] <= 1).all()
    assert frame["records"].sum() == len(log)
    assert (frame["puts"] + frame["tombstones"] == frame["records"]).all()
    busy = frame[frame["puts"] > 0]
    assert (busy["events_per_key"] >= 1).all()
    assert (busy["events_per_key"] >= busy["records_per_key"]).all()
    assert (busy["input_rows"] >= busy["puts"]).all()
    assert busy["events_per_key"].mean() > 2   # 500 events a batch over ~80 keys


@pytest.mark.timeout(600)
def test_bigger_batches_fold_more_events_into_each_changelog_record(measured, spark, broker,
                                                                   games, tmp_path):
    from statekit.datasets import GAME_EVENT_SCHEMA, GAME_SPEC
    from statekit.monitor import measure_record_cache

    _, log, progress, _ = measured
    small = write_coalescing(log, progress).assign(batch_size=500)
    big = measure_record_cache(games, GAME_SPEC, broker, [5000], spark=spark,
                               event_schema=GAME_EVENT_SCHEMA, workdir=tmp_path)
    assert list(big.columns[:2]) == ["batch_size", "batch"] and (big["batch_size"] == 5000).all()
    assert (big["records_per_key"] <= 1).all()
    both = pd.concat([small, big], ignore_index=True)
    summary = summarize(both).set_index("batch_size")
    assert summary.loc[5000, "input_rows"] == summary.loc[500, "input_rows"] == 5000
    assert (summary["max_records_per_key"] <= 1).all()
    # the same input, bigger batches: fewer records per event, more events per key
    assert summary.loc[5000, "records_per_event"] < summary.loc[500, "records_per_event"]
    assert summary.loc[5000, "mean_events_per_key"] > summary.loc[500, "mean_events_per_key"]
    from statekit.charts import record_cache_chart
    spec = record_cache_chart(both).to_dict()
    assert marks(spec).count("line") == 2
    assert {r["batch_size"] for r in rows(spec)} == {500, 5000}


# --- charts ---------------------------------------------------------------------------------
def _tooltip_fields(node) -> set[str]:
    found = set()
    if isinstance(node, dict):
        tips = node.get("encoding", {}).get("tooltip")
        for tip in tips if isinstance(tips, list) else [tips] if tips else []:
            found.add(tip["field"])
        for value in node.values():
            found |= _tooltip_fields(value)
    elif isinstance(node, list):
        for value in node:
            found |= _tooltip_fields(value)
    return found


def test_monitor_charts_draw_the_metrics(measured):
    from statekit.charts import (
        cache_hit_ratio_chart,
        commit_phases_chart,
        input_chart,
        memory_chart,
        watermark_chart,
    )

    _, _, progress, tidy = measured
    table = wide(tidy).set_index("batch")

    spec = cache_hit_ratio_chart(tidy).to_dict()
    assert marks(spec) == ["line", "point"]
    data = rows(spec)
    assert {r["batch"] for r in data} == set(table.index[table["block_cache_hit_ratio"].notna()])
    assert all(0 <= r["block_cache_hit_ratio"] <= 1 for r in data)
    assert {"block_cache_hit_ratio", "block_cache_hits", "block_cache_misses"} <= \
        _tooltip_fields(spec)

    estimate = memory_by_batch(progress, INSTANCES)
    spec = memory_chart(tidy, estimate).to_dict()
    assert marks(spec) == ["bar", "line"]
    bars = [r for r in rows(spec) if "component" in r]
    assert {r["component"] for r in bars} == {"pinned blocks", "memtables, block cache, indexes"}
    per_batch = pd.DataFrame(bars).groupby("batch")["bytes"].sum()
    assert (per_batch == table["memory_used"]).all()          # the stack adds up to memory used
    assert spec["layer"][0]["encoding"]["y"]["stack"] is True
    assert {"component", "bytes", "estimate", "measured"} <= _tooltip_fields(spec)

    spec = commit_phases_chart(tidy).to_dict()
    assert marks(spec) == ["bar"]
    phases = pd.DataFrame(rows(spec))
    assert set(phases["phase"]) == {"flush", "compact", "checkpoint", "changelog file",
                                    "snapshot upload", "other sync"}
    sums = phases.groupby("batch")["ms"].sum()
    expected = table[list(COMMIT_PHASES)].sum(1)
    assert (sums == expected).all()
    assert {"batch", "phase", "ms"} <= _tooltip_fields(spec)

    spec = input_chart(progress).to_dict()
    assert marks(spec) == ["bar", "line"]
    assert [r["input_rows"] for r in rows(spec)] == progress["input_rows"].tolist()
    spec = watermark_chart(progress).to_dict()
    assert marks(spec) == ["line"] and spec["encoding"]["y"]["type"] == "temporal"
    assert "watermark" in _tooltip_fields(spec)


# --- the live dashboard ---------------------------------------------------------------------
@pytest.mark.timeout(600)
def test_the_dashboard_shows_what_the_query_holds_and_ends_with_it(spark, broker, games,
                                                                   tmp_path):
    import statekit as sk
    from statekit.datasets import GAME_EVENT_SCHEMA, GAME_SPEC
    from statekit.widgets import Dashboard
    from statekit.widgets.dashboard import PANEL_WIDTH

    query = sk.start_query(games, GAME_SPEC, spark=spark, kafka=broker,
                           event_schema=GAME_EVENT_SCHEMA, checkpoint=str(tmp_path / "ck"),
                           name="dash", store_name="counts", max_offsets_per_trigger=2500,
                           trigger="100 milliseconds")
    board = Dashboard(query, every=0.5, top=5)
    try:
        assert board.running
        query.wait_until_drained()
        reading = board.refresh()        # synchronous, snapshot included
        pd.testing.assert_frame_equal(reading.progress, query.progress())
        pd.testing.assert_frame_equal(reading.metrics, rocksdb_metrics(query.progress()))
        assert reading.top_batch == query.last_batch == reading.last_batch
        expected = top_rows(query.snapshot(), "count", 5)
        pd.testing.assert_frame_equal(reading.top, expected)
        log = query.read_changelog()
        counts = reading.changelog.set_index("batch")
        assert counts["log_records"].iloc[-1] == len(log)
        assert counts["compacted"].iloc[-1] == len(log.compact())
        assert (counts["records"] == log.records.groupby("batch").size()).all()
        # the charts show the same numbers
        top_spec = board.charts["top"].spec
        assert [r["count"] for r in rows(top_spec)] == expected["count"].tolist()
        input_spec = board.charts["input"].spec
        assert [r["input_rows"] for r in rows(input_spec)] == \
            query.progress()["input_rows"].tolist()
        assert {"progress", "metrics", "changelog", "snapshot"} <= set(reading.costs)
        assert {"charts", "total"} <= set(board.costs)   # (maybe the thread's later refresh)
        assert f"batch {query.last_batch}" in board.status.value
        # every panel fits beside another in a JupyterLab output area
        widths = [spec.get("width") for spec in (board.charts[n].spec for n in board.charts)]
        assert PANEL_WIDTH in widths and set(widths) <= {PANEL_WIDTH, None}
        board.stop()                      # stop() ends the thread while the query runs
        # a listener behind (its events are asynchronous: late under load) leaves no report
        # file yet; the dashboard shows the batches anyway, from the query's recentProgress
        aside = tmp_path / "reports-aside"
        aside.mkdir()
        kept = query.checkpoint.progress_files()   # those the listener has written so far
        for path in kept:
            path.rename(aside / path.name)
        try:
            late = board.refresh(snapshot=False).progress
            from_spark = query.progress()
        finally:
            for path in kept:
                (aside / path.name).rename(path)
        assert late["batch"].tolist() == list(range(query.last_batch + 1))
        pd.testing.assert_frame_equal(late, from_spark)
        pd.testing.assert_frame_equal(late, reading.progress)
        board.status.value = "pressed?"
        board.button.click()              # "Refresh now": one refresh, snapshot included
        assert f"top 5 as of batch {query.last_batch}" in board.status.value
        assert not board.running and query.is_active
        board.start()
        assert board.running
    finally:
        query.close()
    assert board.wait(120), "the thread outlived the query"
    assert "stopped" in board.status.value
    assert board.reading.top_batch == query.last_batch
    board.close()


def test_the_dashboard_refuses_bad_arguments(logged):
    from statekit.errors import BadArgument
    from statekit.widgets import Dashboard

    query, _ = logged
    with pytest.raises(BadArgument, match="every"):
        Dashboard(query, every=0, start=False)
    with pytest.raises(BadArgument, match="top"):
        Dashboard(query, top=0, start=False)
    with pytest.raises(BadArgument, match="by"):
        Dashboard(query, by="score", start=False)
    with pytest.raises(BadArgument, match="query"):
        Dashboard("board", start=False)
    board = Dashboard(query, start=False)
    reading = board.refresh(snapshot=False)
    assert reading.top is None and not math.isnan(board.costs["total"])
    assert "snapshot" not in board.costs
    board.close()
