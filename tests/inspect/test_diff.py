"""``statekit.diff``: keys added, removed and changed between two snapshots (issue 41 item 4).

Every diff is checked against pandas computing the same state from the input records: the
real flights (nulls in the delays) for an aggregation, small JSON files for a null key and
for a join side whose keys hold lists. Two batches of one store are diffed from Spark's
change feed; anything else by comparing two snapshots; both give the same answer.
"""

from __future__ import annotations

import json
import os
import shutil
import time

import pandas as pd
import pytest
from helpers.plainrun import run_query

import statekit as sk
from statekit.charts.diff import diff_chart, diff_values_chart
from statekit.datasets import FLIGHT_EVENT_SCHEMA, flights
from statekit.errors import BadArgument, BatchNotRetained, CheckpointError
from statekit.inspect.diff_result import KINDS

AGGREGATES = ["count", "sum(dep_delay)", "max(distance)", "avg(arr_delay)"]
VALUES = ["count", "sum_dep_delay", "max_distance", "avg_arr_delay"]


def write_files(folder, files: list[list[str]]) -> None:
    """One file a batch, their modification times one second apart (the file source takes
    them in that order)."""
    folder.mkdir(parents=True, exist_ok=True)
    start = time.time() - 100
    for i, lines in enumerate(files):
        path = folder / f"f{i}.json"
        path.write_text("\n".join(lines) + "\n")
        os.utime(path, (start + i, start + i))


def flight_files() -> list[pd.Series]:
    lines = flights(limit=3000).records["value"]
    return [lines.iloc[i * 1000:(i + 1) * 1000] for i in range(3)]


def expected_state(files: list[pd.Series]) -> pd.DataFrame:
    """The running aggregate per destination after ``files``, computed by pandas."""
    rows = pd.DataFrame([json.loads(v) for part in files for v in part])
    grouped = rows.groupby("dest")
    return pd.DataFrame({"count": grouped.size(),
                         "sum_dep_delay": grouped["dep_delay"].sum(min_count=1),
                         "max_distance": grouped["distance"].max(),
                         "avg_arr_delay": grouped["arr_delay"].mean()})


def run_flights(spark, root, files, name):
    write_files(root / "in", [list(f) for f in files])
    stream = spark.readStream.option("maxFilesPerTrigger", 1).text(str(root / "in"))
    query = sk.start_query(stream, keys=["dest"], aggregates=AGGREGATES, spark=spark,
                           event_schema=FLIGHT_EVENT_SCHEMA, checkpoint=str(root / "ck"),
                           name=name, trigger="available-now")
    query.wait_until_drained(timeout=300)
    query.close()
    return query


@pytest.fixture(scope="module")
def flights_query(spark, tmp_path_factory):
    """The flights in three batches of 1,000, aggregated per destination."""
    return run_flights(spark, tmp_path_factory.mktemp("diff-flights"), flight_files(),
                       "diff-flights")


@pytest.fixture(scope="module")
def flights_rewritten(spark, tmp_path_factory):
    """The same query over the last batch only: a second checkpoint."""
    return run_flights(spark, tmp_path_factory.mktemp("diff-rewritten"), flight_files()[2:],
                       "diff-rewritten")


def expected_kinds(old: pd.DataFrame, new: pd.DataFrame) -> dict[str, set]:
    """Keys of each kind, from two expected states (a destination's count changes whenever
    a flight to it arrives, so a key changed exactly where its count did)."""
    common = old.index.intersection(new.index)
    differ = old.loc[common, "count"] != new.loc[common, "count"]
    return {"added": set(new.index.difference(old.index)),
            "removed": set(old.index.difference(new.index)),
            "changed": set(common[differ.to_numpy()]),
            "unchanged": set(common[~differ.to_numpy()])}


def assert_kinds(d, expected: dict[str, set], key: str) -> None:
    assert d.counts.to_dict() == {k: len(v) for k, v in expected.items()}
    for kind in ("added", "removed", "changed"):
        assert set(d.of(kind)[key]) == expected[kind], kind


