"""``open_checkpoint``: any Spark 4 streaming checkpoint, read-only, in pandas.

Each checkpoint is written by a plain PySpark query (no statekit helper in the query) over
small deterministic JSON files, one file a batch (``maxFilesPerTrigger=1``,
``trigger(availableNow=True)``), in the shared session (RocksDB state with changelog
checkpointing; the HDFS-backed provider is set on the session while its queries start).
Every read is checked against a pandas computation over the same input, and every test
hashes the whole checkpoint (names, sizes, bytes) before and after it reads: opening and
reading must change nothing.
"""

from __future__ import annotations

import contextlib
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from helpers.plainrun import run_query
from helpers.tree import tree_digest

import statekit as sk
from statekit.errors import BadArgument, BatchNotRetained, CheckpointError
from statekit.inspect import UnsupportedRead, open_checkpoint
from statekit.spark_state.changes import apply_changes, same_rows

HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
PROVIDER = "spark.sql.streaming.stateStore.providerClass"
EVENTS = "k string, v long, ts timestamp"
FILES = 4
ROWS = 8
QUERY_TIMEOUT = 240


# --- input and queries --------------------------------------------------------------------------
def event_rows(i: int) -> list[dict]:
    """File ``i``: 8 events in minute ``i``, 7 s apart; keys cycle over k0..k4 (every key in
    every file), ``v = j % 4`` so that (k, v) pairs repeat across files, never within one."""
    return [{"k": f"k{(i * 7 + j) % 5}", "v": j % 4, "ts": f"2026-01-05T10:{i:02d}:{j * 7:02d}"}
            for j in range(ROWS)]


