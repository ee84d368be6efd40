"""statekit.processor: a person's processor with named stores, run by Spark, read by store.

The Spark tests run each processor on the game events (a real Kafka topic, the shared
SparkSession) for at least five batches and compare each store's snapshot with the same
logic in pandas over the same input. The store logic itself (the per-call cache, what
each method scans, the shape checks) is also tested on an in-memory stand-in for Spark's
map state: pure logic, no Spark.
"""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path

import pandas as pd
import pytest

from statekit.datasets import GAME_EVENT_SCHEMA, game_events, parse_game_events
from statekit.errors import BadArgument
from statekit.inspect.logs import batches
from statekit.processor import (
    Processor,
    ProcessorError,
    Session,
    key_value_store,
    plan_of,
    schedule,
    session_store,
    start_processor,
    window_store,
)
from statekit.processor.examples import (
    Deduplicate,
    SessionTracker,
    ThreeGamesRule,
    dedup_reference,
    rule_reference,
    rule_store_reference,
    sessions_reference,
)
from statekit.processor.map_store import StoreContext
from statekit.processor.stores import KeyValueStore, SessionStore, WindowStore
from statekit.spark_state.changes import apply_changes, same_rows

BATCH = 800  # records per micro-batch: the 5,000 game events make 7 batches
WATERMARK = "50 minutes"  # later than the data's late events (45 min): none is dropped


@pytest.fixture(scope="module")
def events() -> pd.DataFrame:
    """The valid game events as pandas (what Spark's parse keeps): player, game, score, ts."""
    lines = (Path(__file__).resolve().parents[2] / "data" / "game_events.jsonl").read_text()
    frame, _ = parse_game_events(lines.splitlines())
    frame = frame.rename(columns={"event_time": "ts"})
    frame["ts"] = frame["ts"].dt.tz_convert(None)
    frame["score"] = frame["score"].astype("int64")
    return frame[["player", "game", "score", "ts"]]


def run(source, processor, broker, spark, tmp_path, name, **options):
    """Start ``processor`` over ``source`` (players' game events) and drain it."""
    defaults = dict(keys="player", event_schema=GAME_EVENT_SCHEMA, kafka=broker, spark=spark,
                    checkpoint=str(tmp_path / name), name=name,
                    max_offsets_per_trigger=BATCH, trigger="100 milliseconds")
    if processor.time == "event":
        defaults.update(event_time="ts", watermark=WATERMARK)
    return start_processor(source, processor, **{**defaults, **options})


def clock_of(query, batch: int) -> pd.Timestamp:
    """The processor's event-time clock in ``batch``: the watermark that batch ran with."""
    return batches(query.checkpoint).set_index("batch").loc[batch, "watermark"]