def test_two_batches_name_every_key_added_and_changed_with_both_values(flights_query):
    files = flight_files()
    old, new = expected_state(files[:2]), expected_state(files)
    d = sk.diff((flights_query, 1), (flights_query, 2))
    expected = expected_kinds(old, new)
    assert expected["added"] and expected["changed"] and expected["unchanged"]
    assert_kinds(d, expected, "dest")
    assert list(d.frame.columns) == ["change", "dest", *[f"{v}{s}" for v in VALUES
                                                         for s in ("_old", "_new")]]
    assert list(d.frame["change"]) == sorted(d.frame["change"], key=KINDS.index)
    rows = d.frame.set_index("dest")
    for dest in expected["changed"]:
        for column in ("count", "sum_dep_delay", "max_distance"):
            for side, state in (("_old", old), ("_new", new)):
                want, got = state.loc[dest, column], rows.loc[dest, column + side]
                assert (pd.isna(want) and pd.isna(got)) or want == got, (dest, column, side)
        assert rows.loc[dest, "avg_arr_delay_new"] == pytest.approx(
            new.loc[dest, "avg_arr_delay"], nan_ok=True)
    for dest in expected["added"]:
        assert pd.isna(rows.loc[dest, "count_old"])
        assert rows.loc[dest, "count_new"] == new.loc[dest, "count"]
    assert d.batches == (1, 2)
    assert "batch 1" in d.old and "batch 2" in d.new
    assert f"{len(expected['changed']):,} changed" in repr(d)
    assert "StateDiff" in d._repr_html_()


def test_snapshot_frames_and_a_copy_of_the_checkpoint_give_the_same_diff(flights_query,
                                                                         tmp_path):
    """Three ways to the same answer: the change feed (two batches of one store), two
    snapshots compared in Spark (a copy of the checkpoint is another store), and pandas."""
    from_feed = sk.diff((flights_query, 0), (flights_query, 2))
    copy = tmp_path / "copy"
    shutil.copytree(flights_query.checkpoint, copy)
    from_snapshots = sk.diff((flights_query, 0), (sk.open_checkpoint(copy), 2))
    from_frames = sk.diff(flights_query.snapshot(batch=0), flights_query.snapshot(batch=2))
    assert (from_feed.how, from_snapshots.how, from_frames.how) == (
        "change feed", "snapshots", "pandas frames")
    for other in (from_frames, from_snapshots):
        assert other.counts.equals(from_feed.counts)
        pd.testing.assert_frame_equal(other.frame, from_feed.frame, check_dtype=False)
    # the same batch on both sides: nothing differs
    same = sk.diff((flights_query, 1), (flights_query, 1))
    assert same.frame.empty and same.counts["unchanged"] == len(flights_query.snapshot(batch=1))


def test_the_same_operator_in_two_checkpoints_names_removed_keys(flights_query,
                                                                 flights_rewritten):
    files = flight_files()
    d = sk.diff(flights_query, str(flights_rewritten.checkpoint))  # read as the query's state
    expected = expected_kinds(expected_state(files), expected_state(files[2:]))
    assert expected["removed"]
    assert_kinds(d, expected, "dest")
    removed = d.of("removed")
    assert removed["count_new"].isna().all() and removed["count_old"].notna().all()
    assert "avg_arr_delay_old" in d.frame.columns
    # both opened as plain checkpoints: Spark's buffer fields, the same keys and kinds
    plain = sk.diff(str(flights_query.checkpoint), str(flights_rewritten.checkpoint))
    assert plain.counts.equals(d.counts) and "value_sum_old" in plain.frame.columns


NULLS = [[{"k": "a", "v": 1.0}, {"k": "b", "v": 2.0}, {"k": None, "v": 3.0},
          {"k": None, "v": None}],
         [{"k": None, "v": 4.0}, {"k": "c", "v": 5.0}, {"k": "b", "v": 0.0}]]


@pytest.fixture(scope="module")
def null_keys(spark, tmp_path_factory):
    """A plain PySpark aggregation whose key is null for some events, in two batches."""
    from pyspark.sql import functions as F

    root = tmp_path_factory.mktemp("diff-nulls")
    write_files(root / "in", [[json.dumps(r) for r in rows] for rows in NULLS])
    frame = (spark.readStream.schema("k string, v double").option("maxFilesPerTrigger", 1)
             .json(str(root / "in")).groupBy("k").agg(F.count("*").alias("n"),
                                                      F.sum("v").alias("total")))
    return run_query(spark, frame, root / "ck", mode="update")


