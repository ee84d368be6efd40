"""Every workshop check, fed wrong answers of each kind its messages name and right answers
written in more than one way (types, spacing, order). No Spark: what a notebook measured is
given as values.

A check is only as good as the wrong answers it refuses: each case below names the phrase
the learner must read for that mistake. ``test_every_exercise_is_covered`` keeps the table
complete: a new exercise must come with its cases (here, or in the test module named in
``ELSEWHERE``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pytest
from test_workshop_basics import EVENTS, FakeQuery

from statekit.model.query_spec import QuerySpec, session, tumbling
from statekit.reference.sessions import session_reference
from statekit.stores import Session
from statekit.workshop import check
from statekit.workshop.monitoring import dashboard_frame
from statekit.workshop.registry import EXERCISES, _load
from statekit.workshop.windows import with_last_activity

_load()


def said(verdict) -> str:
    return " | ".join(p.text for p in verdict.points)


@dataclass
class Case:
    """Right answers (each must pass) and (wrong answer, phrase it must be told) pairs."""

    right: list
    wrong: list[tuple[object, str]]
    measured: dict = field(default_factory=dict)


# --- what notebooks measured, as plain values --------------------------------------------------
SNAPSHOT = pd.DataFrame({
    "window_start": pd.to_datetime(["2026-01-05 10:00", "2026-01-05 10:10", "2026-01-05 10:00"]),
    "player": ["p07", "p07", "p09"], "count": [2, 1, 4], "partition": [0, 1, 1]})
STORE = SNAPSHOT.drop(columns="partition")
T = pd.Timestamp("2026-01-05 10:00")
LAG = pd.DataFrame({"time": [T, T, T + pd.Timedelta("50ms"), T + pd.Timedelta("100ms")],
                    "partition": [0, 1, 0, 0], "lag": [0, 0, 340, 0]})
RIGHT_SETTINGS = {"spark.sql.streaming.stateStore.rocksdb.boundedMemoryUsage": "true",
                  "spark.sql.streaming.stateStore.rocksdb.maxMemoryUsageMB": "128",
                  "spark.sql.streaming.stateStore.rocksdb.writeBufferCacheRatio": "0.5"}
ROCKSDB = "spark.sql.streaming.stateStore.rocksdb."
WAYS = {"a": "routed", "b": "global", "c": "scatter-gather", "d": "scatter-gather"}
PROGRESS = pd.DataFrame({"batch": [0, 1, 2], "state_rows_total": [40, 70, 75],
                         "rocksdbReadBlockCacheHitCount": [0, 8, 9],
                         "rocksdbReadBlockCacheMissCount": [0, 2, 1],
                         "duration_ms": [900, 400, 350]})

CASES: dict[str, Case] = {
    "00.2": Case(right=["04_restore", 4, np.int64(4), " 04 ", "04_restore.ipynb", 4.0],
                 wrong=[("06", "teaches interactive queries"),
                        ("05", "standbys make the wait shorter"),
                        ("03", "compaction bounds what a restore reads"),
                        ("x", "names no notebook")]),
    "00.3": Case(right=["smaller", " Smaller "],
                 wrong=[("larger", "so it is smaller"), ("equal", "so it is smaller"),
                        ("huge", "is not one of"), ("bigger", "so it is smaller")],
                 measured={"events": 300, "state_rows": 41}),
    "01.1": Case(right=[False, "no", " No ", np.False_],
                 wrong=[(True, "hashing the window and the key together"),
                        ("maybe", "answer True")],
                 measured={"snapshot": SNAPSHOT}),
    "01.2": Case(right=[STORE.iloc[::-1], STORE.assign(count=STORE["count"].astype(float),
                                                       extra="x")],
                 wrong=[(STORE.iloc[:2], "rows are missing"),
                        (pd.concat([STORE, STORE.iloc[[0]].assign(player="p99")]),
                         "are not in the store"),
                        (STORE.assign(count=[2, 1, 5]), "count differs in 1 rows"),
                        (STORE.drop(columns="count"), "lacks the column"),
                        ([1, 2], "a pandas DataFrame"),
                        (pd.concat([STORE, STORE.iloc[[0]]]), "duplicate keys")],
                 measured={"expected": STORE, "key_columns": ["window_start", "player"],
                           "value_columns": ["count"], "batch": 2}),
    "02.1": Case(right=[9, "9", np.int64(9), 9.0],
                 wrong=[(141, "every window the query ever aggregated"),
                        (3, "the count for one origin"), (0, "last windows are still open"),
                        (7, "is not it"), ("many", "whole number")],
                 measured={"rows": 9, "keys": 3, "windows_made": 141,
                           "watermark": "2013-01-03 08:28"}),
    "03.1": Case(right=[40, "40", np.int64(40)],
                 wrong=[(300, "is the raw log"), (65, "that counts all tombstones"),
                        (12, "is not it"), (4.5, "whole number")],
                 measured={"compacted": 40, "raw": 300, "store_rows": 40, "tombstones": 25}),
    "03.5": Case(right=[{"statekit": "b", "kafka streams": "a"},
                        {"Kafka_Streams": "(A)", "Spark": " b) a tombstone"}],
                 wrong=[({"statekit": "a", "kafka streams": "a"},
                         "that is Kafka Streams; statekit ships"),
                        ({"statekit": "b", "kafka streams": "b"}, "that is statekit's topic"),
                        ({"statekit": "c", "kafka streams": "c"}, "not zeroed"),
                        ({"statekit": "b"}, "kafka streams: not answered"),
                        ({"statekit": "b", "kafka streams": "a", "flink": "a"},
                         "'flink' is not an engine"),
                        ({"statekit": "z", "kafka streams": "a"}, "not one of the choices"),
                        ("b", "one letter per engine")]),
    "04.1": Case(right=[2029, "2,029", np.int64(2029)],
                 wrong=[(11722, "every change the raw log holds"),
                        (0, "would leave the store empty"), (1000, "is too few"),
                        (5000, "count the store's rows"), (20000, "more than the raw log"),
                        ("lots", "not a number of records")],
                 measured={"raw_records": 11722, "compacted_records": 2029, "rows": 2029}),
    "04.2": Case(right=[700, "700", np.int64(700)],
                 wrong=[(2000, "the whole changelog"), (0, "0 would be right if"),
                        (5, "count the changelog records"), (True, "not a number")],
                 measured={"tail_records": 700, "total_records": 2000, "stopped_batch": 3}),
    "05.1": Case(right=["b", "B)", " (b) "],
                 wrong=[("a", "the lag rose above 0"), ("c", "fell back to 0 each time"),
                        ("z", "not one of the choices")],
                 measured={"lag": LAG, "largest_batch": 500}),
    "05.2": Case(right=[{"no standby": 900, "standby": 0, "stale standby": 300},
                        {"stale standby": " 300 ", "standby": np.int64(0),
                         "no standby": 900.0}],
                 wrong=[("900", "answer with a dict"),
                        ({"no standby": 900, "standby": 0}, "missing ['stale standby']"),
                        ({"no standby": 900, "standby": 0, "stale standby": 300, "x": 1},
                         "unknown ['x']"),
                        ({"no standby": True, "standby": 0, "stale standby": 300},
                         "not a number of records"),
                        ({"no standby": 600, "standby": 0, "stale standby": 300},
                         "it reads every record of the changelog"),
                        ({"no standby": 900, "standby": 300, "stale standby": 300},
                         "is too many"),
                        ({"no standby": 900, "standby": 0, "stale standby": 900},
                         "it stopped after batch 2")],
                 measured={"changelog_records": 900, "lag_at_kill": 0,
                           "after_stale_batch": 300, "stale_batch": 2}),
    "07.1": Case(right=[5 / 3, "1.67", 1.7, np.float64(1.6667)],
                 wrong=[(5, "also holds standby copies"), (2.5, "the active copy counts too"),
                        (3, "how many instances hold each partition"),
                        (1, "a global copy holds every row"), (1.5, "is off: measured"),
                        (-1, "one number > 0"), ("lots", "one number > 0")],
                 measured={"measured": 5 / 3, "instances": 5, "standbys": 2}),
    "07.2": Case(right=[WAYS, {"a": " Routed", "b": "GLOBAL", "c": "scatter-gather",
                               "d": "scatter-gather "}],
                 wrong=[({**WAYS, "a": "global"}, "a) global: better routed"),
                        ({**WAYS, "b": "routed"}, "b) routed: better global"),
                        ({**WAYS, "d": "teleport"}, "'teleport' is not one of"),
                        ({"a": "routed", "b": "global", "c": "scatter-gather"},
                         "d) not answered"),
                        ({**WAYS, "z": "global"}, "no question z"),
                        ("routed", "answer with a dict")]),
    "08.1": Case(right=[150, "150", np.int64(150), 150.0],
                 wrong=[(3000, "one row per event"), (12, "watermark evicts"),
                        (30, "forgets idle users"), (149, "distinct users"),
                        ("150 rows", "not a number")],
                 measured={"events": 3000, "per_user": 20, "rows": 150, "windowed": 12,
                           "ttl": 30}),
    "08.3": Case(right=[dashboard_frame(PROGRESS),
                        dashboard_frame(PROGRESS).iloc[::-1][
                            ["latency_ms", "cache_hit_ratio", "rows_added", "state_rows",
                             "batch"]].assign(note="extra")],
                 wrong=[("frame", "expected a pandas DataFrame"),
                        (dashboard_frame(PROGRESS).drop(columns="latency_ms"),
                         "missing column(s): latency_ms"),
                        (dashboard_frame(PROGRESS).iloc[:2], "2 rows; the query ran 3"),
                        (dashboard_frame(PROGRESS).assign(rows_added=[0, 30, 5]),
                         "right from the second batch on"),
                        (dashboard_frame(PROGRESS).fillna(0), "NaN, not 0"),
                        (dashboard_frame(PROGRESS).assign(latency_ms=[1, 2, 3]),
                         "batch 0 has 1"),
                        (dashboard_frame(PROGRESS).assign(state_rows="many"), "not numbers")],
                 measured={"progress": PROGRESS}),
    "09.1": Case(right=[1, "1", np.float64(1.0)],
                 wrong=[(2, "the defaults' figure"), (3, "not what ran"),
                        ("one", "not a number")],
                 measured={"measured": {"default": 2.0, "write_heavy": 1.0}}),
    "09.2": Case(right=[2176, "2,176", np.int64(2176)],
                 wrong=[(8 * 136, "one operator's"), (16 * (8 + 192), "three write buffers"),
                        (16 * 8, "block caches only"), (16 * 128, "write buffers only"),
                        (500, "only with boundedMemoryUsage=true"), (1234, "is not it"),
                        (True, "not a number of MiB")]),
    "09.3": Case(right=[RIGHT_SETTINGS,
                        {f" {ROCKSDB}BOUNDEDMEMORYUSAGE": True, f"{ROCKSDB}maxMemoryUsageMB": 128}],
                 wrong=[({**RIGHT_SETTINGS, f"{ROCKSDB}writeBufferCacheRatio": 0.9},
                         "90% of the budget for the memtables"),
                        ({**RIGHT_SETTINGS, f"{ROCKSDB}writeBufferCacheRatio": "2"},
                         "a fraction between 0 and 1"),
                        ({f"{ROCKSDB}maxMemoryUsageMB": "128"}, "grows with the partitions"),
                        ({**RIGHT_SETTINGS, f"{ROCKSDB}maxMemoryUsageMB": "256"},
                         "must be 128"),
                        ({**RIGHT_SETTINGS, "rocksdb.blockCacheSizeMB": "8"}, "set as"),
                        ({**RIGHT_SETTINGS, f"{ROCKSDB}cacheMB": "8"},
                         "not a RocksDB setting"),
                        ("bounded", "expected a dict")]),
    "09.4": Case(right=[1, "1", np.int64(1)],
                 wrong=[(2.4, "a write per event"), (0.5, "written, once"),
                        ("x", "not a number")],
                 measured={"measured": 1.0, "events_per_key": 2.4}),
    "10.1": Case(right=["stalled_watermark", " Stalled Watermark ", "'stalled_watermark'"],
                 wrong=[("growing_state", "that is the symptom"),
                        ("skewed_partition", "skew is about where state sits"),
                        ("slow_commit", "commit times need progress reports"),
                        ("nope", "is not a flag of describe()")],
                 measured={"flags": ["stalled_watermark", "growing_state"]}),
    "10.3": Case(right=[40, np.int64(40), "40", 40.0],
                 wrong=[(240, "what the broken job holds"), (80, "with no data"),
                        (120, "more than the 40"), (0, "fewer than the 40"),
                        ("forty", "not a whole number")],
                 measured={"rows": 40, "users": 40, "batches": 6}),
    "13.2": Case(right=[4, np.int64(4), "4", 4.0],
                 wrong=[(6, "every record that did not count"), (2, "were malformed"),
                        (7, "count those whose why_not starts with 'late:'"),
                        ("four", "not a whole number")],
                 measured={"late": 4, "malformed": 2, "records": 1047}),
    "13.3": Case(right=[2, np.int64(2), "2"],
                 wrong=[(0, "restores fine"), (3, "partitions 0..2"), (-1, "partitions 0..2"),
                        ("two", "not a partition number")],
                 measured={"failing": 2, "partitions": 3}),
    "13.4": Case(right=[5, np.int64(5), "5", 5.0],
                 wrong=[(7, "they are removed, not changed"), (8, "every window that differs"),
                        (3, "fewer than the diff found"), (12, "more than the diff found"),
                        ("five", "not a whole number")],
                 measured={"changed": 5, "added": 1, "removed": 2}),
}


@pytest.mark.parametrize("exercise", sorted(CASES))
def test_right_answers_written_differently_all_pass(exercise):
    case = CASES[exercise]
    assert len(case.right) >= 2
    for answer in case.right:
        verdict = check(exercise, answer, **case.measured)
        assert verdict.right, (exercise, answer, str(verdict))


@pytest.mark.parametrize("exercise", sorted(CASES))
def test_each_kind_of_wrong_answer_is_told_what_is_wrong(exercise):
    case = CASES[exercise]
    for answer, phrase in case.wrong:
        verdict = check(exercise, answer, **case.measured)
        assert verdict.status == "wrong", (exercise, answer)
        assert phrase in said(verdict), (exercise, answer, phrase, said(verdict))
    assert check(exercise, ..., **case.measured).status == "unanswered"


# --- checks whose answers are functions, queries or stores ------------------------------------
def test_05_1_quotes_the_measurement_and_never_contradicts_it():
    flat = LAG.assign(lag=0)
    calm = check("05.1", "b", lag=flat, largest_batch=500)
    assert calm.right and "no sample (every 0.05 s) caught the standby behind" in said(calm)
    behind = check("05.1", "b", lag=LAG.assign(lag=[0, 0, 340, 200]), largest_batch=500)
    assert not behind.right and "still 200 records behind" in said(behind)
    seen = check("05.1", "b", **CASES["05.1"].measured)
    assert "at most 340 records, 68% of the largest batch (500)" in said(seen)


def sessions_query(**changes) -> FakeQuery:
    spec = dict(keys=["carrier"], window=session("30 minutes"), aggregates=["count", "max(ts)"])
    spec.update(changes)
    store = with_last_activity(session_reference(EVENTS, "carrier", "30 minutes",
                                                 watermark="2013-01-01 06:40"), "30 minutes")
    return FakeQuery(QuerySpec(**spec), store.assign(partition=0), "2013-01-01 06:40")


def test_02_2_session_store_with_its_last_activity():
    assert check("02.2", sessions_query(), events=EVENTS).right
    swapped = sessions_query(aggregates=["max(ts)", "count"], keys=("carrier",))
    swapped._store = swapped._store.iloc[::-1]
    assert check("02.2", swapped, events=EVENTS).right
    wrong = {"a DataFrame": ("sk.start_query(...) returned", sessions_query().snapshot()),
             "tumbling": ("a session store needs",
                          sessions_query(window=tumbling("30 minutes"))),
             "gap": ("the gap is 10 minutes", sessions_query(window=session("10 minutes"))),
             "keys": ("keyed by ['origin']", sessions_query(keys=["origin"])),
             "count": ("add the aggregate 'count'", sessions_query(aggregates=["max(ts)"])),
             "last": ("last activity too", sessions_query(aggregates=["count"]))}
    for name, (phrase, answer) in wrong.items():
        verdict = check("02.2", answer, events=EVENTS)
        assert verdict.status == "wrong" and phrase in said(verdict), name
    stale = sessions_query()
    stale._store = stale._store.assign(max_ts=stale._store["max_ts"] - pd.Timedelta("1min"))
    assert "max_ts differs" in said(check("02.2", stale, events=EVENTS))


ACTIVE_TIMES = [pd.Timestamp("2013-01-01 06:10:30"), pd.Timestamp("2013-01-01 08:10:30")]


def active_frame(when):
    found = session_reference(EVENTS, "carrier", "30 minutes")
    return found[(found["window_start"] <= when) & (found["window_end"] > when)]


def active_pairs(when):   # as find_sessions yields them: (Session, value)
    def ms(t):
        return int(pd.Timestamp(t).value // 1_000_000)

    return [(Session({"carrier": r.carrier}, ms(r.window_start), ms(r.window_end)),
             {"count": r.count}) for r in active_frame(when).itertuples()]


def check_active(answer):
    return check("02.5", answer, events=EVENTS, keys=["carrier"], gap="30 minutes",
                 times=ACTIVE_TIMES)


def test_02_5_active_sessions_as_a_frame_or_as_find_sessions_pairs():
    for answer in (active_frame, active_pairs):
        verdict = check_active(answer)
        assert verdict.right, said(verdict)
    assert "at 2013-01-01 06:10:30: the 2 session(s) active then (AA, UA)" in said(
        check_active(active_frame))


def test_02_5_wrong_answers_are_named():
    every = session_reference(EVENTS, "carrier", "30 minutes")
    for answer, phrase in [
        ("sessions", "answer with a function"),
        (lambda when: 1 / 0, "raised ZeroDivisionError"),
        (lambda when: 3, "returned a int"),
        (lambda when: every.iloc[:0], "active session(s) missing"),
        (lambda when: every, "not active then"),
        (lambda when: every[["carrier"]], "returned a DataFrame"),
    ]:
        verdict = check_active(answer)
        assert verdict.status == "wrong" and phrase in said(verdict), (phrase, said(verdict))


# --- every exercise has its cases ------------------------------------------------------------
#: Exercises whose cases live in another test module (checks of functions, stores, routing).
ELSEWHERE = {"03.2": "test_workshop_basics", "06.1": "test_workshop_serving",
             "06.2": "test_workshop_serving", "02.2": __name__, "02.5": __name__,
             "11.2": "test_workshop_processor", "11.6": "test_workshop_processor",
             "12.3": "test_workshop_live",
             "01.5": "test_workshop_disk", "09.8": "test_workshop_disk",
             "03.7": "test_workshop_durability", "03.8": "test_workshop_durability",
             "04.4": "test_workshop_moves_and_latency", "05.5": "test_workshop_moves_and_latency",
             "06.4": "test_workshop_moves_and_latency",
             "14.1": "test_workshop_kafka_streams", "14.2": "test_workshop_kafka_streams",
             "14.3": "test_workshop_kafka_streams"}


def _pure_reviews() -> set[str]:
    """Multiple-choice exercises judged by their Choices alone (``registry.review``)."""
    return {e.id for e in EXERCISES.values() if e.choices is not None
            and e.id not in CASES and e.id not in ELSEWHERE}


@pytest.mark.parametrize("exercise", sorted(_pure_reviews()))
def test_every_review_question_takes_its_letter_written_any_way_and_explains_each_option(
        exercise):
    choices = EXERCISES[exercise].choices
    right = choices.right
    for answer in (right, right.upper(), f" ({right}) ", f"{right}) {choices.options[right]}"):
        assert check(exercise, answer).right, (exercise, answer)
    for letter, why in choices.why.items():
        if letter != right:
            verdict = check(exercise, letter)
            assert verdict.status == "wrong" and why in said(verdict), (exercise, letter)
    assert "not one of the choices" in said(check(exercise, "all of them"))


def test_every_exercise_is_covered():
    covered = set(CASES) | set(ELSEWHERE) | _pure_reviews()
    assert covered == set(EXERCISES), sorted(set(EXERCISES) ^ covered)


# --- times written another way: a zone, epoch numbers (answers.instants) ----------------------
def _epoch_ms(column: pd.Series) -> pd.Series:
    return column.astype("datetime64[ns]").astype("int64") // 1_000_000


@pytest.mark.parametrize("written", [
    lambda f: f.assign(window_start=f["window_start"].dt.tz_localize("UTC")),
    lambda f: f.assign(window_start=f["window_start"].dt.tz_localize("UTC")
                       .dt.tz_convert("America/New_York")),
    lambda f: f.assign(window_start=_epoch_ms(f["window_start"])),
    lambda f: f.assign(window_start=_epoch_ms(f["window_start"]) // 1000),
    lambda f: f.assign(window_start=f["window_start"].astype(str)),
], ids=["utc", "new-york", "epoch-ms", "epoch-s", "text"])
def test_02_5_session_starts_written_any_way_are_the_same_instants(written):
    verdict = check_active(lambda when: written(active_frame(when)))
    assert verdict.right, said(verdict)


def test_02_5_a_start_shifted_by_a_zone_left_unsaid_stays_wrong():
    shifted = check_active(lambda when: active_frame(when).assign(
        window_start=active_frame(when)["window_start"].dt.tz_localize("America/New_York")))
    assert shifted.status == "wrong" and "missing" in said(shifted)
    seconds_as_ms = check_active(lambda when: active_frame(when).assign(
        window_start=_epoch_ms(active_frame(when)["window_start"]) // 1000 * 1000 + 1))
    assert seconds_as_ms.status == "wrong"