def rows(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    return frame[columns].sort_values(columns, ignore_index=True)


# --- the stores' own logic, on an in-memory stand-in for Spark's map state ---------------------
class FakeMapState:
    """The calls a store makes of Spark's MapState, on a dict (for one grouping key)."""

    def __init__(self):
        self.data: dict[tuple, tuple] = {}
        self.calls: list[str] = []

    def getValue(self, key):
        self.calls.append("getValue")
        return self.data.get(tuple(key))

    def updateValue(self, key, value):
        self.calls.append("updateValue")
        self.data[tuple(key)] = tuple(value)

    def removeKey(self, key):
        self.calls.append("removeKey")
        self.data.pop(tuple(key), None)

    def iterator(self):
        self.calls.append("iterator")
        return iter(list(self.data.items()))

    def exists(self):
        self.calls.append("exists")
        return bool(self.data)


class Clock(StoreContext):
    def __init__(self, ms=None):
        self.ms, self.timers, self.obsolete = ms, set(), set()

    def clock_ms(self):
        return self.ms

    def want_timer(self, ms):
        self.timers.add(ms)

    def obsolete_timer(self, ms):
        self.obsolete.add(ms)


def store_of(cls, spec, clock=None):
    state = FakeMapState()
    store = cls(spec, state, clock or Clock())
    store._begin()
    return store, state


def test_key_value_store_reads_once_per_call_and_writes_when_the_call_ends():
    store, state = store_of(KeyValueStore, key_value_store(
        "games", key="bucket timestamp, game string", value="events bigint"))
    t0, t5 = pd.Timestamp("2026-01-05 10:00"), pd.Timestamp("2026-01-05 10:05")
    for bucket, game, n in [(t0, "g1", 2), (t0, "g2", 1), (t5, "g1", 4), (t5, "h9", 1)]:
        store.put((bucket, game), n)
    assert state.data == {} and store.get((t0, "g1")) == 2  # not sent yet, read back
    store._flush()
    assert len(state.data) == 4 and state.calls == ["updateValue"] * 4
    store._begin()  # the next call: nothing cached
    state.calls.clear()
    assert store.prefix_scan((t0,)) == [((t0, "g1"), 2), ((t0, "g2"), 1)]
    assert store.prefix_scan((t5, "g")) == [((t5, "g1"), 4)]  # a string field: string prefix
    assert store.range((t0, "g2"), (t5,)) == [((t0, "g2"), 1)]  # (t5, ...) > (t5,)
    assert store.range(None, (t0, "g9")) == [((t0, "g1"), 2), ((t0, "g2"), 1)]
    assert [k for k, _ in store.all()] == [(t0, "g1"), (t0, "g2"), (t5, "g1"), (t5, "h9")]
    assert store.approximate_num_entries() == 4
    assert state.calls == ["iterator"]  # one scan serves every scanning call of the call
    assert store.delete((t0, "g1")) == 2 and store.get((t0, "g1")) is None
    assert store.put_if_absent((t0, "g2"), 7) == 1 and store.get((t0, "g2")) == 1
    store.put((t5, "h9"), None)  # None deletes, as Kafka Streams' put(k, null)
    store._flush()
    assert sorted(state.data) == [(t0.tz_localize("UTC").to_pydatetime(), "g2"),
                                  (t5.tz_localize("UTC").to_pydatetime(), "g1")]


def test_store_values_are_scalars_or_dicts_and_timestamps_come_back_naive_utc():
    store, state = store_of(KeyValueStore, key_value_store(
        "seen", key="id string", value="first_seen timestamp, copies int"))
    aware = pd.Timestamp("2026-01-05 11:00", tz="Europe/Paris")
    store.put("e1", {"first_seen": aware, "copies": 1})
    store.put("e2", (dt.datetime(2026, 1, 5, 10, 0), 3))
    store._flush()
    store._begin()
    assert store.get("e1") == {"first_seen": pd.Timestamp("2026-01-05 10:00"), "copies": 1}
    assert store.get(("e2",)) == {"first_seen": pd.Timestamp("2026-01-05 10:00"), "copies": 3}


@pytest.mark.parametrize(("call", "message"), [
    (lambda s: s.put(("g1", 3), 1), r"key \('g1', 3\) does not fit: one value \(id string\)"),
    (lambda s: s.put(7, 1), r"key 7 does not fit: 7 is not a string"),
    (lambda s: s.put(None, 1), r"key None does not fit: id is null"),
    (lambda s: s.get(pd.NaT), r"key NaT does not fit: id is null"),
    (lambda s: s.put("g1", "lots"), r"value 'lots' does not fit: 'lots' is not a bigint"),
    (lambda s: s.put("g1", {"m": 1}), r"value \{'m': 1\} does not fit: one value \(n bigint\)"),
    (lambda s: s.put("g1", 2**70), r"value 1180591620717411303424 does not fit: .* is out of "
                                   r"the range of a bigint"),
    (lambda s: s.range(("a", "b")), r"from_key \('a', 'b'\) does not fit: the key's leading"),
])
def test_a_store_call_of_the_wrong_shape_names_the_store_the_value_and_the_shape(call, message):
    store, state = store_of(KeyValueStore, key_value_store("seen", key="id string",
                                                           value="n bigint"))
    with pytest.raises(ProcessorError, match=r"store 'seen' \(key-value store\): " + message):
        call(store)
    store._flush()
    assert state.data == {}  # nothing half-written


def test_window_store_fetches_by_time_and_refuses_a_window_behind_its_retention():
    clock = Clock(ms=pd.Timestamp("2026-01-05 11:00").value // 10**6)
    store, state = store_of(WindowStore, window_store("counts", value="n bigint",
                                                      retention="30 minutes"), clock)
    w = [pd.Timestamp(f"2026-01-05 10:{m:02d}") for m in (30, 40, 50)]
    for start, n in zip(w, (1, 2, 3), strict=True):
        store.put(None, n, start)
    assert store.fetch(None, w[1]) == 2
    assert store.fetch(None, w[1], w[2]) == [(w[1], 2), (w[2], 3)]
    assert [s for _, s, _ in store.all()] == w
    assert store.retained_from == pd.Timestamp("2026-01-05 10:30")
    with pytest.raises(ProcessorError, match=r"window_start .*10:29.* outside the store's "
                                             r"retention .* at or after 2026-01-05 10:30:00"):
        store.put(None, 9, pd.Timestamp("2026-01-05 10:29"))
    with pytest.raises(ProcessorError, match="this store has no key fields: pass None"):
        store.put("p1", 1, w[0])
    with pytest.raises(ProcessorError, match="window_start 1767607200000 does not fit: "
                                             "a timestamp"):
        store.put(None, 1, 1767607200000)
    store._flush()
    expiry = {s: (s + pd.Timedelta("30min")).value // 10**6 for s in w}
    assert clock.timers == set(expiry.values())  # a timer per new window, at start + retention
    clock.timers.clear()
    store._begin()
    store.put(None, store.fetch(None, w[2]) + 1, w[2])  # an update: its timer is set already
    store._flush()
    assert clock.timers == set()
    clock.ms += 15 * 60_000  # 11:15: the 10:30 and 10:40 windows are past 30 minutes
    store._begin()
    assert store._expire(clock.ms) == 2
    store._flush()
    assert [s for _, s, _ in store.all()] == [w[2]]
    assert clock.obsolete == {expiry[w[0]], expiry[w[1]]} and store._expiries() == {expiry[w[2]]}


def test_session_store_finds_the_sessions_an_event_touches():
    store, _ = store_of(SessionStore, session_store("sessions", value="events bigint",
                                                    retention="30 minutes"), Clock(0))
    t = [pd.Timestamp(f"2026-01-05 10:{m:02d}") for m in (0, 10, 45, 50)]
    store.put(Session(None, t[0], t[1]), 2)
    store.put(Session(None, t[2], t[3]), 5)
    gap = pd.Timedelta("30min")
    found = store.find_sessions(None, t[1] + pd.Timedelta("20min") - gap,
                                t[1] + pd.Timedelta("20min") + gap)
    assert found == [(Session(None, t[0], t[1]), 2), (Session(None, t[2], t[3]), 5)]
    assert store.find_sessions(None, t[3] + pd.Timedelta("1min"), t[3]) == []
    assert store.fetch_session(None, t[2], t[3]) == 5
    assert store.fetch_session(None, t[2], t[2]) is None
    assert store.fetch(None) == found
    store.remove(Session(None, t[0], t[1]))
    assert [s for s, _ in store.all()] == [Session(None, t[2], t[3])]
    store.put((None, t[0], t[1]), 3)  # a plain (key, start, end) tuple is a session too
    assert store.fetch_session(None, t[0], t[1]) == 3


def test_both_session_store_families_share_the_session_type_and_names():
    """A processor's session store and a local one (statekit.stores): one Session type, the
    same method names and parameters, as Kafka Streams has one SessionStore."""
    import inspect

    from statekit import stores

    assert Session is stores.Session
    for name in ("put", "remove", "fetch_session", "find_sessions", "fetch", "all"):
        local = list(inspect.signature(getattr(stores.SessionStore, name)).parameters)
        own = list(inspect.signature(getattr(SessionStore, name)).parameters)
        assert own == local, name


@pytest.mark.parametrize(("session", "message"), [
    (Session(None, pd.Timestamp("2026-01-05 10:10"), pd.Timestamp("2026-01-05 10:00")),
     r"session Session\(key=None, start=Timestamp\('2026-01-05 10:10:00'\), .* does not "
     r"fit: a session that ends at or after its start"),
    (pd.Timestamp("2026-01-05 10:00"), r"session Timestamp\('2026-01-05 10:00:00'\) does not "
                                       r"fit: a Session\(key, start, end\)"),
    ((None, pd.Timestamp("2026-01-05 10:00")), r"session \(None, Timestamp.*\) does not fit: "
                                               r"a Session\(key, start, end\)"),
    ((None, 1, 2, 3), r"session \(None, 1, 2, 3\) does not fit: a Session\(key, start, end\)"),
    (Session("p1", pd.Timestamp("2026-01-05 10:00"), pd.Timestamp("2026-01-05 10:00")),
     r"key 'p1' does not fit: this store has no key fields: pass None"),
    (Session(None, 0, pd.Timestamp("2026-01-05 10:00")),
     r"session start 0 does not fit: a timestamp"),
])
def test_a_bad_session_names_the_store_and_the_value(session, message):
    store, state = store_of(SessionStore, session_store("sessions", value="events bigint",
                                                        retention="30 minutes"), Clock(0))
    for call in (lambda: store.put(session, 1), lambda: store.remove(session)):
        with pytest.raises(ProcessorError,
                           match=r"store 'sessions' \(session store\): " + message):
            call()
    store._flush()
    assert state.data == {}


def test_output_rows_are_checked_column_by_column():
    from statekit.processor.runner import conform

    class Out(Minimal):
        output = "player string, n bigint, at timestamp, score double"

    plan = plan_of(Out(), ["player"])
    good = pd.DataFrame({"score": [1.5, None], "player": ["a", "b"],
                         "n": pd.array([1, None], dtype="Int64"),
                         "at": pd.to_datetime(["2026-01-05", None])})
    assert list(conform(good, plan, "P.process()").columns) == ["player", "n", "at", "score"]
    assert len(conform(good.iloc[:0], plan, "P.process()")) == 0
    bad = {"n": ([1.0, 2.5], r"column 'n' = '2.5' at row 1: 2.5 has a fraction: not a bigint"),
           "at": (["2026-01-05", "x"], r"column 'at' = '2026-01-05' at row 0: '2026-01-05' is "
                                       r"not a timestamp"),
           "player": ([1, 2], r"column 'player' = '1' at row 0: 1 is not a string"),
           "score": ([True, False], r"column 'score' = 'True' at row 0: True is not a double")}
    for column, (values, message) in bad.items():
        frame = good.assign(**{column: values})
        with pytest.raises(ProcessorError, match=r"P.process\(\) returned rows that do not fit "
                                                 r"the declared output: " + message):
            conform(frame, plan, "P.process()")
    with pytest.raises(ProcessorError, match="it lacks column 'score'; declared: player string"):
        conform(good.drop(columns="score"), plan, "P.process()")
    with pytest.raises(ProcessorError, match="it has column 'extra', which is not declared"):
        conform(good.assign(extra=1), plan, "P.process()")


# --- declarations: refused before anything starts ------------------------------------------------
class Minimal(Processor):
    output = "player string"

    def __init__(self, stores=(), time=None):
        self._declared, self.time = list(stores), time

    def stores(self):
        return self._declared

    def process(self, key, rows):
        return None


def kv(name="seen", **options):
    return key_value_store(name, key="id string", value="n bigint", **options)


@pytest.mark.parametrize(("make", "what", "accepted"), [
    (lambda: plan_of(Minimal([kv(), kv()]), ["player"]), "store name of Minimal: 'seen'",
     "each name once"),
    (lambda: kv("default"), "store name: 'default'", "not 'default' (Spark's own"),
    (lambda: kv("timers"), "store name: 'timers'", "nor 'timers' (statekit's name"),
    (lambda: kv("$procTimers"), "store name: '$procTimers'", "starting with a letter or digit"),
    (lambda: kv("_ttl"), "store name: '_ttl'", "starting with a letter or digit"),
    (lambda: kv("my store"), "store name: 'my store'", "letters, digits"),
    (lambda: key_value_store("s", key="player string", value="partition int"),
     "store 's' value field: 'partition'", "a name other than partition, batch, change"),
    (lambda: window_store("w", key="window_start timestamp", value="n long",
                          retention="1 hour"), "store 'w' key field: 'window_start'",
     "'window_start' is statekit's own key column"),
    (lambda: key_value_store("s", key="id string", value="id long"),
     "store 's' value field: 'id'", "already a key field"),
    (lambda: key_value_store("s", key="id text", value="n long"),
     "type of store 's' key field 'id': 'text'", "string, bigint"),
    (lambda: plan_of(Minimal([key_value_store("s", key="player string", value="n long")]),
                     ["player"]), "field of store 's': 'player'",
     "other than the grouping key columns"),
    (lambda: plan_of(Minimal([kv(ttl="1 hour")], time="event"), ["player"]),
     "time of Minimal: 'event'", "Spark allows state TTLs only in ProcessingTime"),
    (lambda: plan_of(Minimal([window_store("w", value="n long", retention="1 hour")]),
                     ["player"]), "time of Minimal: None", "removes old entries by the"),
    (lambda: plan_of(Minimal, ["player"]), "processor: 'Minimal'", "an instance: Minimal()"),
])
def test_store_declarations_that_clash_are_refused_by_name(make, what, accepted):
    with pytest.raises(BadArgument) as err:
        make()
    assert f"bad {what};" in str(err.value)
    assert accepted in err.value.accepted


def test_a_punctuation_needs_a_clock_and_event_time_needs_a_watermark(broker):
    class Tick(Processor):
        output = "player string"

        @schedule("1 minute")
        def tick(self, key, timestamp):
            return None

        def process(self, key, rows):
            return None

    with pytest.raises(BadArgument, match="punctuation 'tick' runs on the processor's clock"):
        plan_of(Tick(), ["player"])
    Tick.time = "event"
    with pytest.raises(BadArgument, match=r"bad watermark: None;.*Tick runs on event time, "
                                          r"and punctuation 'tick' follow the watermark"):
        start_processor("games", Tick(), keys="player", kafka=broker,
                        event_schema=GAME_EVENT_SCHEMA)


# --- the examples, run by Spark, against pandas -------------------------------------------------
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_session_tracker_keeps_the_active_sessions(spark, broker, games, events, tmp_path):
    query = run(games, SessionTracker(gap="30 minutes"), broker, spark, tmp_path, "sessions",
                sink="memory")
    try:
        query.wait_until_drained()
        last = query.last_batch
        assert last >= 4 and query.late_events() == 0
        got = query.snapshot("sessions", batch=last)
        assert list(got.columns) == ["player", "session_start", "session_end", "events",
                                     "total_score", "partition"]
        expected = sessions_reference(events, "30 minutes", watermark=clock_of(query, last))
        columns = ["player", "session_start", "session_end", "events", "total_score"]
        assert len(expected) > 0
        pd.testing.assert_frame_equal(rows(got, columns), rows(expected, columns),
                                      check_dtype=False)
        # every session ever reported: its last report is pandas' session
        out = query.output().sort_values("events").groupby(["player", "session_start"]).last()
        everything = sessions_reference(events, "30 minutes").set_index(
            ["player", "session_start"])
        assert out.loc[everything.index, "events"].tolist() == everything["events"].tolist()
        # each kept session has its retention timer, at its end + the retention
        timers = query.timers(batch=last)
        ends = (got["session_end"] + pd.Timedelta("30min")).astype("int64") // 10**6
        assert set(zip(got["player"], ends, strict=True)) <= set(
            zip(timers["player"], timers["expiration_timestamp_ms"], strict=True))
        attached_to_a_transform_with_state(query, broker, tmp_path, last)
        the_handle_verbs_read_its_one_store_by_default(query, last)
        # a processor's stores diff like any part; explain is for start_query's aggregates
        import statekit as sk

        d = sk.diff((query, last - 1), (query, last), part="sessions")
        assert d.key_columns[0] == "player" and d.counts.sum() > 0
        with pytest.raises(sk.BadArgument, match="a query start_query runs"):
            query.explain("p1")
    finally:
        query.close()


def the_handle_verbs_read_its_one_store_by_default(query, last: int) -> None:
    """QueryHandle on a processor: its parts are its stores and the timers; with one store
    no name is needed; it keeps no changelog topic and says how to get one."""
    import statekit as sk

    assert query.parts() == ["sessions", "timers"]
    pd.testing.assert_frame_equal(query.snapshot(batch=last, sort=True),
                                  query.snapshot("sessions", batch=last, sort=True))
    pd.testing.assert_frame_equal(query.changes(), query.changes("sessions", last, last))
    with pytest.warns(DeprecationWarning, match=r"state\(name\)"):
        old = query.store("sessions")
    assert old.part == query.state().part
    assert query.changelog_topics() == {}
    with pytest.raises(sk.StatekitError, match=r"keeps no changelog topic.*attach\(q.query"):
        query.read_changelog()
    with pytest.raises(sk.BadArgument, match="'session'.*sessions"):
        query.snapshot("session")


def attached_to_a_transform_with_state(query, broker, tmp_path, last: int) -> None:
    """statekit.attach on the running processor as on anyone's query: its state variable
    (a map state: the user's map key is not hashed) and its timers are where Spark places
    them, and the variable's and the timers' changelogs replay to their snapshots."""
    import statekit as sk

    live = sk.attach(query.query, kafka=broker, ledger_dir=tmp_path / "ledgers")
    try:
        states = live.states()
        assert list(zip(states["part"], states["what"], states["variable_type"],
                        strict=True)) == [("0/sessions", "state variable", "MapState"),
                                          ("0/timers", "timers", "TimerState")]
        for part in states["part"]:
            snap = live.snapshot(part, last)
            assert len(snap) > 0
            assert (live.state_partitions(part, snap) == snap["partition"].to_numpy()).all()
        assert live.changelog_topics() == {"0/sessions": "sessions-op0-sessions-changelog",
                                           "0/timers": "sessions-op0-timers-changelog"}
        live.wait_shipped(last)
        for part in ("sessions", "timers"):  # the timers: one list of timers per player
            view = live.state(part)
            columns = view.key_columns + view.value_columns
            assert same_rows(live.replay(part, last)[columns],
                             live.snapshot(part, last)[columns]), part
        with pytest.raises(sk.BadArgument, match="0/sessions, 0/timers"):
            live.snapshot()  # two parts: one must be named
    finally:
        live.close()
    with pytest.warns(DeprecationWarning, match=r"use close\(\)"):
        live.detach()  # the old verb: closed already, nothing more to do


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_three_games_rule_flags_like_pandas_and_forgets_old_buckets(
        spark, broker, games, events, tmp_path):
    query = run(games, ThreeGamesRule(games=3, within="5 minutes"), broker, spark, tmp_path,
                "rule", sink="memory")
    try:
        query.wait_until_drained()
        last = query.last_batch
        assert last >= 4 and query.late_events() == 0
        flags = query.output()
        expected = rule_reference(events, games=3, within="5 minutes")
        assert 0 < len(expected) < events.groupby(["player", events["ts"].dt.floor("5min")]
                                                  ).ngroups  # some flagged, not all
        pd.testing.assert_frame_equal(rows(flags, ["player", "bucket"]),
                                      rows(expected, ["player", "bucket"]))
        # the store: every count as pandas has it; every bucket not yet over kept; none
        # forgotten later than the punctuation allows (it runs every 5 minutes per player)
        got = query.snapshot("games", batch=last)
        store = rule_store_reference(events, within="5 minutes")
        merged = got.merge(store, on=["player", "bucket", "game"], how="left",
                           suffixes=("", "_pandas"))
        assert (merged["events"] == merged["events_pandas"]).all()
        clock = clock_of(query, last)
        keep_all = store[store["bucket"] >= clock - pd.Timedelta("5min")]
        assert len(keep_all) and set(map(tuple, keep_all[["player", "bucket", "game"]].values)) \
            <= set(map(tuple, got[["player", "bucket", "game"]].values))
        assert got["bucket"].min() >= clock - pd.Timedelta("10min")
        assert len(got) < len(store)  # old buckets were forgotten
    finally:
        query.close()


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_deduplicate_passes_each_event_once_and_remembers_ids_for_its_ttl(
        spark, broker, events, tmp_path):
    records = game_events().records
    topic = "processor-dedup"
    from statekit.kafka.dataset_replay import replay

    replay(records, broker, topic, partitions=2, progress=False)
    replay(records.iloc[1000:3000], broker, topic, progress=False)  # re-delivered copies
    query = run(topic, Deduplicate(ttl="1 hour"), broker, spark, tmp_path, "dedup",
                sink="memory", required_fields=["ts"])  # as the pandas parse requires
    try:
        query.wait_until_drained()
        last = query.last_batch
        assert last >= 4
        passed = query.output()
        expected = dedup_reference(events)
        columns = ["player", "game", "score", "ts"]
        pd.testing.assert_frame_equal(rows(passed, columns), rows(expected, columns),
                                      check_dtype=False)
        seen = query.snapshot("seen", batch=last)
        layout = query.store_layout("seen")
        assert layout.value_columns == ("value_first_seen", "ttlExpirationMs")
        assert list(seen.columns) == [*layout.key_columns, *layout.value_columns, "partition"]
        pd.testing.assert_frame_equal(rows(seen, ["player", "game", "ts"]),
                                      rows(expected, ["player", "game", "ts"]))
        # each id expires an hour (processing time) after the batch that first saw it
        times = batches(query.checkpoint)["timestamp_ms"].astype("int64")
        first = seen["value_first_seen"].astype("int64") // 10**6
        assert set(first) <= set(times)
        assert (seen["ttlExpirationMs"] == first + 3_600_000).all()
        # the change feed replays to the snapshot
        changes = query.changes("seen", 0, last)
        keys, values = list(layout.key_columns), list(layout.value_columns)
        assert same_rows(apply_changes(changes, keys, values), seen[keys + values])
    finally:
        query.close()


# --- a window store, written here as a person would --------------------------------------------
def windowed_counts(size: str = "10 minutes", retention: str = "30 minutes"):
    """Per player, events and score per tumbling window in a window store."""

    class WindowedCounts(Processor):
        time = "event"
        output = "player string, window_start timestamp, events bigint, score bigint"

        def stores(self):
            return [window_store("windows", value="events bigint, score bigint",
                                 retention=retention)]

        def init(self, stores):
            self.windows = stores["windows"]

        def process(self, player, rows):
            starts = rows["ts"].dt.floor(pd.Timedelta(size))
            out = []
            for start, group in rows.groupby(starts):
                old = self.windows.fetch(None, start) or {"events": 0, "score": 0}
                new = (old["events"] + len(group), old["score"] + int(group["score"].sum()))
                if start >= self.windows.retained_from:  # else: past retention already
                    self.windows.put(None, new, start)
                out.append((player, start, *new))
            return pd.DataFrame(out, columns=["player", "window_start", "events", "score"])

    return WindowedCounts()


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_window_store_holds_the_windows_its_retention_keeps(spark, broker, games, events,
                                                              tmp_path):
    query = run(games, windowed_counts(), broker, spark, tmp_path, "windows")
    try:
        query.wait_until_drained()
        last = query.last_batch
        assert last >= 4
        got = query.snapshot("windows", batch=last)
        layout = query.store_layout("windows")
        assert list(got.columns) == [*layout.key_columns, *layout.value_columns, "partition"]
        per = events.assign(window_start=events["ts"].dt.floor("10min")).groupby(
            ["player", "window_start"]).agg(events=("ts", "size"), score=("score", "sum"))
        per = per.reset_index()
        clock = clock_of(query, last)
        expected = per[per["window_start"] + pd.Timedelta("30min") >= clock]
        columns = ["player", "window_start", "events", "score"]
        assert 0 < len(expected) < len(per)
        pd.testing.assert_frame_equal(rows(got, columns), rows(expected, columns),
                                      check_dtype=False)
        changes = query.changes("windows", 0, last)
        assert set(changes["change"]) == {"put", "delete"}
        assert same_rows(apply_changes(changes, ["player", "window_start"], ["events", "score"]),
                         got[columns])
    finally:
        query.close()


# --- a TTL, watched expiring -----------------------------------------------------------------
def small_topic(broker, name: str, events: list[dict]) -> str:
    """``events`` (player, game, score, ts) in a one-partition topic, keyed by player."""
    import json

    from statekit.kafka.dataset_replay import replay

    start = pd.Timestamp("2026-01-05 10:00")
    records = pd.DataFrame({
        "key": [e["player"] for e in events],
        "value": [json.dumps({**e, "ts": e["ts"].isoformat() + "Z"}) for e in events],
        "timestamp": [(e["ts"] - start).value // 10**6 + 1767607200000 for e in events]})
    replay(records, broker, name, partitions=1, progress=False)
    return name


def plays(n: int, games: int = 3, player: str = "p1") -> list[dict]:
    start = pd.Timestamp("2026-01-05 10:00")
    return [{"player": player, "game": f"g{i % games}", "score": i,
             "ts": start + pd.Timedelta(minutes=i)} for i in range(n)]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_ttl_forgets_ids_so_a_late_copy_passes_again(spark, broker, tmp_path):
    topic = small_topic(broker, "processor-ttl", plays(12))
    query = run(topic, Deduplicate(ttl="2 seconds"), broker, spark, tmp_path, "ttl",
                sink="memory", max_offsets_per_trigger=4)
    try:
        query.wait_until_drained()
        assert len(query.output()) == 12
        deadline = time.monotonic() + 180
        while len(query.snapshot("seen")) and time.monotonic() < deadline:
            time.sleep(1)  # Spark removes expired entries in the next batches (one a trigger)
        assert query.snapshot("seen").empty, "the TTL never removed the ids"
        deletes = query.changes("seen", 0).query("change == 'delete'")
        assert sorted(deletes["game"] + deletes["ts"].astype(str)) == sorted(
            e["game"] + str(e["ts"]) for e in plays(12))
        small_topic(broker, topic, plays(12))  # the same 12 events again: forgotten, so passed
        query.wait_until_drained()
        assert len(query.output()) == 24
    finally:
        query.close()


# --- bad values at run time: a clear error, and the query untouched -----------------------------
def counting(mistake: str | None):
    """Counts per game in a key-value store, and per 10-minute window in a window store;
    on the game "boom" it makes ``mistake`` (None: counts it like any game)."""

    class Counts(Processor):
        time = "event"
        output = "player string, game string, n bigint"

        def stores(self):
            return [key_value_store("counts", key="game string", value="n bigint"),
                    window_store("recent", value="n bigint", retention="10 minutes")]

        def init(self, stores):
            self.counts, self.recent = stores["counts"], stores["recent"]

        def process(self, player, rows):
            out = []
            for game, n in rows.groupby("game").size().items():
                total = (self.counts.get(game) or 0) + int(n)
                if game == "boom" and mistake == "shape":
                    self.counts.put((game, "extra"), total)
                elif game == "boom" and mistake == "retention":
                    self.recent.put(None, total, rows["ts"].max() - pd.Timedelta("1 day"))
                elif game == "boom" and mistake == "output":
                    out.append((player, game, "lots"))
                    continue
                self.counts.put(game, total)
                out.append((player, game, total))
            return pd.DataFrame(out, columns=["player", "game", "n"])

    return Counts()


BOOM = [*plays(40), {"player": "p1", "game": "boom", "score": 0,
                     "ts": pd.Timestamp("2026-01-05 10:41")}]


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize(("mistake", "message"), [
    ("output", r"Counts.process\(\) returned rows that do not fit the declared output: "
               r"column 'n' = 'lots' at row 0: 'lots' is not a bigint; declared: player "
               r"string, game string, n bigint"),
    ("shape", r"store 'counts' \(key-value store\): key \('boom', 'extra'\) does not fit: "
              r"one value \(game string\)"),
    ("retention", r"store 'recent' \(window store\): window_start Timestamp\('2026-01-04 "
                  r"10:41:00'\) does not fit: it is outside the store's retention \(600000 ms\)"),
])
def test_a_bad_value_fails_the_batch_by_name_and_leaves_the_state_as_committed(
        spark, broker, tmp_path, mistake, message):
    topic = small_topic(broker, f"processor-boom-{mistake}", BOOM)
    query = run(topic, counting(mistake), broker, spark, tmp_path, "boom",
                max_offsets_per_trigger=20, watermark="5 minutes")
    with pytest.raises(ProcessorError, match="query 'boom' failed: " + message):
        query.wait_until_drained()
    query.close()
    assert query.last_batch == 1  # batches 0 and 1 read the 40 good events; 2 failed
    counts = pd.Series([e["game"] for e in plays(40)]).value_counts()
    assert query.snapshot("counts").set_index("game")["n"].to_dict() == counts.to_dict()
    if mistake == "output":  # fixed, the same checkpoint goes on: nothing was lost
        again = run(topic, counting(None), broker, spark, tmp_path, "boom",
                    max_offsets_per_trigger=20, watermark="5 minutes")
        try:
            again.wait_until_drained()
            got = again.snapshot("counts").set_index("game")["n"].to_dict()
            assert got == {**counts.to_dict(), "boom": 1}
        finally:
            again.close()


# --- punctuation on processing time ------------------------------------------------------------
def forgetful():
    """Counts events per game; every second of processing time, per player holding state, a
    punctuation reports how many games it held and forgets them all."""

    class Forgetful(Processor):
        time = "processing"
        output = "player string, game string, n bigint"

        def stores(self):
            return [key_value_store("counts", key="game string", value="n bigint")]

        def init(self, stores):
            self.counts = stores["counts"]

        def process(self, player, rows):
            for game, n in rows.groupby("game").size().items():
                self.counts.put(game, (self.counts.get(game) or 0) + int(n))

        @schedule("1 second")
        def report_and_forget(self, player, now):
            games = self.counts.all()
            for game, _ in games:
                self.counts.delete(game)
            return pd.DataFrame({"player": [player], "game": ["(forgotten)"],
                                 "n": [sum(n for _, n in games)]})

    return Forgetful()


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_punctuation_on_processing_time_runs_per_player_holding_state(spark, broker, tmp_path):
    events = plays(9, player="p1") + plays(6, player="p2")
    topic = small_topic(broker, "processor-tick", events)
    query = run(topic, forgetful(), broker, spark, tmp_path, "tick", sink="memory",
                max_offsets_per_trigger=5)
    try:
        query.wait_until_drained()
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            reports = query.output()
            if reports.groupby("player")["n"].sum().to_dict() == {"p1": 9, "p2": 6}:
                break
            time.sleep(1)
        assert reports.groupby("player")["n"].sum().to_dict() == {"p1": 9, "p2": 6}
        assert query.snapshot("counts").empty  # every game forgotten
        time.sleep(3)  # a player with no state left gets no timer, so no more reports
        assert query.output()["n"].sum() == 15 and query.timers().empty
    finally:
        query.close()


def echo() -> Processor:
    """A processor returning every row it is handed (no stores): what Spark let through.
    (Defined in a function so that Spark's workers get the class by value.)"""

    class Echo(Processor):
        time = "event"
        output = "player string, game string, ts timestamp"

        def process(self, player, rows):
            return rows[["player", "game", "ts"]]

    return Echo()


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_late_events_counts_the_rows_spark_dropped_behind_the_watermark(spark, broker, tmp_path):
    late = [{"player": "p1", "game": "late", "score": 0,
             "ts": pd.Timestamp("2026-01-05 10:05")}] * 3  # one key: 3 rows, 1 group
    topic = small_topic(broker, "processor-late", plays(40) + late)
    query = run(topic, echo(), broker, spark, tmp_path, "late", sink="memory",
                watermark="5 minutes", max_offsets_per_trigger=10)
    try:
        query.wait_until_drained()
        out = query.output()
        assert len(out) == 40 and "late" not in set(out["game"])
        assert query.late_events() == 3
    finally:
        query.close()


# --- punctuation on event time: once a clock, whatever else expires ---------------------------
def daily_report():
    """Hourly counts per player in a window store kept 6 hours; a daily punctuation reports
    the processor's clock (``now``) per player holding state."""

    class DailyReport(Processor):
        time = "event"
        output = "player string, game string, n bigint"

        def stores(self):
            return [window_store("hourly", value="n bigint", retention="6 hours")]

        def init(self, stores):
            self.hourly = stores["hourly"]

        def process(self, player, rows):
            for hour, n in rows.groupby(rows["ts"].dt.floor("h")).size().items():
                self.hourly.put(None, int(n), hour)

        @schedule("1 day")
        def report(self, player, now):
            return pd.DataFrame({"player": [player], "game": [str(now)], "n": [1]})

    return DailyReport()


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_punctuation_runs_once_a_clock_though_retention_timers_fall_on_its_ticks(
        spark, broker, tmp_path):
    # hourly events over three days (p1) and 30 hours (p2): windows starting at 18:00 expire
    # at midnight, on the daily punctuation's ticks, in the batch whose clock passes them
    start = pd.Timestamp("2026-01-05 00:00")
    events = [{"player": player, "game": "g", "score": 1, "ts": start + pd.Timedelta(hours=h)}
              for player, hours in (("p1", 72), ("p2", 30)) for h in range(hours)]
    topic = small_topic(broker, "processor-daily", sorted(events, key=lambda e: e["ts"]))
    query = run(topic, daily_report(), broker, spark, tmp_path, "daily", sink="memory",
                max_offsets_per_trigger=len(events), watermark="5 minutes")
    try:
        query.wait_until_drained()
        deadline = time.monotonic() + 180   # the clock moves in the batch after the data's
        while query.output().empty and time.monotonic() < deadline:
            time.sleep(0.5)
        reports = query.output()   # a memory sink shows a batch's rows all at once
        assert sorted(set(reports["player"])) == ["p1", "p2"]
        repeated = reports[reports.duplicated(["player", "game"], keep=False)]
        assert repeated.empty, f"a punctuation ran twice at one clock:\n{repeated}"
    finally:
        query.close()