def test_a_null_key_meets_itself_and_a_key_whose_sum_stayed_still_changed(null_keys):
    d = sk.diff((null_keys, 0), (null_keys, 1))
    assert d.how == "change feed"
    assert d.counts.to_dict() == {"added": 1, "removed": 0, "changed": 2, "unchanged": 1}
    changed = d.of("changed")
    assert changed["k"].isna().sum() == 1  # the null key once, not added and removed
    null_row = changed[changed["k"].isna()].iloc[0]  # Spark's buffer fields: count, sum
    assert (null_row["count_old"], null_row["count_new"]) == (2, 3)
    assert (null_row["sum_old"], null_row["sum_new"]) == (3.0, 7.0)
    b = changed[changed["k"] == "b"].iloc[0]
    assert (b["count_old"], b["count_new"], b["sum_old"], b["sum_new"]) == (1, 2, 2.0, 2.0)
    assert list(d.of("added")["k"]) == ["c"]
    frames = sk.diff(sk.open_checkpoint(null_keys).operator(0).snapshot(0),
                     sk.open_checkpoint(null_keys).operator(0).snapshot(1))
    assert frames.counts.equals(d.counts)


LEFT = [[{"id": 0, "lv": "l0"}, {"id": 1, "lv": "l1"}, {"id": 2, "lv": "l2"}],
        [{"id": 1, "lv": "l1b"}, {"id": 3, "lv": "l3"}]]
RIGHT = [[{"id": i, "rv": f"r{i}"} for i in range(4)], [{"id": 3, "rv": "r3b"}]]


@pytest.fixture(scope="module")
def joined(spark, tmp_path_factory):
    """A stream-stream inner join: each side keeps, per id, the list of its rows."""
    root = tmp_path_factory.mktemp("diff-join")
    ts = "2026-01-05T10:00:00"
    write_files(root / "left", [[json.dumps({**r, "lt": ts}) for r in f] for f in LEFT])
    write_files(root / "right", [[json.dumps({**r, "rt": ts}) for r in f] for f in RIGHT])
    lefts = (spark.readStream.schema("id long, lv string, lt timestamp")
             .option("maxFilesPerTrigger", 1).json(str(root / "left"))
             .withWatermark("lt", "10 minutes"))
    rights = (spark.readStream.schema("id long, rv string, rt timestamp")
              .option("maxFilesPerTrigger", 1).json(str(root / "right"))
              .withWatermark("rt", "10 minutes"))
    return run_query(spark, lefts.join(rights, "id"), root / "ck")


def test_a_join_side_compares_each_key_s_whole_list(joined):
    left = sk.diff((joined, 0), (joined, 1), part="left")
    assert left.how == "snapshots"  # Spark's reader has no change feed of a join side
    assert left.counts.to_dict() == {"added": 1, "removed": 0, "changed": 1, "unchanged": 2}
    # Spark keys a join side by the join key's fields (field0 here: id)
    assert list(left.of("added")["field0"]) == [3]
    assert list(left.of("changed")["field0"]) == [1]
    changed = left.of("changed").iloc[0]
    assert [r["lv"] for r in changed["rows_old"]] == ["l1"]
    assert sorted(r["lv"] for r in changed["rows_new"]) == ["l1", "l1b"]
    right = sk.diff((joined, 0), (joined, 1), part="0/right")
    assert right.counts.to_dict() == {"added": 0, "removed": 0, "changed": 1, "unchanged": 3}
    view = sk.open_checkpoint(joined).state("left")
    frames = sk.diff(view.snapshot(0), view.snapshot(1))
    assert frames.counts.equals(left.counts)
    assert list(frames.of("changed")["field0"]) == [1]


def test_the_chart_shows_the_counts_and_each_changed_key(flights_query):
    d = sk.diff((flights_query, 0), (flights_query, 2))
    spec = diff_chart(d, value="count").to_dict()

    def rows(data: dict) -> list[dict]:  # Altair moves inline data to named datasets
        return spec["datasets"][data["name"]] if "name" in data else data["values"]

    data = {row["change"]: row["keys"] for row in rows(spec["hconcat"][0]["data"])}
    assert data == d.counts.to_dict()
    shown = rows(spec["hconcat"][1]["layer"][0]["data"])
    assert len(shown) == d.counts["changed"]
    assert all(p["count_new"] > p["count_old"] for p in shown)


# --- bad input ---------------------------------------------------------------------------------
def test_snapshots_of_two_shapes_are_refused_naming_both(flights_query, null_keys):
    with pytest.raises(BadArgument) as caught:
        sk.diff(str(flights_query.checkpoint), null_keys)
    message = str(caught.value)
    assert "dest string" in message and "k string" in message