def write_files(folder: Path, files: list[list[dict]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for i, rows in enumerate(files):
        (folder / f"f{i:02d}.json").write_text("\n".join(json.dumps(r) for r in rows))
    return folder


def frame_of(files: list[list[dict]], upto: int | None = None) -> pd.DataFrame:
    """The events of files 0..upto (all when None) as pandas, with the file index."""
    rows = [{**r, "file": i} for i, rows in enumerate(files) for r in rows
            if upto is None or i <= upto]
    frame = pd.DataFrame(rows)
    for column in ("ts", "lt", "rt"):
        if column in frame:
            frame[column] = pd.to_datetime(frame[column])
    return frame


def events_stream(spark, folder: Path):
    return spark.readStream.schema(EVENTS).option("maxFilesPerTrigger", 1).json(str(folder))


# --- read-only ---------------------------------------------------------------------------------
@contextlib.contextmanager
def untouched(*roots: Path):
    """Assert that nothing under ``roots`` changes inside the block."""
    before = [tree_digest(root) for root in roots]
    yield
    for root, digest in zip(roots, before, strict=True):
        after = tree_digest(root)
        added, removed = sorted(set(after) - set(digest)), sorted(set(digest) - set(after))
        changed = sorted(k for k in set(after) & set(digest) if after[k] != digest[k])
        assert not (added or removed or changed), (
            f"reading changed {root}: added {added}, removed {removed}, changed {changed}")


def replayed(changes: pd.DataFrame, keys: list[str], values: list[str]) -> pd.DataFrame:
    """The table the change feed leaves (last put per key; deletes remove)."""
    return apply_changes(changes, keys, values)


# --- checkpoints (built once per module) ----------------------------------------------------------
@pytest.fixture(scope="module")
def events(tmp_path_factory):
    files = [event_rows(i) for i in range(FILES)]
    return write_files(tmp_path_factory.mktemp("events") / "in", files), files


@pytest.fixture(scope="module")
def counts(spark, events, tmp_path_factory):
    """A plain aggregation, no window: count, sum and avg of v per key (RocksDB)."""
    from pyspark.sql import functions as F

    folder, _ = events
    frame = events_stream(spark, folder).groupBy("k").agg(
        F.count("*").alias("n"), F.sum("v").alias("total"), F.avg("v").alias("mean"))
    return run_query(spark, frame, tmp_path_factory.mktemp("counts") / "ck", mode="update")


@pytest.fixture(scope="module")
def windowed(spark, events, tmp_path_factory):
    """A 2-minute tumbling-window count per key, watermark 1 minute (RocksDB)."""
    from pyspark.sql import functions as F

    folder, _ = events
    frame = (events_stream(spark, folder).withWatermark("ts", "1 minute")
             .groupBy(F.window("ts", "2 minutes"), "k").count())
    return run_query(spark, frame, tmp_path_factory.mktemp("windowed") / "ck", mode="update")


JOIN_LEFT = [[{"id": i, "lv": f"l{i}", "lt": f"2026-01-05T10:00:{i:02d}"}
              for i in range(b * 5, b * 5 + 5)] for b in range(3)]
JOIN_RIGHT = [[{"id": i, "rv": f"r{i}", "rt": f"2026-01-05T10:00:{i:02d}"}
               for i in range(b * 5 + 2, b * 5 + 7)] for b in range(3)]


def join_query(spark, base: Path):
    """A stream-stream inner join on id (ids 0-14 left, 2-16 right), then dropDuplicates on
    the left value: two stateful operators."""
    left = write_files(base / "left", JOIN_LEFT)
    right = write_files(base / "right", JOIN_RIGHT)
    lefts = (spark.readStream.schema("id long, lv string, lt timestamp")
             .option("maxFilesPerTrigger", 1).json(str(left)).withWatermark("lt", "10 minutes"))
    rights = (spark.readStream.schema("id long, rv string, rt timestamp")
              .option("maxFilesPerTrigger", 1).json(str(right)).withWatermark("rt", "10 minutes"))
    return lefts.join(rights, "id").select("id", "lv", "rv", "lt").dropDuplicates(["lv"])


@pytest.fixture(scope="module")
def joined(spark, tmp_path_factory):
    base = tmp_path_factory.mktemp("joined")
    return run_query(spark, join_query(spark, base), base / "ck")


@pytest.fixture(scope="module")
def hdfs_counts(spark, events, tmp_path_factory):
    """The plain aggregation on the HDFS-backed provider."""
    folder, _ = events
    frame = events_stream(spark, folder).groupBy("k").count()
    return run_query(spark, frame, tmp_path_factory.mktemp("hdfs") / "ck", mode="update",
                     conf={PROVIDER: HDFS})


# --- at a glance ------------------------------------------------------------------------------
def test_the_logs_at_a_glance(counts, events):
    _, files = events
    with untouched(counts):
        view = open_checkpoint(counts)
        assert view.query_id == json.loads((counts / "metadata").read_text())["id"]
        batches = view.batches()
        assert batches["batch"].tolist() == list(range(FILES))
        assert batches["committed"].all() and batches["new_data"].all()
        assert view.retained_batches() == list(range(FILES))
        assert (batches["timestamp"].diff().dropna() >= pd.Timedelta(0)).all()
        assert (batches["watermark_ms"] == 0).all()      # no watermark in this query
        sources = view.sources()
        # one source, one file a batch: the file source's log offset is the batch
        assert sources["source"].unique().tolist() == [0]
        assert [p["logOffset"] for p in sources["parsed"]] == list(range(FILES))
        commits = view.commits()
        assert commits["batch"].tolist() == list(range(FILES))
        operators = view.operators()
        assert operators[["operator_id", "operator", "kind", "store", "partitions",
                          "min_batch", "max_batch"]].values.tolist() == [
            [0, "stateStoreSave", "aggregation", "default", 3, 0, FILES - 1]]
        schema = view.schema()
        assert schema.loc[0, "key_type"] == "struct<k:string>"
        # an avg keeps (sum, count) beside the count and the sum: names stay distinct
        assert schema.loc[0, "value_type"] == \
            "struct<count:bigint,sum:bigint,sum:double,count:bigint>"
        assert schema.loc[0, "value_columns"] == ["count", "sum", "value_sum", "value_count"]
        files_ = view.state_files()
        assert set(files_["kind"]) == {"delta"}
        assert files_.groupby("partition")["version"].apply(sorted).tolist() == \
            [list(range(1, FILES + 1))] * 3


def test_a_plain_aggregation_equals_pandas_at_every_batch(counts, events):
    _, files = events
    with untouched(counts):
        state = open_checkpoint(counts).operator(0)
        for batch in range(FILES):
            snapshot = state.snapshot(batch=batch)
            expected = frame_of(files, upto=batch).groupby("k")["v"].agg(["count", "sum", "mean"])
            got = snapshot.set_index("k").sort_index()
            assert got["count"].tolist() == expected["count"].tolist()
            assert got["sum"].tolist() == expected["sum"].tolist()
            assert (got["value_sum"] / got["value_count"]).tolist() == \
                pytest.approx(expected["mean"].tolist())
            assert snapshot.attrs["batch"] == batch
        assert sorted(snapshot["partition"].unique()) == [0, 1, 2]


def test_the_change_feed_replays_to_the_snapshot(counts):
    with untouched(counts):
        state = open_checkpoint(counts).state()
        keys, values = state.key_columns, state.value_columns
        changes = state.changes(0)
        assert changes["batch"].tolist() == sorted(changes["batch"])
        assert set(changes["change"]) == {"put"}
        assert same_rows(replayed(changes, keys, values), state.snapshot()[keys + values])
        # from a snapshot: snapshot(1) + changes(2, 3) == snapshot(3)
        start = state.snapshot(batch=1)
        tail = state.changes(2, 3)
        assert set(tail["batch"]) == {2, 3}
        assert same_rows(apply_changes(tail, keys, values, start=start),
                         state.snapshot(batch=3)[keys + values])


def test_a_windowed_aggregation_keeps_the_windows_the_watermark_has_not_passed(windowed, events):
    _, files = events
    with untouched(windowed):
        view = open_checkpoint(windowed)
        state = view.operator(0)
        assert state.kind == "aggregation"
        assert state.state().key_columns == ["window_start", "window_end", "k"]
        batches = view.batches()
        last = int(batches["batch"].iloc[-1])
        watermark = batches["watermark"].iloc[-1]
        assert watermark == pd.Timestamp("2026-01-05 10:02:49")  # max event time - 1 minute
        events_ = frame_of(files)
        events_["window_start"] = events_["ts"].dt.floor("2min")
        events_["window_end"] = events_["window_start"] + pd.Timedelta(minutes=2)
        expected = events_.groupby(["window_start", "window_end", "k"]).size().rename("count")
        kept = expected[expected.index.get_level_values("window_end") > watermark].reset_index()
        snapshot = state.snapshot(batch=last, sort=True)
        assert same_rows(snapshot, kept)
        # before the watermark passed the first windows, every window was there
        early = state.snapshot(batch=1)
        first_two = events_[events_["file"] <= 1].groupby(
            ["window_start", "window_end", "k"]).size().rename("count").reset_index()
        assert same_rows(early, first_two)
        # the change feed deletes what the watermark evicted, and replays to the snapshot
        changes = state.changes(0, last)
        assert "delete" in set(changes["change"])
        s = state.state()
        assert same_rows(replayed(changes, s.key_columns, s.value_columns), kept)


def test_a_join_buffers_both_sides_and_a_later_deduplication_keeps_its_keys(joined):
    left = pd.DataFrame([r for f in JOIN_LEFT for r in f])
    right = pd.DataFrame([r for f in JOIN_RIGHT for r in f])
    with untouched(joined):
        view = open_checkpoint(joined)
        operators = view.operators()
        kinds = operators.drop_duplicates("operator_id").set_index("operator_id")["kind"]
        assert kinds.to_dict() == {0: "deduplication", 1: "join"}
        assert sorted(operators.loc[operators["operator_id"] == 1, "store"]) == [
            "left-keyToNumValues", "left-keyWithIndexToValue", "right-keyToNumValues",
            "right-keyWithIndexToValue"]
        states = view.states()
        assert states.loc[states["operator_id"] == 1, ["what", "name", "change_feed"]].values \
            .tolist() == [["join side", "left", False], ["join side", "right", False],
                          ["store", "left-keyToNumValues", True],
                          ["store", "left-keyWithIndexToValue", True],
                          ["store", "right-keyToNumValues", True],
                          ["store", "right-keyWithIndexToValue", True]]
        join = view.operator(1)
        # every input row is buffered (the 10-minute watermark evicted nothing)
        got_left = join.state("left").snapshot()
        assert same_rows(got_left.rename(columns={"field0": "key"}), left.assign(key=left["id"])
                         [["key", "id", "lv"]])
        got_right = join.state("right").snapshot()
        assert sorted(got_right["rv"]) == sorted(right["rv"])
        assert (got_right["field0"] == got_right["id"]).all()
        # the stores behind them: one value per key, and whether each row has matched
        counts_ = join.state("left-keyToNumValues").snapshot()
        assert set(counts_["value"]) == {1} and sorted(counts_["field0"]) == sorted(left["id"])
        rows = join.state("right-keyWithIndexToValue").snapshot().set_index("id")
        assert rows["matched"].to_dict() == {i: i in set(left["id"]) for i in right["id"]}
        assert (rows["index"] == 0).all()
        # a join side has no change feed in Spark's reader; its store has one
        with pytest.raises(UnsupportedRead, match="joinSide and readChangeFeed") as err:
            join.state("left").changes(0)
        assert "left-keyWithIndexToValue" in err.value.instead
        store = join.state("left-keyWithIndexToValue")
        assert same_rows(replayed(store.changes(0), store.key_columns, store.value_columns),
                         store.snapshot()[store.key_columns + store.value_columns])
        # the deduplication after the join keeps one key per joined left value
        dedup = view.operator(0).snapshot()
        matched = sorted(set(left["id"]) & set(right["id"]))
        assert sorted(dedup["lv"]) == sorted(f"l{i}" for i in matched)
        assert list(dedup.columns) == ["lv", "partition"]    # the void value is left out
        # two sources per batch
        assert set(view.sources()["source"]) == {0, 1}


def test_the_hdfs_backed_provider_reads_the_same(hdfs_counts, events):
    _, files = events
    with untouched(hdfs_counts):
        view = open_checkpoint(hdfs_counts)
        files_ = view.state_files()
        assert set(files_["file"].map(lambda p: Path(p).suffix)) == {".delta"}
        assert set(files_["kind"]) == {"delta"}
        state = view.state()
        snapshot = state.snapshot(sort=True)
        expected = frame_of(files).groupby("k").size()
        assert snapshot.set_index("k")["count"].to_dict() == expected.to_dict()
        assert same_rows(replayed(state.changes(0), ["k"], ["count"]), snapshot[["k", "count"]])


# --- slower kinds ---------------------------------------------------------------------------
@pytest.mark.slow
def test_a_session_window_aggregation(spark, events, tmp_path_factory):
    from pyspark.sql import functions as F

    folder, files = events
    gap = pd.Timedelta(seconds=40)
    frame = (events_stream(spark, folder).withWatermark("ts", "1 minute")
             .groupBy(F.session_window("ts", "40 seconds"), "k").count())
    ck = run_query(spark, frame, tmp_path_factory.mktemp("sessions") / "ck")
    with untouched(ck):
        view = open_checkpoint(ck)
        state = view.operator(0)
        assert state.kind == "session_window"
        watermark = view.batches()["watermark"].iloc[-1]
        sessions = []
        for k, group in frame_of(files).sort_values("ts").groupby("k"):
            start = end = None
            count = 0
            for ts in group["ts"]:
                if start is not None and ts < end:
                    end, count = max(end, ts + gap), count + 1
                    continue
                if start is not None:
                    sessions.append((k, start, end, count))
                start, end, count = ts, ts + gap, 1
            sessions.append((k, start, end, count))
        expected = pd.DataFrame(sessions, columns=["k", "session_window_start",
                                                   "session_window_end", "count"])
        kept = expected[expected["session_window_end"] > watermark]
        snapshot = state.snapshot(sort=True)
        assert same_rows(snapshot, kept)
        assert (snapshot["sessionStartTime"] == snapshot["session_window_start"]).all()
        s = state.state()
        assert same_rows(replayed(state.changes(0), s.key_columns, s.value_columns),
                         snapshot[s.key_columns + s.value_columns])


@pytest.mark.slow
def test_drop_duplicates_within_watermark(spark, events, tmp_path_factory):
    folder, files = events
    delay = pd.Timedelta(seconds=50)
    frame = (events_stream(spark, folder).withWatermark("ts", "50 seconds")
             .dropDuplicatesWithinWatermark(["k", "v"]))
    ck = run_query(spark, frame, tmp_path_factory.mktemp("dedupw") / "ck")
    with untouched(ck):
        view = open_checkpoint(ck)
        batches = view.batches()
        offsets = {b: p["logOffset"] for b, p in view.sources()[["batch", "parsed"]].values}
        # the last batch is a no-data batch: same offsets, a later watermark
        assert batches["new_data"].tolist() == [True] * FILES + [False]
        # Spark's rule, batch by batch: the first (k, v) seen is kept until the watermark
        # passes its event time + the delay (an expired entry still drops a duplicate in the
        # batch that evicts it)
        state: dict[tuple, pd.Timestamp] = {}
        for batch, new, watermark in batches[["batch", "new_data", "watermark"]].values:
            if new:
                for row in event_rows(offsets[batch]):
                    ts = pd.Timestamp(row["ts"])
                    if ts >= watermark:
                        state.setdefault((row["k"], row["v"]), ts + delay)
            state = {key: expires for key, expires in state.items() if expires > watermark}
        snapshot = view.operator(0).snapshot()
        got = {(k, v): pd.Timestamp(e, unit="us") for k, v, e in
               snapshot[["k", "v", "expiresAtMicros"]].values}
        assert got == state and state


@pytest.mark.slow
def test_apply_in_pandas_with_state(spark, events, tmp_path_factory):
    from pyspark.sql.streaming.state import GroupStateTimeout

    folder, files = events

    def count_and_max(key, frames, state):
        total, top = state.get if state.exists else (0, -1)
        for frame in frames:
            total, top = total + len(frame), max(top, int(frame["v"].max()))
        state.update((total, top))
        yield pd.DataFrame({"k": [key[0]], "n": [total]})

    frame = events_stream(spark, folder).groupBy("k").applyInPandasWithState(
        count_and_max, "k string, n long", "n long, top long", "update",
        GroupStateTimeout.NoTimeout)
    ck = run_query(spark, frame, tmp_path_factory.mktemp("fgws") / "ck", mode="update")
    with untouched(ck):
        state = open_checkpoint(ck).operator(0)
        assert (state.name, state.kind) == ("applyInPandasWithState", "group_state")
        snapshot = state.snapshot().set_index("k")
        expected = frame_of(files).groupby("k")["v"].agg(["count", "max"])
        assert snapshot["groupState_n"].to_dict() == expected["count"].to_dict()
        assert snapshot["groupState_top"].to_dict() == expected["max"].to_dict()


@pytest.mark.slow
def test_a_join_on_the_hdfs_backed_provider(spark, tmp_path_factory):
    base = tmp_path_factory.mktemp("hdfs-join")
    ck = run_query(spark, join_query(spark, base), base / "ck", conf={PROVIDER: HDFS})
    with untouched(ck):
        view = open_checkpoint(ck)
        join = view.operator(1)
        assert sorted(join.state("left").snapshot()["lv"]) == \
            sorted(r["lv"] for f in JOIN_LEFT for r in f)
        assert sorted(join.state("right").snapshot()["rv"]) == \
            sorted(r["rv"] for f in JOIN_RIGHT for r in f)
        files_ = view.state_files()
        assert set(files_.loc[files_["operator_id"] == 1, "store"]) == {
            "left-keyToNumValues", "left-keyWithIndexToValue", "right-keyToNumValues",
            "right-keyWithIndexToValue"}
        assert files_["file"].str.endswith(".delta").all()
        store = join.state("right-keyToNumValues")
        assert same_rows(replayed(store.changes(0), ["field0"], ["value"]),
                         store.snapshot()[["field0", "value"]])


# --- transformWithState ------------------------------------------------------------------
TTL_MS = 3_600_000
TIMER_BASE = 10**13


def tws_processor():
    """value state (count), a value state with a TTL (max v), a list state (every v), a map
    state (minute → count, keeping only the last two minutes), one processing-time timer per
    key (moved on every batch), and a value state of an array and a map."""
    from pyspark.sql.streaming import StatefulProcessor

    class Processor(StatefulProcessor):
        def init(self, handle):
            self.handle = handle
            self.total = handle.getValueState("total", "n long")
            self.top = handle.getValueState("top", "v long", TTL_MS)
            self.seen = handle.getListState("seen", "v long")
            self.minutes = handle.getMapState("by_minute", "minute int", "n long")
            self.shape = handle.getValueState("shape", "vs array<long>, per_v map<string, long>")

        def handleInputRows(self, key, rows, timerValues):
            total = self.total.get()[0] if self.total.exists() else 0
            top = self.top.get()[0] if self.top.exists() else -1
            for frame in rows:
                for v, ts in zip(frame["v"], frame["ts"], strict=True):
                    total, top = total + 1, max(top, int(v))
                    self.seen.appendValue((int(v),))
                    minute = (int(ts.minute),)
                    old = self.minutes.getValue(minute)[0] \
                        if self.minutes.containsKey(minute) else 0
                    self.minutes.updateValue(minute, (old + 1,))
                    if self.minutes.containsKey((int(ts.minute) - 2,)):
                        self.minutes.removeKey((int(ts.minute) - 2,))
            self.total.update((total,))
            self.top.update((top,))
            for timer in list(self.handle.listTimers()):
                self.handle.deleteTimer(timer)
            self.handle.registerTimer(TIMER_BASE + total)
            values = sorted(v for (v,) in self.seen.get())
            self.shape.update((values, {f"v{v}": values.count(v) for v in set(values)}))
            yield pd.DataFrame({"k": [key[0]], "n": [total]})

        def close(self):
            pass

    return Processor()


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_transform_with_state_variables_and_timers(spark, events, tmp_path_factory):
    pytest.importorskip("google.protobuf", reason="transformWithStateInPandas needs protobuf")
    folder, files = events
    frame = events_stream(spark, folder).groupBy("k").transformWithStateInPandas(
        tws_processor(), "k string, n long", "Update", "ProcessingTime")
    # ProcessingTime mode asks for a no-data batch after every batch (to fire timers): with
    # availableNow that never ends unless no-data batches are off
    ck = run_query(spark, frame, tmp_path_factory.mktemp("tws") / "ck", mode="update",
                   conf={"spark.sql.streaming.noDataMicroBatches.enabled": "false"})
    events_ = frame_of(files)
    with untouched(ck):
        view = open_checkpoint(ck)
        operator = view.operator(0)
        assert operator.kind == "transform_with_state"
        states = view.states().set_index("name")
        assert states["variable_type"].to_dict() == {
            "seen": "ListState", "top": "ValueState", "total": "ValueState",
            "by_minute": "MapState", "shape": "ValueState", "timers": "TimerState"}
        assert states["ttl"].to_dict()["top"] and not states["ttl"].to_dict()["total"]
        assert not states.loc["timers", "change_feed"]
        # value state
        total = operator.state("total").snapshot().set_index("k")["n"]
        assert total.to_dict() == events_.groupby("k").size().to_dict()
        # value state with a TTL: its expiry is the last update's batch time + the TTL
        top = operator.state("top").snapshot().set_index("k")
        assert top["value_v"].to_dict() == events_.groupby("k")["v"].max().to_dict()
        last_time = int(view.batches()["timestamp_ms"].iloc[-1])
        assert (top["ttlExpirationMs"] == last_time + TTL_MS).all()
        # list state: one row per element
        seen = operator.state("seen").snapshot()
        assert seen.groupby("k")["v"].apply(sorted).to_dict() == \
            events_.groupby("k")["v"].apply(sorted).to_dict()
        # map state: the user key is part of the key
        minutes = operator.state("by_minute")
        assert minutes.key_columns == ["k", "minute"]
        got = minutes.snapshot().set_index(["k", "minute"])["n"].to_dict()
        per_minute = events_.assign(minute=events_["ts"].dt.minute).groupby(["k", "minute"]).size()
        assert got == {key: n for key, n in per_minute.items() if key[1] >= FILES - 2}
        # arrays and maps stay Python lists and dicts
        shape = operator.state("shape").snapshot().set_index("k")
        assert shape.loc["k0", "vs"] == sorted(events_.loc[events_["k"] == "k0", "v"])
        assert shape.loc["k0", "per_v"] == {f"v{v}": n for v, n in
                                            events_.loc[events_["k"] == "k0", "v"]
                                            .value_counts().items()}
        # timers: one per key, at TIMER_BASE + the key's count
        timers = operator.state("timers").snapshot()
        assert timers.set_index("k")["expiration_timestamp_ms"].to_dict() == \
            {k: TIMER_BASE + n for k, n in total.items()}
        # time travel: after batch 1 the count is that of files 0 and 1
        early = operator.state("total").snapshot(batch=1).set_index("k")["n"]
        assert early.to_dict() == events_[events_["file"] <= 1].groupby("k").size().to_dict()
        # the change feed replays to the snapshot (value and map state, deletes included)
        for name in ("total", "by_minute"):
            state = operator.state(name)
            changes = state.changes(0)
            assert same_rows(replayed(changes, state.key_columns, state.value_columns),
                             state.snapshot()[state.key_columns + state.value_columns])
        assert "delete" in set(minutes.changes(0)["change"])
        # a list state's change feed appends
        appended = operator.state("seen").changes(0)
        assert set(appended["change"]) == {"append"}
        assert sorted(appended["v"]) == sorted(seen["v"])
        with pytest.raises(UnsupportedRead, match="readRegisteredTimers"):
            operator.state("timers").changes(0)
        with pytest.raises(BadArgument, match="seen"):
            operator.snapshot()


# --- what Spark's reader cannot do, and bad input ------------------------------------------------
def test_a_rocksdb_store_without_changelog_checkpointing_has_no_change_feed(
        spark, events, tmp_path_factory):
    folder, files = events
    frame = events_stream(spark, folder).groupBy("k").count()
    ck = run_query(spark, frame, tmp_path_factory.mktemp("no-changelog") / "ck", mode="update",
                   conf={"spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled":
                         "false"})
    with untouched(ck):
        state = open_checkpoint(ck).state()
        assert state.snapshot().set_index("k")["count"].to_dict() == \
            frame_of(files).groupby("k").size().to_dict()
        with pytest.raises(UnsupportedRead, match="changelogCheckpointing") as err:
            state.changes(0)
        assert "snapshot(batch)" in err.value.instead


def test_a_path_that_is_not_a_checkpoint(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        open_checkpoint(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match="not a Spark streaming checkpoint"):
        open_checkpoint(tmp_path / "empty")
    (tmp_path / "file").write_text("x")
    with pytest.raises(CheckpointError, match="not a directory"):
        open_checkpoint(tmp_path / "file")
    with pytest.raises(BadArgument, match="spark"):
        sk.inspect.CheckpointView(tmp_path, spark="local[2]")


def test_a_checkpoint_without_a_stateful_operator(spark, events, tmp_path_factory):
    folder, _ = events
    ck = run_query(spark, events_stream(spark, folder).select("k", "v"),
                   tmp_path_factory.mktemp("stateless") / "ck")
    with untouched(ck):
        view = open_checkpoint(ck)
        assert view.operators().empty and view.states().empty and view.state_files().empty
        assert len(view.batches()) == FILES
        with pytest.raises(CheckpointError, match="no stateful operator"):
            view.operator(0)


def test_batches_that_are_not_retained_and_bad_names(counts):
    with untouched(counts):
        view = open_checkpoint(counts)
        state = view.state()
        with pytest.raises(BatchNotRetained, match="committed batches: 0..3"):
            state.snapshot(batch=99)
        with pytest.raises(BatchNotRetained):
            state.changes(0, 7)
        with pytest.raises(BadArgument, match="from_batch"):
            state.changes(3, 1)
        for bad in (-1, True, 1.0, "2"):
            with pytest.raises(BadArgument):
                state.snapshot(batch=bad)
        with pytest.raises(BadArgument, match="operator_id"):
            view.operator(5)
        with pytest.raises(BadArgument, match="default"):
            view.state("nope")


def copy_checkpoint(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    return target


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


@pytest.mark.parametrize("provider", ["rocksdb", "hdfs"])
def test_a_truncated_state_file_is_named(provider, counts, hdfs_counts, tmp_path):
    ck = copy_checkpoint(counts if provider == "rocksdb" else hdfs_counts, tmp_path / "ck")
    suffix = ".changelog" if provider == "rocksdb" else ".delta"
    bad = ck / "state" / "0" / "1" / f"2{suffix}"
    truncate(bad)
    with untouched(ck):
        state = open_checkpoint(ck).state()
        with pytest.raises(CheckpointError, match="truncated") as err:
            state.snapshot()
        assert str(bad) in str(err.value)
        with pytest.raises(CheckpointError, match=str(bad)):
            state.changes(0)
        # the state before the damaged version still reads
        assert len(state.snapshot(batch=0)) > 0


def test_a_checkpoint_from_another_spark(counts, tmp_path):
    # Spark 3 wrote no operator metadata
    old = copy_checkpoint(counts, tmp_path / "spark3")
    shutil.rmtree(old / "state" / "0" / "_metadata")
    with untouched(old), pytest.raises(CheckpointError, match="Spark 3"):
        open_checkpoint(old).operators()
    # a newer Spark's offset log
    new = copy_checkpoint(counts, tmp_path / "newer")
    log = new / "offsets" / "3"
    log.write_text(log.read_text().replace("v1", "v9", 1))
    with untouched(new), pytest.raises(CheckpointError, match="v9.*newer Spark"):
        open_checkpoint(new)
    # a corrupt metadata file
    broken = copy_checkpoint(counts, tmp_path / "broken")
    (broken / "metadata").write_text("{not json")
    with untouched(broken), pytest.raises(CheckpointError, match="metadata file .* is corrupt"):
        _ = open_checkpoint(broken).query_id
