"""statekit.attach on a person's own PySpark job: a deduplication, a stream-stream join and a
windowed aggregation in one query, fed from JSON files, written to Spark's memory sink.

The job runs twice on the same input, once attached and once not: the outputs must be equal
row for row, and the attached run's checkpoint must hold nothing but Spark's own files. The
state of every operator is checked against pandas over the same input.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers.livecheck import (
    assert_replays_to_snapshot,
    assert_routed_gets_equal_snapshot,
    comparable,
)
from pyspark.sql import functions as F

import statekit as sk
from statekit.errors import (
    BadArgument,
    BatchNotRetained,
    CheckpointError,
    StatekitError,
    UnsupportedRead,
)
from statekit.spark_state.changes import apply_changes, same_rows

pytestmark = pytest.mark.timeout(600)

EVENTS = "event_id STRING, player STRING, score INT, ts TIMESTAMP"
PROFILES = "player STRING, team STRING, pts TIMESTAMP"
T0 = dt.datetime(2026, 1, 1, 12, 0)
FILES = 6
DELAY = dt.timedelta(minutes=10)


def _write(folder: Path, name: str, rows: list[dict], i: int = 0) -> None:
    """File ``i`` of a source, modified ``i`` seconds after the first (Spark's file source
    takes new files in modification order: files written in one instant, in any order)."""
    tmp = folder / f".{name}"
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    tmp.rename(folder / name)
    stamp = time.time() - 600 + i
    os.utime(folder / name, (stamp, stamp))


def _inputs(base: Path) -> tuple[Path, Path, pd.DataFrame, pd.DataFrame]:
    """Six files a side: events 7 s apart (each id sent twice, the copy in the next file:
    a duplicate across batches), and each player's team, restated every 8 minutes."""
    events_dir, profiles_dir = base / "events", base / "profiles"
    events_dir.mkdir()
    profiles_dir.mkdir()
    events, profiles = [], []
    for i in range(FILES):
        batch = [{"event_id": f"e{i}-{k}", "player": f"p{k % 5}", "score": i * 10 + k,
                  "ts": (T0 + dt.timedelta(minutes=8 * i, seconds=7 * k + 1)).isoformat()}
                 for k in range(12)]
        copies = [dict(e) for e in events[-3:]]  # resent late: the same ids, the same values
        profile = [{"player": f"p{j}", "team": ["red", "blue", "gold"][(i + j) % 3],
                    "pts": (T0 + dt.timedelta(minutes=8 * i, seconds=3)).isoformat()}
                   for j in range(5)]
        _write(events_dir, f"e{i:02d}.json", batch + copies, i)
        _write(profiles_dir, f"p{i:02d}.json", profile, i)
        events += batch
        profiles += profile
    ev, pr = pd.DataFrame(events), pd.DataFrame(profiles)
    ev["ts"], pr["pts"] = pd.to_datetime(ev["ts"]), pd.to_datetime(pr["pts"])
    return events_dir, profiles_dir, ev, pr


def own_job(spark, events_dir: Path, profiles_dir: Path, checkpoint: Path, name: str):
    """A plain PySpark job, as a person writes it: nothing of statekit in it."""
    events = (spark.readStream.schema(EVENTS).option("maxFilesPerTrigger", 1)
              .json(str(events_dir)).withWatermark("ts", "10 minutes")
              .dropDuplicatesWithinWatermark(["event_id"]).withColumnRenamed("player", "who"))
    profiles = (spark.readStream.schema(PROFILES).option("maxFilesPerTrigger", 1)
                .json(str(profiles_dir)).withWatermark("pts", "10 minutes"))
    joined = events.join(profiles, F.expr(
        "who = player AND ts BETWEEN pts - INTERVAL 4 MINUTES AND pts + INTERVAL 4 MINUTES"))
    totals = (joined.groupBy(F.window("ts", "5 minutes"), "team")
              .agg(F.count("*").alias("events"), F.sum("score").alias("points"),
                   F.avg("score").alias("avg_score"), F.min("score").alias("low"),
                   F.max("score").alias("high")))
    return (totals.writeStream.format("memory").queryName(name).outputMode("append")
            .option("checkpointLocation", str(checkpoint))
            .trigger(processingTime="200 milliseconds").start())


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.fixture(scope="module")
def job(spark, broker, tmp_path_factory):
    """The job attached (read while it runs, a changelog per part shipped) and the same job
    unattached, both drained."""
    base = tmp_path_factory.mktemp("own-job")
    events_dir, profiles_dir, events, profiles = _inputs(base)
    plain = own_job(spark, events_dir, profiles_dir, base / "ck-plain", "own_plain")
    query = own_job(spark, events_dir, profiles_dir, base / "ck-live", "own_live")
    live = sk.attach(query, kafka=broker, ledger_dir=base / "ledgers")
    live.wait_for_batches(2, timeout=180)
    live.states()  # read while it runs
    live.snapshot("0/default")
    query.processAllAvailable()
    plain.processAllAvailable()
    live.wait_shipped()
    yield live, query, plain, events, profiles, base
    live.close()
    for q in (query, plain):
        q.stop()


def _watermark(live, batch: int) -> pd.Timestamp:
    """The watermark batch ``batch`` ran with (its offset log entry)."""
    ms = live.checkpoint.offset_metadata(batch)["batchWatermarkMs"]
    return pd.Timestamp(ms, unit="ms")


