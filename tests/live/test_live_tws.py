"""statekit.attach on ``transformWithStateInPandas``: a value state, a list state, a map
state with a TTL, a value state whose 4 s TTL expires while the test runs, and processing-time
timers. The state equals pandas over the same input, every part's changelog replays to its
snapshot (a list state's: one record per key, its whole list), a routed ``get`` of every key
answers its entry where Spark placed it.

A module of its own: its query runs a batch every second (a TTL needs processing time) for as
long as its module fixture lives, which ends with the module.
"""

from __future__ import annotations

import sys
import time

import pandas as pd
import pytest
from helpers.eventfiles import EVENTS, FILES, write_events
from helpers.livecheck import assert_replays_to_snapshot, assert_routed_gets_equal_snapshot
from pyspark import cloudpickle
from pyspark.sql.streaming.stateful_processor import StatefulProcessor

import statekit as sk

# Spark's Python workers cannot import this test module: send its functions by value
cloudpickle.register_pickle_by_value(sys.modules[__name__])

pytestmark = pytest.mark.timeout(600)

# --- transformWithStateInPandas: value, list, map with a TTL, timers ---------------------------
SEEN_TTL_MS = 4_000


class Tracker(StatefulProcessor):
    """Per player: the total score (value state), the last three (item, score) by event
    time (list state), the best score per item (map state, 1 hour TTL), the last event time
    seen (value state, 4 s TTL: gone soon after the input ends), and a processing-time
    timer an hour after the player's last batch."""

    def init(self, handle):
        self.handle = handle
        self.total = handle.getValueState("total", "total long")
        self.recent = handle.getListState("recent", "item string, score long")
        self.best = handle.getMapState("best", "item string", "score long",
                                       ttlDurationMs=3_600_000)
        self.seen = handle.getValueState("seen", "at timestamp", ttlDurationMs=SEEN_TTL_MS)

    def handleInputRows(self, key, rows, timerValues):
        frame = pd.concat(list(rows)).sort_values("ts")
        total = (self.total.get()[0] if self.total.exists() else 0) + int(frame["score"].sum())
        recent = list(self.recent.get()) if self.recent.exists() else []
        recent += list(zip(frame["item"], frame["score"].astype(int), strict=True))
        for item, score in zip(frame["item"], frame["score"], strict=True):
            old = self.best.getValue((item,)) if self.best.containsKey((item,)) else None
            if old is None or score > old[0]:
                self.best.updateValue((item,), (int(score),))
        self.total.update((total,))
        self.seen.update((frame["ts"].max().to_pydatetime(),))
        self.recent.put([(i, int(s)) for i, s in recent[-3:]])
        for timer in list(self.handle.listTimers()):
            self.handle.deleteTimer(timer)
        self.handle.registerTimer(timerValues.getCurrentProcessingTimeInMs() + 3_600_000)
        yield pd.DataFrame({"player": [key[0]], "total": [total]})

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
        yield pd.DataFrame({"player": [key[0]], "total": [-1]})

    def close(self):
        pass


@pytest.fixture(scope="module")
def tracker(spark, broker, tmp_path_factory):
    base = tmp_path_factory.mktemp("tws")
    events = write_events(base / "events").drop_duplicates("event_id")
    # a TTL needs processing time: Spark then runs a batch every trigger, data or not
    query = (spark.readStream.schema(EVENTS).option("maxFilesPerTrigger", 1)
             .json(str(base / "events")).dropDuplicates(["event_id"])
             .groupBy("player").transformWithStateInPandas(
                 Tracker(), "player string, total long", "update", "ProcessingTime")
             .writeStream.format("noop").outputMode("update").queryName("tracker")
             .option("checkpointLocation", str(base / "ck"))
             .trigger(processingTime="1 second").start())
    live = sk.attach(query, kafka=broker, ledger_dir=base / "ledgers")
    try:
        live.wait_for_batches(FILES + 1, timeout=240)
        last = live.wait_shipped()
        yield live, events, last
    finally:
        live.close()
        query.stop()


def test_tracker_parts_are_each_variable_and_the_timers(tracker):
    live, _, _ = tracker
    states = live.states()
    assert set(zip(states["part"], states["variable_type"], states["ttl"], strict=True)) >= {
        ("0/total", "ValueState", False), ("0/recent", "ListState", False),
        ("0/best", "MapState", True), ("0/seen", "ValueState", True),
        ("0/timers", "TimerState", False)}
    assert set(live.changelog_topics()) == {"1/default", "0/total", "0/recent", "0/best",
                                            "0/seen", "0/timers"}


