"""``CheckpointView.describe()``: a table, chart data and flags, on real plain-PySpark checkpoints.

Each checkpoint is written by a plain PySpark query (no statekit helper in the query) over
small JSON files, one file a batch (``maxFilesPerTrigger=1``, ``trigger(availableNow=True)``)
in the shared session (RocksDB state with changelog checkpointing, 3 shuffle partitions):

- healthy: a 1-minute windowed count with a 30-second watermark, each file one minute later
  than the one before, 30 keys a minute → no flag;
- stalled: the same query, but every file's event times are in the same minute while new keys
  keep coming → ``stalled_watermark`` and ``growing_state``;
- skewed: a running count per key whose 60 keys all hash to partition 0 → ``skewed_partition``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest
from helpers.chartspec import marks
from helpers.plainrun import run_query
from helpers.tree import tree_digest
from pyspark.sql import functions as F

from statekit.charts.inspect import describe_chart, describe_charts, skew_table
from statekit.errors import BadArgument
from statekit.inspect import Description, Flag, open_checkpoint
from statekit.inspect.flags import slow_commits, stalled_watermark

EVENTS = "k string, ts timestamp"
FILES = 8
KEYS = 30
QUERY_TIMEOUT = 480
#: the machine is shared and often loaded: building a checkpoint may take minutes
pytestmark = pytest.mark.timeout(900)


def write_files(folder: Path, files: list[list[dict]]) -> Path:
    """One JSON file per batch; modification times 10 s apart, so that the file source
    (which takes the oldest files first) reads them in order."""
    folder.mkdir(parents=True, exist_ok=True)
    start = 1_767_600_000
    for i, lines in enumerate(files):
        path = folder / f"f{i:02d}.json"
        path.write_text("\n".join(json.dumps(r) for r in lines))
        os.utime(path, (start + 10 * i, start + 10 * i))
    return folder


def windowed_count(spark, folder: Path, checkpoint: Path) -> Path:
    events = spark.readStream.schema(EVENTS).option("maxFilesPerTrigger", 1).json(str(folder))
    counts = (events.withWatermark("ts", "30 seconds")
              .groupBy(F.window("ts", "1 minute"), "k").count())
    return run_query(spark, counts, checkpoint, "append", timeout=QUERY_TIMEOUT)


@pytest.fixture(scope="module")
def healthy(spark, tmp_path_factory) -> Path:
    """Minute i holds 30 keys' events, 2 s apart: every window closes one batch later."""
    root = tmp_path_factory.mktemp("healthy")
    files = [[{"k": f"k{j}", "ts": f"2026-01-05T10:{i:02d}:{j * 2:02d}"} for j in range(KEYS)]
             for i in range(FILES)]
    return windowed_count(spark, write_files(root / "in", files), root / "ck")


@pytest.fixture(scope="module")
def stalled(spark, tmp_path_factory) -> Path:
    """New keys every file, but every event time is in 10:00: the watermark never moves."""
    root = tmp_path_factory.mktemp("stalled")
    files = [[{"k": f"u{i * KEYS + j}", "ts": f"2026-01-05T10:00:{j * 2:02d}"}
              for j in range(KEYS)] for i in range(FILES)]
    return windowed_count(spark, write_files(root / "in", files), root / "ck")


@pytest.fixture(scope="module")
def skewed(spark, tmp_path_factory) -> Path:
    """A running count per key; its 60 keys are the ones Spark's hash partitioning (Murmur3,
    seed 42, modulo 3 partitions: ``pmod(hash(k), 3)``) sends to partition 0."""
    root = tmp_path_factory.mktemp("skewed")
    candidates = spark.range(400).select(F.concat(F.lit("key"), F.col("id").cast("string"))
                                         .alias("k"))
    keys = [r["k"] for r in candidates.where(F.pmod(F.hash("k"), F.lit(3)) == 0)
            .orderBy("k").limit(60).collect()]
    assert len(keys) == 60
    files = [[{"k": k, "ts": f"2026-01-05T10:{i:02d}:00"} for k in keys] for i in range(4)]
    events = spark.readStream.schema(EVENTS).option("maxFilesPerTrigger", 1).json(
        str(write_files(root / "in", files)))
    return run_query(spark, events.groupBy("k").count(), root / "ck", "update",
                     timeout=QUERY_TIMEOUT)