def _joined(events: pd.DataFrame, profiles: pd.DataFrame) -> pd.DataFrame:
    merged = events.merge(profiles, on="player")
    near = (merged["ts"] - merged["pts"]).abs() <= pd.Timedelta(minutes=4)
    return merged[near]


def test_every_part_of_the_three_operators_is_listed_by_name(job):
    live = job[0]
    states = live.states()
    assert list(states["part"]) == ["0/default", "1/left", "1/right", "1/left-keyToNumValues",
                                    "1/left-keyWithIndexToValue", "1/right-keyToNumValues",
                                    "1/right-keyWithIndexToValue", "2/default"]
    assert dict(zip(states["operator_id"], states["kind"], strict=False)) == {
        0: "aggregation", 1: "join", 2: "deduplication"}
    assert not states.set_index("part").loc["1/left", "change_feed"]
    operators = live.operators()
    assert set(operators["operator"]) == {"stateStoreSave", "symmetricHashJoin",
                                          "dedupeWithinWatermark"}


def test_the_attached_job_gives_the_same_output_and_its_checkpoint_only_sparks_files(job, spark):
    live, query, plain, *_, base = job
    def rows(name):
        out = spark.sql(f"SELECT window.start AS s, team, events, points FROM {name}").toPandas()
        return out.sort_values(["s", "team"], ignore_index=True)
    attached, alone = rows("own_live"), rows("own_plain")
    assert len(attached) > 0
    pd.testing.assert_frame_equal(attached, alone)
    assert live.last_batch == plain.lastProgress["batchId"] or live.last_batch >= 5
    # the same kinds of files in both checkpoints: statekit added none
    strip = {f for f in _files(base / "ck-live") if "_statekit" in f}
    assert strip == set()
    top = {p.name for p in (base / "ck-live").iterdir()}
    assert top == {p.name for p in (base / "ck-plain").iterdir()}


def test_the_dedup_state_equals_the_ids_pandas_keeps_within_the_watermark(job):
    live, _, _, events, *_ = job
    batch = live.last_batch
    snap = live.snapshot("2/default", batch)
    assert snap.attrs["part"] == "2/default" and snap.attrs["batch"] == batch
    watermark = _watermark(live, batch)
    first = events.drop_duplicates("event_id")
    expires = first["ts"] + DELAY
    kept = set(first.loc[expires >= watermark, "event_id"])
    key = [c for c in snap.columns if c.endswith("event_id")][0]
    assert set(snap[key]) == kept
    assert 0 < len(kept) < len(first)  # the watermark did evict old ids


def test_both_join_sides_hold_the_rows_pandas_keeps_and_the_aggregation_every_open_window(job):
    live, _, _, events, profiles, _ = job
    batch = live.last_batch
    watermark = _watermark(live, batch)
    bound = pd.Timedelta(minutes=4)  # a row older than watermark - 4 minutes can match no more
    first = events.drop_duplicates("event_id")
    left = live.snapshot("left", batch)  # Spark keeps only the columns used downstream
    kept = first[first["ts"] > watermark - bound]
    assert 0 < len(kept) < len(first)
    assert sorted(zip(left["who"], left["score"], strict=True)) == \
        sorted(zip(kept["player"], kept["score"], strict=True))
    right = live.snapshot("1/right", batch)
    kept = profiles[profiles["pts"] > watermark - bound]
    assert sorted(zip(right["player"], right["team"], pd.to_datetime(right["pts"]),
                      strict=True)) == \
        sorted(zip(kept["player"], kept["team"], kept["pts"], strict=True))
    joined = _joined(first, profiles)
    joined = joined.assign(start=joined["ts"].dt.floor("5min"))
    expected = (joined.groupby(["start", "team"]).agg(events=("score", "size"),
                                                       points=("score", "sum")).reset_index())
    # Spark lets the watermark through the join late by its time bound: the aggregation
    # after it evicts a window once its end is behind watermark - 4 minutes
    expected = expected[expected["start"] + pd.Timedelta(minutes=5) > watermark - bound]
    agg = live.snapshot("0/default", batch)
    got = agg.rename(columns={"window_start": "start"})
    cols = ["start", "team", "events", "points"]
    pd.testing.assert_frame_equal(
        got.sort_values(cols, ignore_index=True)[cols],
        expected.sort_values(cols, ignore_index=True)[cols],
        check_dtype=False)


def test_the_join_sides_are_keyed_by_the_join_columns_not_spark_s_field0(job):
    """``who = player``: the left side's join key is ``who``, the right's ``player``; each
    side's row keeps its own copy of the key column too (``value_who``)."""
    live, _, _, events, profiles, _ = job
    batch = live.last_batch
    assert live.state("1/left").key_columns == ["who"]
    assert live.state("1/right").key_columns == ["player"]
    assert live.state("1/left-keyWithIndexToValue").key_columns == ["who", "index"]
    assert live.state("1/right-keyToNumValues").key_columns == ["player"]
    left = live.snapshot("1/left", batch)
    assert list(left.columns) == ["who", "value_who", "score", "ts", "partition"]
    assert left.attrs["key_columns"] == ["who"] and (left["who"] == left["value_who"]).all()
    # each join key's rows held, as pandas counts them from the input
    first = events.drop_duplicates("event_id")
    held = first[first["ts"] > _watermark(live, batch) - pd.Timedelta(minutes=4)]
    assert left.groupby("who").size().to_dict() == held.groupby("player").size().to_dict()
    counts = live.snapshot("1/left-keyToNumValues", batch)
    assert dict(zip(counts["who"], counts["value"], strict=True)) == \
        held.groupby("player").size().to_dict()
    right = live.snapshot("1/right", batch)
    assert list(right.columns) == ["player", "value_player", "team", "pts", "partition"]
    kept = profiles[profiles["pts"] > _watermark(live, batch) - pd.Timedelta(minutes=4)]
    assert right.groupby("player").size().to_dict() == kept.groupby("player").size().to_dict()