def test_bad_sources_batches_and_parts_are_named(flights_query, joined, tmp_path):
    with pytest.raises(BatchNotRetained, match="99"):
        sk.diff((flights_query, 0), (flights_query, 99))
    with pytest.raises(BadArgument, match="query handle"):
        sk.diff(42, flights_query)
    with pytest.raises(BadArgument, match="pair"):
        sk.diff((flights_query, 0, 1), flights_query)
    with pytest.raises(BadArgument, match="keys"):
        sk.diff(flights_query, flights_query, keys=["dest"])
    with pytest.raises(BadArgument, match="0/left"):  # which part? all of them named
        sk.diff((joined, 0), (joined, 1))
    with pytest.raises(BadArgument, match="0/left"):
        sk.diff(joined, joined, part="middle")
    with pytest.raises(BadArgument, match="the store of query .*'aggregate'"):
        sk.diff(flights_query, flights_query, part="0/left")
    same = sk.diff(flights_query, flights_query, part="aggregate")  # its one part, named
    assert same.counts["unchanged"] == len(flights_query.snapshot())
    with pytest.raises(CheckpointError):
        sk.diff(tmp_path / "nothing-here", flights_query)


def test_bad_frames_are_named():
    plain = pd.DataFrame({"player": ["p1"], "count": [1]})
    with pytest.raises(BadArgument, match="player"):  # no attrs: which columns are keys?
        sk.diff(plain, plain)
    with pytest.raises(BadArgument, match="columns of the old frame"):
        sk.diff(plain, plain, keys=["nope"])
    other = pd.DataFrame({"player": ["p1"], "total": [1]})
    with pytest.raises(BadArgument, match="count int64.*total int64"):
        sk.diff(plain, other, keys="player")
    d = sk.diff(plain, plain.assign(count=[2]), keys="player")
    with pytest.raises(BadArgument, match="added"):
        d.of("unchanged")
    with pytest.raises(BadArgument, match="count"):
        diff_values_chart(d, "score")
    texts = sk.diff(pd.DataFrame({"k": [1], "s": ["a"]}), pd.DataFrame({"k": [1], "s": ["b"]}),
                    keys=["k"])
    with pytest.raises(BadArgument, match="numeric"):
        diff_values_chart(texts, "s")


def test_frames_with_missing_values_lists_and_duplicate_keys_compare_by_value():
    old = pd.DataFrame({"k": ["a", "a", "b", None, "d"], "v": [1.0, 2.0, float("nan"), 4.0,
                                                                 None]})
    new = pd.DataFrame({"k": ["a", "a", "b", None, "d"], "v": [1.0, 3.0, float("nan"), 4.0,
                                                                 None]})
    d = sk.diff(old, new, keys=["k"])
    assert d.counts.to_dict() == {"added": 0, "removed": 0, "changed": 1, "unchanged": 3}
    assert d.value_columns == ["rows"]
    assert d.of("changed")["rows_new"].iloc[0] == [{"v": 1.0}, {"v": 3.0}]


def test_windows_the_watermark_dropped_are_removed_in_the_change_feed_as_in_snapshots(
        spark, tmp_path):
    """Hourly windows of the flights with a one-hour watermark: later batches drop the
    early windows (deletes in Spark's change feed). The feed's diff equals the diff of the
    two snapshots compared in pandas and of a copy of the checkpoint compared in Spark."""
    files = flight_files()
    write_files(tmp_path / "in", [list(f) for f in files])
    stream = spark.readStream.option("maxFilesPerTrigger", 1).text(str(tmp_path / "in"))
    query = sk.start_query(stream, keys=["origin"], window=sk.tumbling("1 hour"),
                           watermark="1 hour", aggregates=["count", "max(dep_delay)"],
                           spark=spark, event_schema=FLIGHT_EVENT_SCHEMA,
                           checkpoint=str(tmp_path / "ck"), name="diff-windows",
                           trigger="available-now")
    query.wait_until_drained(timeout=300)
    query.close()
    from_feed = sk.diff((query, 0), (query, 2))
    assert from_feed.counts["removed"] > 0 and from_feed.counts["added"] > 0
    removed = from_feed.of("removed")
    assert removed["count_new"].isna().all()
    assert (removed["window_end"] <= query.snapshot(batch=2)["window_start"].min()).all()
    from_frames = sk.diff(query.snapshot(batch=0), query.snapshot(batch=2))
    shutil.copytree(tmp_path / "ck", tmp_path / "copy")
    from_copy = sk.diff((query, 0), (str(tmp_path / "copy"), 2))
    assert (from_feed.how, from_copy.how) == ("change feed", "snapshots")
    for other in (from_frames, from_copy):
        assert other.counts.equals(from_feed.counts)
        pd.testing.assert_frame_equal(other.frame, from_feed.frame, check_dtype=False)