def test_a_healthy_windowed_count_has_no_flag(healthy):
    before = tree_digest(healthy)
    description = open_checkpoint(healthy).describe()
    assert tree_digest(healthy) == before, "describe() changed a file of the checkpoint"
    assert description.flags == []
    table = description.table
    assert list(table["part"]) == ["default"]
    row = table.iloc[0]
    # after the last batch only the windows the watermark has not passed remain
    assert 0 < row["rows"] <= 2 * KEYS
    assert row["deletes"] > 0
    assert row["partitions"] == 3 and row["flags"] == ""
    # the chart data: every partition of every batch read, summing to the table's rows
    last = description.rows[description.rows["batch"] == row["batch"]]
    assert sorted(last["partition"]) == [0, 1, 2]
    assert last["rows"].sum() == row["rows"]
    assert any("slow_commit not checked" in note for note in description.notes)


def test_a_stalled_watermark_and_growing_state_are_flagged(stalled):
    description = open_checkpoint(stalled).describe(stall_batches=3)
    assert description.flag_names == ["stalled_watermark", "growing_state"]
    watermark, growth = description.flags
    assert watermark.operator is None
    assert "2026-01-05 10:00:28" in watermark.message  # 10:00:58 minus 30 seconds
    assert growth.operator == 0
    row = description.table.iloc[0]
    # one window, one row per key seen: 30 new keys a batch, nothing deleted
    assert row["rows"] == KEYS * (row["batch"] + 1)
    assert row["deletes"] == 0
    assert f"{int(row['rows_first']):,} → {int(row['rows']):,}" in growth.message
    assert "0 deletes" in growth.message
    assert row["flags"] == "stalled_watermark, growing_state"


def test_all_keys_on_one_partition_is_flagged_as_skew(skewed):
    description = open_checkpoint(skewed).describe()
    assert description.flag_names == ["skewed_partition"]
    flag = description.flags[0]
    assert flag.operator == 0
    assert "partition 0 holds 60 of 60 rows (100%)" in flag.message
    row = description.table.iloc[0]
    assert row["largest_partition"] == 0 and row["largest_share"] == 1.0
    shares = skew_table(description.rows)
    assert (shares["largest_share"] == 1.0).all()


def test_fewer_batches_are_read_when_asked(stalled):
    description = open_checkpoint(stalled).describe(batches=2)
    assert sorted(set(description.rows["batch"])) == [FILES - 2, FILES - 1]
    # two batches are one step: fewer rising batches than growth_batches asks for
    assert "growing_state" not in description.flag_names
    assert "growing_state" in open_checkpoint(stalled).describe(
        batches=2, growth_batches=1).flag_names


def test_slow_commits_need_progress_and_are_flagged_from_it(healthy):
    progress = [{"batchId": b, "durationMs": {"triggerExecution": 1000},
                 "stateOperators": [{"commitTimeMs": 800 if b == 2 else 50}]}
                for b in range(4)]
    description = open_checkpoint(healthy).describe(progress=progress)
    assert description.flag_names == ["slow_commit"]
    assert "batch 2, 800 of 1000 ms" in description.flags[0].message
    assert not any("slow_commit not checked" in n for n in description.notes)