def test_the_aggregation_carries_the_aliases_and_its_average_equals_pandas_mean(job):
    """count, sum, min and max are kept as their results: named by their aliases; avg is
    kept as its buffer (sum and count: ``avg_score_sum``, ``avg_score_count``) and statekit
    derives ``avg_score`` = sum / count, equal to pandas' mean of each group."""
    live, _, _, events, profiles, _ = job
    batch = live.last_batch
    agg = live.snapshot("0/default", batch)
    assert list(agg.columns) == ["window_start", "window_end", "team", "events", "points",
                                 "avg_score", "avg_score_sum", "avg_score_count", "low",
                                 "high", "partition"]
    schema = live.state("0/default").schema().set_index("column")
    assert schema.loc["avg_score", "field"] == "value.sum / value.count"
    assert schema.loc["events", "field"] == "value.count"
    assert schema.loc["avg_score_count", "field"] == "value.count"
    joined = _joined(events.drop_duplicates("event_id"), profiles)
    joined = joined.assign(window_start=joined["ts"].dt.floor("5min"))
    expected = joined.groupby(["window_start", "team"])["score"].agg(
        ["size", "sum", "mean", "min", "max"])
    got = agg.set_index(["window_start", "team"])
    assert len(got) > 0
    expected = expected.loc[got.index]   # the windows still open at this batch
    assert (got["avg_score"] == expected["mean"]).all()   # exactly: sum / count in doubles
    assert (got["avg_score_sum"] == expected["sum"]).all()
    assert (got["avg_score_count"] == expected["size"]).all()
    assert (got["events"] == expected["size"]).all() and (got["points"] == expected["sum"]).all()
    assert (got["low"] == expected["min"]).all() and (got["high"] == expected["max"]).all()
    changes = live.changes("0/default", 0, batch)
    assert {"avg_score", "events", "low"} <= set(changes.columns)
    puts = changes[changes["change"] == "put"]
    assert (puts["avg_score"] == puts["avg_score_sum"] / puts["avg_score_count"]).all()


def test_spark_s_own_names_are_one_argument_away(job):
    live = job[0]
    batch = live.last_batch
    left = live.snapshot("1/left", batch, names="spark")
    assert list(left.columns) == ["field0", "who", "score", "ts", "partition"]
    assert live.state("1/left-keyWithIndexToValue", names="spark").key_columns == \
        ["field0", "index"]
    agg = live.snapshot("0/default", batch, names="spark", sort=True)
    assert list(agg.columns) == ["window_start", "window_end", "team", "count", "sum",
                                 "value_sum", "value_count", "min", "max", "partition"]
    assert list(live.changes("0/default", 0, batch, names="spark").columns) == \
        ["batch", "change", *agg.columns]
    own = live.snapshot("0/default", batch, sort=True)
    assert (own["avg_score_sum"].to_numpy() == agg["value_sum"].to_numpy()).all()
    # a checkpoint read alone has no plan to name them by: Spark's names
    from statekit.inspect import open_checkpoint

    alone = open_checkpoint(live.checkpoint.path, spark=live.spark)
    assert alone.state("left", 1).key_columns == ["field0"]
    assert alone.state("default", 0).value_columns == ["count", "sum", "value_sum",
                                                       "value_count", "min", "max"]
    with pytest.raises(BadArgument, match="names.*'own'.*'spark'"):
        live.snapshot("1/left", names="mine")


def test_a_query_that_gives_no_plan_keeps_spark_s_names(job, monkeypatch):
    """Before a query has run a batch since it started, explain() has no plan to tell."""
    from pyspark.sql.streaming import StreamingQuery

    query = job[1]
    monkeypatch.setattr(StreamingQuery, "explain", lambda self, extended=False: print(
        "No physical plan. Waiting for data."))
    other = sk.attach(query)
    try:
        assert other.plan_names() == {}
        assert other.state("1/left").key_columns == ["field0"]
        assert "count" in other.snapshot("0/default").columns
    finally:
        other.close()


def test_each_parts_change_feed_replays_to_its_snapshot(job):
    live = job[0]
    batch = live.last_batch
    for part in ("0/default", "2/default", "1/left-keyWithIndexToValue"):
        view = live.state(part)
        changes = live.changes(part, 0, batch)
        assert changes.attrs["part"] == part
        replayed = apply_changes(changes, view.key_columns, view.value_columns)
        snap = live.snapshot(part, batch)
        cols = view.key_columns + view.value_columns
        left = replayed[cols].sort_values(view.key_columns, ignore_index=True).astype(str)
        right = snap[cols].sort_values(view.key_columns, ignore_index=True).astype(str)
        pd.testing.assert_frame_equal(left, right, obj=part)