def test_tracker_state_equals_pandas(tracker):
    live, events, last = tracker
    total = live.snapshot("0/total", last)
    assert dict(zip(total["player"], total["total"], strict=True)) == \
        events.groupby("player")["score"].sum().to_dict()
    best = live.snapshot("0/best", last)
    expected = events.groupby(["player", "item"])["score"].max()
    assert {(p, i): s for p, i, s in zip(best["player"], best["item"], best["value_score"],
                                         strict=True)} == expected.to_dict()
    assert (best["ttlExpirationMs"] > pd.Timestamp.now().value // 10**6).all()
    recent = live.snapshot("0/recent", last)
    for player, rows in events.sort_values("ts").groupby("player"):
        held = recent[recent["player"] == player]
        assert list(zip(held["item"], held["score"], strict=True)) == \
            list(zip(rows["item"].tail(3), rows["score"].tail(3), strict=True)), player
    timers = live.snapshot("0/timers", last)
    assert sorted(timers["player"]) == sorted(events["player"].unique())


def test_batches_told_idle_by_their_delta_files_are_those_spark_s_change_feeds_leave_empty(
        tracker):
    """The data batches and the batches a second after the input ended (the TTL's deletes
    among them): ``batches_changed_nothing`` says idle exactly where every part of the
    operator with a change feed has no change (the timers, which have none, are set only
    by data batches). A shared round over idle batches ships without a Spark read."""
    from statekit.spark_state.spark_files import batches_changed_nothing

    live, _, last = tracker
    now = live.wait_shipped()
    partitions = live.checkpoint.shuffle_partitions()
    first = max(0, last - 4)
    changed = {op: set() for op in (0, 1)}   # operator -> the batches its change feeds name
    for part in live.parts():
        if part != "0/timers":
            changed[int(part.split("/")[0])] |= set(live.changes(part, first, now)["batch"])
    told = {}
    for batch in range(first, now + 1):
        for op, batches in changed.items():
            told[op, batch] = batch not in batches
            assert batches_changed_nothing(live.checkpoint, op, batch, batch, partitions) \
                == told[op, batch], (op, batch)
    assert set(told.values()) == {True, False}, told   # both kinds were seen
    idle_rounds = [r for w in live.changelogs.values() for r in w.rounds
                   if all(told.get((w.source.operator_id, b), False)
                          for b in range(r.first, r.last + 1))]
    assert idle_rounds and all(r.records == 0 for r in idle_rounds)


@pytest.mark.parametrize("part", ["1/default", "0/total", "0/recent", "0/best", "0/timers",
                                  "0/seen"])
def test_tracker_changelogs_replay_to_each_snapshot(tracker, part):
    live, _, last = tracker
    if part == "0/timers":  # a round's net change: exact at the end of a round
        assert_replays_to_snapshot(live, part, _round_end(live, part, last))
        return
    assert_replays_to_snapshot(live, part, last)
    assert_replays_to_snapshot(live, part, 2)


def _round_end(live, part: str, batch: int) -> int:
    """The batch the last shipping round of ``part`` ended at, once ``batch`` is shipped."""
    live.wait_shipped(batch)
    return live.changelogs[part].shipped_batch


def test_a_list_states_changelog_has_one_record_per_player_a_batch_touched(tracker):
    live, events, last = tracker
    shape = live.part_shape("0/recent")
    assert shape.lists and shape.list_columns == (("item", "string"), ("score", "bigint"))
    log = live.read_changelog("0/recent").records
    # each data batch rewrote every player's list once: four records a batch with data
    per_batch = log.groupby("batch")["player"].agg(list)
    assert all(sorted(players) == ["p0", "p1", "p2", "p3"] for players in per_batch)
    assert log["rows"].map(len).max() == 3


def test_the_timers_changelog_has_each_players_timer_as_the_last_batch_with_data_set_it(
        tracker):
    """Timers have no change feed: statekit diffs the timers after a shipping round with
    those before it. Each data batch deleted every player's timer and registered a new one
    an hour on; each record holds a player's one timer, an hour after the time of the last
    batch with data at or before the record's batch (a round that covered several batches
    ships their net change, stamped with its last batch)."""
    live, events, last = tracker
    shape = live.part_shape("0/timers")
    assert shape.lists and shape.list_columns == (("expiration_timestamp_ms", "bigint"),)
    log = live.read_changelog("0/timers", to_batch=_round_end(live, "0/timers", last)).records
    progress = live.progress().set_index("batch")
    with_data = progress.index[progress["input_rows"] > 0]
    assert len(with_data) == FILES
    assert set(log["player"]) == {"p0", "p1", "p2", "p3"}
    assert log["rows"].map(len).eq(1).all() and not log["tombstone"].any()
    for row in log.itertuples():
        set_by = max(b for b in with_data if b <= row.batch)
        set_at = progress.loc[set_by, "timestamp"].value // 10**6
        assert 0 <= row.rows[0]["expiration_timestamp_ms"] - 3_600_000 - set_at < 60_000, row
    # at most one record per player and batch; the last data batch's timers all shipped
    assert not log.duplicated(["batch", "player"]).any()
    assert (log.groupby("player")["batch"].max() >= with_data.max()).all()


@pytest.mark.parametrize("part", ["0/recent", "0/best", "0/timers"])
def test_tracker_routed_gets_answer_each_key(tracker, part, tmp_path):
    """A list state answers each player's list; a map state each entry by its full key,
    and each player's whole map by the player alone."""
    from statekit.errors import BadArgument

    live, _, _ = tracker
    # the query runs a batch a second: read a batch Spark still keeps (after the input
    # ended, only ``seen``'s TTL changes anything)
    last = live.wait_shipped()
    snap = live.snapshot(part, last)

    def whole_maps(client):
        for player, entries in snap.groupby("player"):
            answer = client.get({"player": player}, min_batch=last, timeout=30)
            assert sorted((r["item"], r["value_score"]) for r in answer.rows) == \
                sorted(zip(entries["item"], entries["value_score"], strict=True))
            assert answer.partitions[0].partition == entries["partition"].iloc[0]
        assert client.get({"player": "nobody"}).rows == []
        with pytest.raises(BadArgument, match=r"or only \['player'\]"):
            client.get({"item": "i0"})

    assert_routed_gets_equal_snapshot(live, part, tmp_path, last=last,
                                      then=whole_maps if part == "0/best" else None)


def test_a_ttl_expiring_reaches_the_changelog_as_tombstones(tracker):
    """``seen`` keeps each player's last event time 4 s: once the input ends, Spark's TTL
    removes every player's value, its change feed says delete, and the changelog holds a
    tombstone after each player's last put; replayed, the part is empty, as Spark holds it
    (``test_tracker_changelogs_replay_to_each_snapshot`` replays it while it holds values)."""
    live, events, _ = tracker
    deadline = time.monotonic() + 120
    while True:
        batch = live.wait_shipped()
        if live.snapshot("0/seen", batch).empty:
            break
        assert time.monotonic() < deadline, "the 4 s TTL of 0/seen expired nothing in 120 s"
        time.sleep(1)
    # the query runs a batch a second: the changelog keeps what Spark may have purged
    log = live.read_changelog("0/seen", to_batch=batch).records
    assert sorted(log.loc[log["tombstone"], "player"]) == ["p0", "p1", "p2", "p3"]
    for player, records in log.groupby("player"):
        assert records["tombstone"].tolist()[-1] and not records["tombstone"].iloc[0], player
        put = records.loc[~records["tombstone"], "value_at"].iloc[-1]
        assert put == events.loc[events["player"] == player, "ts"].max(), player
    assert live.replay("0/seen", batch).empty


def test_close_ships_what_is_committed_once_for_every_part(tracker):
    """``close()`` stops the shared rounds once: one last round ships every part's committed
    batches, and each part's own ``stop`` after it ships nothing more, though the query
    goes on committing a batch a second (it used to ship a round per part, each chasing the
    batches committed meanwhile). Last in the module: the handle is closed after it."""
    live, _, _ = tracker
    writers = list(live.changelogs.values())
    reads_before = {r.read for w in writers for r in w.rounds}
    committed = live.last_batch
    live.close()
    new_reads = {r.read for w in writers for r in w.rounds} - reads_before
    # the round the background thread had under way, if any, and the one close() ran
    assert len(new_reads) <= 2, new_reads
    shipped = {w.shipped_batch for w in writers}
    assert len(shipped) == 1 and shipped.pop() >= committed
    assert live.changelogs == {}


# --- applyInPandasWithState ---------------------------------------------------------------------