def test_the_description_renders_and_its_charts_draw(stalled):
    description = open_checkpoint(stalled).describe()
    html = description._repr_html_()
    assert "stalled_watermark" in html and "<table" in html
    assert "text/html" in description._repr_mimebundle_()
    assert "growing_state" in repr(description)
    charts = describe_charts(description)
    assert list(charts) == [0]
    spec = describe_chart(description).to_dict()
    assert {"bar", "line", "rule"} <= set(marks(spec))
    operator_spec = charts[0].to_dict()
    bars = operator_spec["hconcat"][0]["data"]
    drawn = operator_spec["datasets"][bars["name"]] if "name" in bars else bars["values"]
    assert sum(r["rows"] for r in drawn) == description.table.iloc[0]["rows"]


@pytest.mark.parametrize("kwargs, named", [
    ({"batches": -1}, "batches"), ({"batches": 0}, "batches"),
    ({"stall_batches": 0}, "stall_batches"), ({"growth_batches": 1.5}, "growth_batches"),
    ({"skew_share": 2}, "skew_share"), ({"commit_share": 0}, "commit_share"),
    ({"skew_min_rows": -3}, "skew_min_rows"), ({"progress": "fast"}, "progress"),
    ({"progress": pd.DataFrame({"batch": [0]})}, "progress frame columns"),
])
def test_bad_arguments_are_named(healthy, kwargs, named):
    with pytest.raises(BadArgument, match=f"bad {named}"):
        open_checkpoint(healthy).describe(**kwargs)


# --- pure logic ---------------------------------------------------------------------------------
def _watermarks(marks_ms: list[int], handed_on: int, new_data: list[bool] | None = None):
    n = len(marks_ms)
    return pd.DataFrame({"batch": range(n), "committed": [True] * n,
                         "new_data": pd.array(new_data or [True] * n, dtype="boolean"),
                         "watermark_ms": pd.array(marks_ms, dtype="Int64"),
                         "next_watermark_ms": pd.array([*marks_ms[1:], handed_on],
                                                       dtype="Int64")})


def test_a_watermark_is_stalled_only_after_enough_unmoved_batches():
    assert stalled_watermark(_watermarks([0, 5, 5, 5], 5), 3) is not None
    assert stalled_watermark(_watermarks([0, 5, 5, 5], 5), 4) is None
    assert stalled_watermark(_watermarks([0, 5, 6, 7], 8), 1) is None
    # a query without a watermark has none to stall
    assert stalled_watermark(_watermarks([0, 0, 0, 0], 0), 1) is None
    flag = stalled_watermark(_watermarks([0, 5000, 5000, 5000], 5000), 3)
    assert "for the last 3 batches that read data (batches 1..3" in flag.message


def test_slow_commits_are_batches_where_the_commit_dominates():
    frame = pd.DataFrame({"batch": [0, 1], "duration_ms": [100, 100],
                          "state_commit_ms": [10, 49]})
    assert slow_commits(frame, 0.5) is None
    flag = slow_commits(frame, 0.4)
    assert isinstance(flag, Flag) and "in 1 of 2 batches (1)" in flag.message


def test_an_empty_description_renders():
    empty = Description("/ck", pd.DataFrame(), [], pd.DataFrame(), pd.DataFrame())
    assert "no flags" in empty._repr_html_()


def test_the_watermark_axis_shows_whole_times():
    """A flat watermark was labelled ':30' (Vega's seconds-only default for one value)."""
    from statekit.charts.inspect import watermark_per_batch_chart

    flat = pd.DataFrame({"batch": [0, 1, 2], "new_data": [True] * 3,
                         "watermark": pd.to_datetime(["2026-01-05 08:59:30"] * 3)})
    assert watermark_per_batch_chart(flat).to_dict()["encoding"]["y"]["axis"]["format"] == \
        "%H:%M:%S"
    days = flat.assign(watermark=pd.to_datetime(["2026-01-05 23:59", "2026-01-06 00:01",
                                                 "2026-01-06 00:02"]))
    assert watermark_per_batch_chart(days).to_dict()["encoding"]["y"]["axis"]["format"] == \
        "%Y-%m-%d %H:%M:%S"