def test_each_part_with_a_change_feed_ships_a_topic_that_replays_to_its_snapshot(job):
    live = job[0]
    topics = live.changelog_topics()
    assert topics == {
        "0/default": "own_live-op0-default-changelog",
        "1/left": "own_live-op1-left-changelog", "1/right": "own_live-op1-right-changelog",
        "1/left-keyToNumValues": "own_live-op1-left-keyToNumValues-changelog",
        "1/left-keyWithIndexToValue": "own_live-op1-left-keyWithIndexToValue-changelog",
        "1/right-keyToNumValues": "own_live-op1-right-keyToNumValues-changelog",
        "1/right-keyWithIndexToValue": "own_live-op1-right-keyWithIndexToValue-changelog",
        "2/default": "own_live-op2-default-changelog"}
    batch = live.wait_shipped()
    for part in topics:
        if live.part_shape(part).lists:  # a join side: test_a_join_sides_changelog_...
            continue
        log = live.read_changelog(part)
        assert set(log.batches) <= set(range(batch + 1)) and len(log) > 0
        # each batch's changes exactly once: as many records as Spark's change feed has
        assert len(log) == len(live.changes(part, 0, batch)), part
        view = live.state(part)
        if "ts" in log.records:  # JSON's ISO text read back as the part's timestamps
            assert str(log.records["ts"].dtype).startswith("datetime64"), part
        columns = view.key_columns + view.value_columns
        pd.testing.assert_frame_equal(comparable(log.materialize(batch), columns),
                                      comparable(live.snapshot(part, batch), columns),
                                      obj=part)


def test_every_round_reads_all_parts_changes_in_one_spark_job(job):
    """The writers' own round records: each Arrow read (one Spark job) of a round brought the
    changes of every part, each part shipped in a transaction of its own."""
    live = job[0]
    live.wait_shipped()
    writers = live.changelogs
    reads: dict[int, list[tuple[str, int, int]]] = {}
    for part, writer in writers.items():
        for r in writer.rounds:
            reads.setdefault(r.read, []).append((part, r.first, r.last))
    assert reads
    for read, rounds in reads.items():
        parts = [part for part, _, _ in rounds]
        assert len(parts) == len(set(parts)), read  # a part once a read
        assert len({last for _, _, last in rounds}) == 1, rounds  # the same batches
    # as many Spark jobs as rounds of the part with the most, not as rounds of all parts
    assert len(reads) == max(len(w.rounds) for w in writers.values())
    assert max(len(rounds) for rounds in reads.values()) == len(writers)


def _records(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    return comparable(frame, ["batch", "partition", "deleted", *columns])


def test_every_parts_changelog_equals_spark_s_change_feed_record_for_record(job):
    live = job[0]
    batch = live.wait_shipped()
    from statekit.inspect.lists import list_changes_frame

    for part, writer in live.changelogs.items():
        view = live.state(part)
        source = writer.source
        log = live.read_changelog(part).records.assign(deleted=lambda f: f["tombstone"])
        if source.shape.lists:  # the oracle: each touched key's list, read from snapshots
            spark_changes = list_changes_frame(view, source.touched_by, 0, batch).toPandas()
            columns = list(source.key_columns)
            log = log.assign(rows=log["rows"].map(lambda rows: _sorted_rows(rows)))
            spark_changes["rows"] = spark_changes["rows"].map(_sorted_rows)
            columns.append("rows")
        else:
            spark_changes = live.changes(part, 0, batch)
            columns = list(source.key_columns) + list(source.value_columns)
        spark_changes = spark_changes.assign(deleted=spark_changes["change"] == "delete")
        if not source.shape.lists:  # a delete's value columns: none on either side
            values = list(source.value_columns)
            for frame in (log, spark_changes):
                frame[values] = frame[values].astype(object)  # None in an Int64 column
                frame.loc[frame["deleted"], values] = None
        assert len(log) == len(spark_changes), part
        pd.testing.assert_frame_equal(_records(log, columns), _records(spark_changes, columns),
                                      obj=part)


def _sorted_rows(rows) -> str | None:
    """A key's list as text in one order (the order of a join key's rows does not matter),
    times as UTC instants (JSON carries them as ISO text)."""
    if rows is None or (not isinstance(rows, list | tuple | np.ndarray) and pd.isna(rows)):
        return None
    rows = [r.asDict() if hasattr(r, "asDict") else dict(r) for r in rows]

    def instant(value):
        if isinstance(value, dt.datetime) or (isinstance(value, str) and len(value) > 18
                                              and value[4] == "-" and value[10] == "T"):
            return str(pd.to_datetime(value, utc=True))
        return value

    return json.dumps(sorted(json.dumps({k: instant(v) for k, v in r.items()},
                                        sort_keys=True) for r in rows))


def test_a_list_parts_records_are_the_same_scanning_every_batch_or_the_touched_ones(
        job, monkeypatch):
    """A round of many batches reads first which batches touched a join key and scans the
    side's snapshot after those only (``inspect.lists.touched_batches``): the records are
    those of a scan after every batch, and batches that touched none ship nothing. (Spark's
    reference, ``list_changes_frame``, scans the touched batches only too: the record-for-record
    test above compares it with the changelog; run here after every batch it cost 100 s.)"""
    from statekit.changelog import list_records, writer
    from statekit.inspect import lists

    live = job[0]
    last = live.wait_shipped()
    assert last >= 2
    def records(source, scan_every: int) -> list[dict]:
        monkeypatch.setattr(lists, "SCAN_EVERY_BATCH_UP_TO", scan_every)
        read = list_records.elements_frame(source.view, source.touched_by, 0, last,
                                           writer._json_bytes).toArrow()
        return list_records.assemble(read).to_pylist()

    for part in ("1/left", "1/right"):
        source = live.changelogs[part].source
        touched = lists.touched_batches(source.touched_by, 0, last)
        everywhere, only_touched = records(source, last + 1), records(source, 0)
        assert only_touched == everywhere and only_touched, part
        assert sorted({r["batch"] for r in only_touched}) == touched, part


def test_a_join_sides_changelog_holds_each_join_keys_whole_list_and_replays_to_its_snapshot(
        job):
    live = job[0]
    batch = live.wait_shipped()
    for part in ("1/left", "1/right"):
        shape = live.part_shape(part)
        view = live.state(part)
        assert shape.value_columns == ("rows",) and shape.key_columns == tuple(view.key_columns)
        assert [name for name, _ in shape.list_columns] == view.value_columns
        log = live.read_changelog(part)
        # one record per join key a batch touched: never more than the stores' changes
        touched = live.changes(f"{part}-keyToNumValues", 0, batch)
        assert 0 < len(log) <= len(touched) + len(live.changes(
            f"{part}-keyWithIndexToValue", 0, batch)), part
        puts = log.records[~log.records["tombstone"]]
        assert puts["rows"].map(len).min() >= 1   # a key with no row left is a tombstone
        assert_replays_to_snapshot(live, part, batch)
        assert_replays_to_snapshot(live, part, batch // 2)   # the lists as they were then


def test_a_parts_changelog_restores_local_stores_equal_to_its_snapshot(job, broker, tmp_path):
    from statekit.restore.rebuild import restore_stores

    live = job[0]
    batch = live.wait_shipped()
    for part in ("2/default", "1/right-keyWithIndexToValue"):
        shape = live.part_shape(part)
        assert shape.kind in ("deduplication", "join") and shape.query == "own_live"
        with restore_stores(broker, live.changelog_topics()[part], shape,
                            tmp_path / part.replace("/", "_")) as restored:
            columns = list(shape.key_columns + shape.value_columns)
            pd.testing.assert_frame_equal(comparable(restored.table(), columns),
                                          comparable(live.snapshot(part, batch), columns),
                                          obj=part)


@pytest.mark.parametrize("part", ["0/default", "2/default", "1/left-keyWithIndexToValue",
                                  "1/left"])
def test_a_routed_get_of_every_key_of_a_part_equals_its_snapshot_where_spark_placed_it(
        job, part, tmp_path):
    """A windowed aggregation (its window's times are key columns), a deduplication, a
    join store (its ``index`` is a key column Spark does not hash) and a join side (a
    list of rows per join key)."""
    import httpx

    live = job[0]
    shape = live.part_shape(part)

    def over_rest(client):  # the key's schema names the part's key columns
        url = next(iter(client.urls.values()))
        spec = httpx.get(f"{url}/openapi.json", timeout=30).json()
        assert all(c in json.dumps(spec) for c in shape.key_columns)
        if part == "1/left":  # a join side is looked up by the join's column, as named
            who = str(live.snapshot(part)["who"].iloc[0])
            assert shape.key_columns == ("who",) and shape.placement_columns == ("who",)
            assert client.get({"who": who}).rows[0]["who"] == who
            with pytest.raises(BadArgument, match=r"missing \['who'\]"):
                client.get({"field0": who})

    assert_routed_gets_equal_snapshot(live, part, tmp_path, then=over_rest)


def test_a_changelog_is_read_and_replayed_to_any_batch_shipped_and_no_further(job):
    """A batch that changed nothing in a part leaves no record yet is shipped: reading or
    replaying up to it works. A batch not shipped yet, a batch that is not a batch id and a
    part that does not exist are refused, each named."""
    live = job[0]
    batch = live.wait_shipped()
    for part in live.changelog_topics():
        log = live.read_changelog(part, to_batch=batch)
        assert log.last_batch >= batch and (log.records["batch"] <= batch).all(), part
        # replayed up to the last batch, which left no record in some parts (notebook 12's
        # deduplication, whose ids carry no event time, is always one of them)
        assert same_rows(live.snapshot(part, batch), live.replay(part, batch)), part
    with pytest.raises(StatekitError, match=rf"batch {batch + 1000} of part '2/default' is "
                                            rf"not in its changelog yet: it is shipped "
                                            rf"through batch \d+; wait_shipped"):
        live.replay("2/default", batch + 1000)
    with pytest.raises(BadArgument, match="to_batch.*'last'"):
        live.read_changelog("2/default", to_batch="last")
    with pytest.raises(BadArgument, match="'3/default'"):
        live.replay("3/default")


def test_a_part_without_a_changelog_says_which_parts_have_one(job):
    other = sk.attach(job[1])   # attached again, without kafka=: no part is shipped
    try:
        with pytest.raises(StatekitError, match="'1/left' has no changelog here; parts "
                                                "shipped: none: attach with kafka="):
            other.read_changelog("left")
    finally:
        other.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="thread niceness is Linux's")
def test_the_shipping_threads_run_below_the_query(job):
    from statekit.live.shipped_parts import SHIP_NICE

    writers = job[0].changelogs.values()
    # every part ships in the one thread of the query's shared rounds, none of its own
    assert all(w._thread is None for w in writers)
    (rounds,) = {w.shared for w in writers}
    # Linux caps niceness at 19 (a suite run under ``nice`` starts closer to it)
    assert os.getpriority(os.PRIO_PROCESS, rounds._thread.native_id) == \
        min(19, os.getpriority(os.PRIO_PROCESS, 0) + SHIP_NICE)


@pytest.mark.parametrize("bad", [-1, 20, 2.5, "low"])
def test_a_bad_ship_nice_is_refused_before_anything_is_attached(job, broker, bad):
    from statekit.errors import BadArgument

    with pytest.raises(BadArgument, match=r"bad ship_nice: .*accepted: a niceness from 0"):
        sk.attach(job[1], kafka=broker, ship_nice=bad)


def test_a_second_attach_with_kafka_is_refused_naming_the_first(job, broker):
    """Two handles shipping one query's parts would fence each other's writers."""
    from statekit.errors import AlreadyAttached

    live, query = job[0], job[1]
    with pytest.raises(AlreadyAttached) as err:
        sk.attach(query, kafka=broker, ledger_dir=job[-1] / "second-ledgers")
    message = str(err.value)
    assert "already attached with kafka= by another handle" in message
    assert all(topic in message for topic in live.changelog_topics().values()), message
    assert "close() first" in message and err.value.handle is live
    assert live.wait_shipped() == live.last_batch  # the first handle still ships, unfenced


def test_the_ledgers_are_outside_the_checkpoint(job):
    *_, base = job
    ledgers = sorted(p.name for p in (base / "ledgers").iterdir())
    assert "own_live-op2-default-changelog.json" in ledgers and len(ledgers) == 8
    assert not any("_statekit" in f or f.endswith(".json") and "changelog" in f
                   for f in _files(base / "ck-live"))


def test_progress_has_every_batch_and_each_operators_rows(job):
    live = job[0]
    progress = live.progress()
    assert live.last_batch in set(progress["batch"])
    per_operator = live.operator_progress()
    last = per_operator[per_operator["batch"] == per_operator["batch"].max()]
    assert set(last["operator"]) == {"stateStoreSave", "symmetricHashJoin",
                                     "dedupeWithinWatermark"}
    assert int(last["rows"].sum()) == int(progress.iloc[-1]["state_rows_total"])
    description = live.describe()
    assert set(description.table["operator_id"]) == {0, 1, 2}
    # Spark reports operators in plan order, which is their ids' order
    ids = dict(zip(per_operator["operator_id"], per_operator["operator"], strict=False))
    assert ids == {0: "stateStoreSave", 1: "symmetricHashJoin", 2: "dedupeWithinWatermark"}


def test_the_dashboards_frames_flags_and_chart(job):
    from statekit.charts import operators_chart

    live = job[0]
    removed = live.operator_progress().groupby("operator_id")["rows_removed"].sum()
    assert int(removed[2]) > 0  # the watermark evicts old ids
    assert 2 not in set(live.growing_operators(batches=3)["operator_id"])
    lag = live.watermark_lag().dropna()
    assert len(lag) > 0 and (lag["lag_s"] > 0).all()
    behind = live.changelog_lag()
    assert len(behind) == 8 and (behind["batches_behind"] == 0).all()
    chart = operators_chart(live.operator_progress()).to_dict()
    text = json.dumps(chart)
    assert [m["mark"]["type"] for m in chart["hconcat"]] == ["line", "bar"]
    for label in ("0 stateStoreSave", "1 symmetricHashJoin", "2 dedupeWithinWatermark"):
        assert f'"label": "{label}"' in text


def test_the_live_dashboard_draws_each_operator_its_memory_and_the_changelog_lag(job):
    from statekit.widgets import AttachedDashboard

    live = job[0]
    board = AttachedDashboard(live, every=0.2, start=False)
    try:
        health = board.refresh()
        assert health.last_batch == live.last_batch and health.active
        pd.testing.assert_frame_equal(health.operators, live.operator_progress())
        assert health.growing.empty   # the watermark bounds every operator of this job
        for label in ("0 stateStoreSave", "1 symmetricHashJoin", "2 dedupeWithinWatermark"):
            assert label in board.status.value
            for panel in ("operators", "memory"):
                assert f'"label": "{label}"' in json.dumps(board.charts[panel].chart.to_dict())
        last = health.operators.groupby("operator_id").tail(1)
        assert (last["memory_bytes"] > 0).all()
        assert "changelogs: 0 batches behind at most" in board.status.value
        assert all(topic in board.flags.value for topic in live.changelog_topics().values())
        assert board.start().running   # the thread refreshes while the query runs
    finally:
        board.close()
    assert not board.running


@pytest.mark.parametrize("bad", ["own_live", None])
def test_the_live_dashboard_takes_an_attached_query_only(job, bad):
    from statekit.errors import BadArgument
    from statekit.widgets import AttachedDashboard

    with pytest.raises(BadArgument, match=r"bad live: .*accepted: an AttachedQuery"):
        AttachedDashboard(bad, start=False)
    with pytest.raises(BadArgument, match=r"bad every: 0.*seconds > 0"):
        AttachedDashboard(job[0], every=0, start=False)


def test_every_row_of_every_part_is_where_statekit_computes_spark_places_it(job):
    live = job[0]
    checked = 0
    for part in live.states()["part"]:
        snap = live.snapshot(part)
        placed = live.state_partitions(part, snap)
        assert (placed == snap["partition"].to_numpy()).all(), part
        checked += len(snap)
    assert checked > 100 and live.checkpoint.shuffle_partitions() == 3


def test_a_join_side_has_no_change_feed_and_says_which_store_does(job):
    with pytest.raises(UnsupportedRead, match="left-keyWithIndexToValue"):
        job[0].changes("1/left", 0)


@pytest.mark.parametrize("part", ["nope", "default", "3/default", 0, None])
def test_a_part_that_is_not_there_is_named_with_the_parts_there_are(job, part):
    with pytest.raises(BadArgument) as err:
        job[0].snapshot(part)
    assert repr(part) in str(err.value) and "0/default, 1/left" in str(err.value)


def test_a_batch_not_retained_is_refused(job):
    with pytest.raises(BatchNotRetained, match="999"):
        job[0].snapshot("0/default", 999)


def test_a_name_alone_works_where_one_operator_has_it(job):
    live = job[0]
    assert live.snapshot("right").attrs["part"] == "1/right"
    assert live.state("left-keyToNumValues").part.store == "left-keyToNumValues"


def test_detach_leaves_the_query_running_and_the_handle_closed(job, spark):
    *_, base = job
    live, query = job[0], job[1]
    again = sk.attach(query)
    again.close()
    again.close()  # twice is fine
    assert query.isActive
    with pytest.raises(StatekitError, match="detached"):
        again.snapshot("0/default")
    assert live.snapshot("0/default").attrs["part"] == "0/default"  # others unaffected


# --- bad input -----------------------------------------------------------------------------
def test_what_is_not_a_streaming_query_is_refused_by_type():
    with pytest.raises(BadArgument, match="'DataFrame'.*StreamingQuery"):
        sk.attach(pd.DataFrame())


def test_a_checkpoint_of_another_query_is_refused_naming_both(job):
    *_, base = job
    query, plain = job[1], job[2]
    with pytest.raises(CheckpointError, match=f"belongs to query id {plain.id}.*{query.id}"):
        sk.attach(query, checkpoint=str(base / "ck-plain"))
    with pytest.raises(CheckpointError, match="does not exist"):
        sk.attach(query, checkpoint=str(base / "nowhere"))
    with pytest.raises(BadArgument, match="checkpoint"):
        sk.attach(query, checkpoint=42)
    assert query.isActive


def test_the_right_checkpoint_given_three_ways_is_accepted(job):
    *_, base = job
    query = job[1]
    for given in (str(base / "ck-live"), base / "ck-live", f"file:{base / 'ck-live'}"):
        handle = sk.attach(query, checkpoint=given)
        assert Path(str(handle.checkpoint)) == base / "ck-live"
        handle.close()


def _small_query(spark, tmp_path, stateful: bool, name: str):
    source = tmp_path / "in"
    source.mkdir()
    _write(source, "a.json", [{"event_id": f"e{i}", "player": "p1", "score": i,
                               "ts": T0.isoformat()} for i in range(5)])
    frame = spark.readStream.schema(EVENTS).json(str(source))
    if stateful:
        frame = frame.groupBy("player").count()
    return (frame.writeStream.format("memory").queryName(name)
            .outputMode("update" if stateful else "append")
            .option("checkpointLocation", str(tmp_path / "ck"))
            .trigger(processingTime="200 milliseconds").start())


def test_a_stopped_query_is_refused_with_how_it_ended(spark, tmp_path):
    query = _small_query(spark, tmp_path, True, "own_stopped")
    query.processAllAvailable()
    query.stop()
    with pytest.raises(StatekitError, match="is not active .*stopped.*open_checkpoint"):
        sk.attach(query)


def test_a_query_without_state_is_refused(spark, tmp_path):
    query = _small_query(spark, tmp_path, False, "own_stateless")
    try:
        query.processAllAvailable()
        with pytest.raises(StatekitError, match="keeps no state"):
            sk.attach(query)
        assert query.isActive
    finally:
        query.stop()


def test_rocksdb_without_changelog_checkpointing_is_refused_naming_the_setting(spark, tmp_path):
    key = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
    spark.conf.set(key, "false")
    try:
        query = _small_query(spark, tmp_path, True, "own_no_deltas")
    finally:
        spark.conf.set(key, "true")
    try:
        query.processAllAvailable()
        with pytest.raises(UnsupportedRead, match=f"{key}=true"):
            sk.attach(query)
        assert query.isActive
    finally:
        query.stop()


def test_a_query_attached_before_its_first_batch_is_checked_at_the_first_read(spark, tmp_path):
    source = tmp_path / "in"
    source.mkdir()
    query = (spark.readStream.schema(EVENTS).json(str(source)).groupBy("player").count()
             .writeStream.format("memory").queryName("own_early").outputMode("update")
             .option("checkpointLocation", str(tmp_path / "ck"))
             .trigger(processingTime="200 milliseconds").start())
    try:
        live = sk.attach(query)  # nothing committed yet: nothing to check
        with pytest.raises(CheckpointError, match="not committed a batch yet"):
            live.states()
        _write(source, "a.json", [{"event_id": "e1", "player": "p1", "score": 1,
                                   "ts": T0.isoformat()}])
        live.wait_for_batches(1, timeout=120)
        snap = live.snapshot("default")
        assert list(snap["player"]) == ["p1"] and int(snap["count"].iloc[0]) == 1
    finally:
        query.stop()
    assert os.path.isdir(tmp_path / "ck" / "state")


@pytest.mark.slow   # the job in a worker process, killed with kill -9 while it ships, rerun
def test_kill_9_while_shipping_then_a_rerun_keeps_each_batch_once_in_each_part(
        spark, broker, tmp_path):
    """dropDuplicates (no watermark) then a plain groupBy on a string and an int key, in a
    process killed with kill -9 while it ships its part changelogs, then run again here: each
    part's topic holds every batch's changes once and replays to the snapshot, the state
    equals pandas, the rows are where Spark places them."""
    import random

    from helpers import livejob

    source = tmp_path / "in"
    source.mkdir()
    events = livejob.add_files(source, 14)
    config = {"source": str(source), "checkpoint": str(tmp_path / "ck"),
              "ledgers": str(tmp_path / "ledgers"),
              "bootstrap_servers": broker.bootstrap_servers}
    ledger = tmp_path / "ledgers" / "livejob-op1-default-changelog.json"
    worker = livejob.start(config)
    try:
        deadline = time.monotonic() + 240
        while not (ledger.exists() and json.loads(ledger.read_text())["last_batch"] >= 3):
            assert worker.poll() is None, worker.stdout.read()
            assert time.monotonic() < deadline, "the job shipped no batch in 240 s"
            time.sleep(0.05)
        time.sleep(random.uniform(0, 1.0))
    finally:
        livejob.kill_9(worker)
    killed_at = json.loads(ledger.read_text())["last_batch"]

    # the rerun, here: the same job on the same checkpoint, attached with the same ledgers
    query = livejob.start_job(spark, config)
    try:
        # a file more, run before attaching: a batch since the start gives the plan that
        # names the parts' columns (the killed job may have read every file already, its
        # shipping behind)
        events += livejob.add_files(source, 1, first=14)
        query.processAllAvailable()
        live = sk.attach(query, kafka=broker, ledger_dir=config["ledgers"])
        # three files more, three batches at least seen attached (the growing-state flag
        # below reads the last three batches' progress)
        events += livejob.add_files(source, 3, first=15)
        query.processAllAvailable()
        last = live.wait_shipped()
        assert killed_at < last
        for part in ("0/default", "1/default"):
            topic = live.changelog_topics()[part]
            assert topic == f"livejob-op{part[0]}-default-changelog"
            log = live.read_changelog(part)  # read whole: no batch cut short or repeated
            changes = live.changes(part, 0, last)
            assert len(log) == len(changes), topic
            assert not log.records.duplicated(["partition", "batch", "seq"]).any()
            snap = live.snapshot(part, last)
            view = live.state(part)
            columns = view.key_columns + view.value_columns
            pd.testing.assert_frame_equal(comparable(log.materialize(), columns),
                                          comparable(snap, columns), obj=topic)
            # a string and an int key: each row where statekit computes Spark keeps it
            assert (live.state_partitions(part, snap) == snap["partition"].to_numpy()).all()
        # the state against pandas over the same input
        first = pd.DataFrame(events).drop_duplicates("event_id")
        expected = first.groupby(["player", "level"]).agg(
            n=("score", "size"), points=("score", "sum")).reset_index()
        snap = live.snapshot("0/default", last)
        assert sorted(zip(snap["player"], snap["level"], snap["n"], snap["points"],
                          strict=True)) == \
            sorted(zip(expected["player"], expected["level"], expected["n"],
                       expected["points"], strict=True))
        assert set(live.snapshot("1/default", last)["event_id"]) == set(first["event_id"])
        # no watermark: the dedup's ids only grow (flagged); the 14 groups were all there
        # from the first batch, so the aggregation's rows stay put (not flagged)
        growing = live.growing_operators(batches=3)
        assert list(growing["operator_id"]) == [1] and len(expected) == 14
        assert list(growing["rows"]) == [first["event_id"].nunique()]
        live.close()
    finally:
        query.stop()


def test_the_demos_own_job_runs_again_in_the_same_folder(spark, broker, tmp_path, capsys):
    """``make demo`` twice: the second run finds the first one's checkpoint and ledgers, and
    a new embedded broker without the first run's topics; it ships its changelogs from
    batch 0 again instead of refusing them."""
    from statekit.datasets import game_events
    from statekit.demo import attach_own_job
    from statekit.kafka.topics import delete_topic, list_topics

    for run in range(2):
        if run:   # as a new embedded broker: none of the first run's topics
            for topic in list_topics(broker):
                if topic.startswith("own_job-"):
                    delete_topic(broker, topic)
        attach_own_job(spark, game_events(), broker.bootstrap_servers, tmp_path)
        out = capsys.readouterr().out.splitlines()
        said = [line for line in out if "part " in line]
        assert len(said) == 2 and all(line.endswith("replays to the snapshot: True") and
                                      "computes: True" in line for line in said), said
        preflight = [line for line in out if "restart pre-flight" in line]
        assert preflight and preflight[0].endswith(
            "refused, the state's key (grouping, deduplication or join key columns, or a "
            "window): STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE"), preflight
