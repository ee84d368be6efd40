"""The checks of notebooks 01–03: right answers pass, wrong ones say what is wrong (no Spark)."""

from __future__ import annotations

import pandas as pd
import pytest

from statekit.changelog import Changelog
from statekit.errors import BadArgument
from statekit.model.query_spec import QuerySpec, session
from statekit.reference.sessions import session_reference
from statekit.stores.migration import live_values, migrate_changelog
from statekit.workshop import check
from statekit.workshop.changelog import NEW_COLUMNS, OLD_COLUMNS


def texts(verdict) -> str:
    return " | ".join(p.text for p in verdict.points)


# --------------------------------------------------------------- 01 state store basics
SNAPSHOT = pd.DataFrame({
    "window_start": pd.to_datetime(["2026-01-05 10:00", "2026-01-05 10:10", "2026-01-05 10:00"]),
    "player": ["p07", "p07", "p09"], "count": [2, 1, 4], "partition": [0, 1, 1]})


@pytest.mark.parametrize("answer", [False, "no", "No"])
def test_01_1_windows_spread_right(answer):
    verdict = check("01.1", answer, snapshot=SNAPSHOT)
    assert verdict.right
    assert "1 of 2 players" in texts(verdict) and "[0, 1]" in texts(verdict)


def test_01_1_wrong_and_unreadable():
    wrong = check("01.1", True, snapshot=SNAPSHOT)
    assert not wrong.right and "hashing the window and the key together" in texts(wrong)
    assert "answer True" in texts(check("01.1", "maybe", snapshot=SNAPSHOT))
    together = SNAPSHOT.assign(partition=[1, 1, 0])
    assert check("01.1", True, snapshot=together).right
    with pytest.raises(BadArgument, match="snapshot"):
        check("01.1", False)


EXPECTED = SNAPSHOT.drop(columns="partition")
COLS = {"key_columns": ["window_start", "player"], "value_columns": ["count"], "batch": 2}


def test_01_2_rebuild_right():
    verdict = check("01.2", EXPECTED.iloc[::-1], expected=EXPECTED, **COLS)
    assert verdict.right and "all 3 rows" in texts(verdict)


def test_01_2_rebuild_wrong_answers_say_what_differs():
    missing = check("01.2", EXPECTED.iloc[:2], expected=EXPECTED, **COLS)
    assert "1 of the store at batch 2's 3 rows are missing" in texts(missing)
    assert "query.changes(from_batch=0, to_batch=b)" in texts(missing)
    changed = check("01.2", EXPECTED.assign(count=[2, 1, 5]), expected=EXPECTED, **COLS)
    assert "count differs in 1 rows" in texts(changed) and "yours 5" in texts(changed)
    extra = pd.concat([EXPECTED, EXPECTED.iloc[[0]].assign(player="p99")])
    assert "1 rows of your table are not in" in texts(check("01.2", extra, expected=EXPECTED,
                                                            **COLS))
    assert "lacks the column(s) ['count']" in texts(
        check("01.2", EXPECTED.drop(columns="count"), expected=EXPECTED, **COLS))
    assert "a pandas DataFrame" in texts(check("01.2", [1, 2], expected=EXPECTED, **COLS))


@pytest.mark.parametrize(("exercise", "right", "wrong", "said"), [
    ("01.3", "b", "a", "keeps only the latest value per key"),
    ("01.4", "b", "a", "spills to local disk"),
    ("02.3", "b", "a", "the watermark is the promise"),
    ("02.4", "b", "a", "that is Kafka Streams"),
    ("03.3", "b", "a", "durability is its checkpoint files"),
    ("03.4", "a", "b", "changes nothing in the Kafka topic"),
    ("03.6", "b", "a", "only as fresh as what it has consumed"),
])
def test_review_questions(exercise, right, wrong, said):
    assert check(exercise, right).right
    verdict = check(exercise, wrong)
    assert verdict.status == "wrong" and said in texts(verdict)
    assert "not one of the choices" in texts(check(exercise, "z"))
    assert check(exercise, ...).status == "unanswered"


# --------------------------------------------------------------- 02 windows and sessions
WINDOWS = {"rows": 9, "keys": 3, "windows_made": 141, "watermark": "2013-01-03 08:28"}


def test_02_1_prediction():
    right = check("02.1", 9, **WINDOWS)
    assert right.right and "3 hourly windows for each of the 3 origins" in texts(right)
    assert check("02.1", "9", **WINDOWS).right
    every = check("02.1", 141, **WINDOWS)
    assert not every.right and "every window the query ever aggregated" in texts(every)
    assert "that is the count for one origin" in texts(check("02.1", 3, **WINDOWS))
    assert "last windows are still open" in texts(check("02.1", 0, **WINDOWS))
    assert "whole number" in texts(check("02.1", "many", **WINDOWS))
    with pytest.raises(BadArgument, match="measured"):
        check("02.1", 9)


EVENTS = pd.DataFrame({
    "carrier": ["UA", "UA", "UA", "AA", "AA"],
    "ts": pd.to_datetime(["2013-01-01 06:00", "2013-01-01 06:30", "2013-01-01 08:00",
                          "2013-01-01 06:05", "2013-01-01 09:00"])})


class FakeQuery:
    """What the check reads of a StatefulQuery: its spec, snapshot and progress (pure data)."""

    def __init__(self, spec: QuerySpec, store: pd.DataFrame, watermark: str):
        self.spec, self._store = spec, store
        self._progress = pd.DataFrame({"watermark": [pd.Timestamp(watermark)]})

    def snapshot(self) -> pd.DataFrame:
        return self._store

    def progress(self) -> pd.DataFrame:
        return self._progress


SESSIONS = QuerySpec(keys=["carrier"], window=session("30 minutes"), aggregates=["count"])


def test_session_reference_merges_an_event_at_the_session_end():
    sessions = session_reference(EVENTS, "carrier", "30 minutes")
    ua = sessions[sessions["carrier"] == "UA"]
    assert ua["count"].tolist() == [2, 1]  # 06:30 is at the end of 06:00's session: merged
    assert ua["window_end"].iloc[0] == pd.Timestamp("2013-01-01 07:00")
    assert len(session_reference(EVENTS, "carrier", "30 minutes", watermark="2013-01-01 08:00")) \
        == 2
    with pytest.raises(BadArgument, match="session gap"):
        session_reference(EVENTS, "carrier", "soon")
    with pytest.raises(BadArgument, match="dest"):
        session_reference(EVENTS, "dest", "30 minutes")


# 02.2 (the session store with its last activity) and 02.5: tests/workshop/test_workshop_checks.py


# --------------------------------------------------------------- 03 changelog and compaction
COMPACTION = {"compacted": 40, "raw": 300, "store_rows": 40, "tombstones": 25}


def test_03_1_prediction():
    assert check("03.1", 40, **COMPACTION).right
    raw = check("03.1", 300, **COMPACTION)
    assert not raw.right and "300 is the raw log" in texts(raw)
    assert "that counts all tombstones" in texts(check("03.1", 65, **COMPACTION))
    assert "whole number" in texts(check("03.1", 4.5, **COMPACTION))


def old_log() -> Changelog:
    keys = ['{"player":"a"}', '{"player":"a"}', '{"player":"b"}', '{"player":"c"}',
            '{"player":"c"}']
    records = pd.DataFrame({
        "partition": [0, 0, 1, 1, 1], "offset": [0, 1, 0, 1, 2],
        "timestamp": pd.to_datetime(["2026-01-05 10:00"] * 5), "batch": [0, 1, 0, 0, 1],
        "seq": [0, 0, 0, 1, 0], "tombstone": [False, False, False, False, True],
        "key": keys, "player": ["a", "a", "b", "c", "c"],
        "count": pd.array([1, 2, 4, 1, None], dtype="Int64"),
        "sum_score": pd.array([5, 9, 8, 3, None], dtype="Int64"),
        "max_score": pd.array([5, 5, 3, 3, None], dtype="Int64")})
    return Changelog(records, topic="app-s-changelog", key_columns=["player"],
                     value_columns=list(OLD_COLUMNS), last_batch=1)


def upgrade(value: dict) -> dict:
    if "avg_score" in value:
        return value
    return {**value, "avg_score": value["sum_score"] / value["count"]}


def migrated(fn, tmp_path):
    return migrate_changelog(old_log(), fn, "key-value", ["player"], list(NEW_COLUMNS),
                             tmp_path, store_name="s-v2")


def test_live_values_are_the_latest_puts():
    live = live_values(old_log())
    assert sorted(live["key"]) == ['{"player":"a"}', '{"player":"b"}']
    assert live.set_index("key").loc['{"player":"a"}', "value"]["count"] == 2
    with pytest.raises(BadArgument, match="Changelog"):
        live_values(pd.DataFrame())


def test_03_2_migration_right(tmp_path):
    stores = migrated(upgrade, tmp_path)  # real RocksDB stores
    try:
        assert stores[0].get({"player": "a"}) == {"count": 2, "sum_score": 9, "max_score": 5,
                                                  "avg_score": 4.5}
        verdict = check("03.2", upgrade, log=old_log(), stores=stores)
        assert verdict.right, texts(verdict)
        assert "all 2 live keys migrated" in texts(verdict)
    finally:
        for store in stores.values():
            store.close()


def test_03_2_migration_right_written_another_way(tmp_path):
    def upgrade_in_place(value):   # mutates and returns the same dict; rounds nothing
        value.setdefault("avg_score", value["sum_score"] / value["count"])
        return value

    stores = migrated(upgrade_in_place, tmp_path)
    try:
        assert check("03.2", upgrade_in_place, log=old_log(), stores=stores).right
    finally:
        for store in stores.values():
            store.close()


def test_03_2_migration_wrong_answers(tmp_path):
    def always_adds(value):
        return {**value, "avg_score": value["sum_score"] / value["count"] + value.get(
            "avg_score", 0)}

    def drops_max(value):
        return {"count": value["count"], "sum_score": value["sum_score"],
                "avg_score": value["sum_score"] / value["count"]}

    stores = migrate_changelog(old_log(), upgrade, "key-value", ["player"], list(NEW_COLUMNS),
                               None, store_name="s-v2")
    twice = check("03.2", always_adds, log=old_log(), stores=stores)
    assert not twice.right and "upgrade must accept both" in texts(twice)
    assert "the new format has" in texts(check("03.2", drops_max, log=old_log(), stores=stores))
    stores[1].write_raw([(b'{"player":"c"}', b'{"count":1}')])  # a tombstoned key came back
    assert "tombstoned keys must stay deleted" in texts(
        check("03.2", upgrade, log=old_log(), stores=stores))
    missing = {0: stores[0]}
    assert "1 are missing from the new stores" in texts(
        check("03.2", upgrade, log=old_log(), stores=missing))
    assert "ZeroDivisionError" in texts(check("03.2", lambda v: 1 / 0, log=old_log(),
                                              stores=stores))
    assert "the upgrade function" in texts(check("03.2", "v2", log=old_log(), stores=stores))
    with pytest.raises(BadArgument, match="upgrade"):
        migrate_changelog(old_log(), "v2", "key-value", ["player"], list(NEW_COLUMNS),
                          store_name="s-v2")


def test_every_exercise_of_notebooks_01_to_03_is_registered():
    from statekit.workshop import exercises

    table = exercises()
    ours = table[table["id"].str.match(r"0[123]\.")]
    assert ours["id"].tolist() == ["01.1", "01.2", "01.3", "01.4", "01.5", "02.1", "02.2",
                                   "02.3", "02.4", "02.5", "03.1", "03.2", "03.3", "03.4",
                                   "03.5", "03.6", "03.7", "03.8", "03.9"]
    assert set(ours["notebook"]) == {"01_state_store_basics",
                                     "02_windows_sessions_and_watermarks",
                                     "03_changelog_and_compaction"}


def test_01_2_a_rebuild_with_zoned_or_epoch_window_times_is_read_alike():
    zoned = EXPECTED.assign(window_start=EXPECTED["window_start"].dt.tz_localize("UTC"))
    assert check("01.2", zoned, expected=EXPECTED, **COLS).right
    epoch = EXPECTED.assign(
        window_start=EXPECTED["window_start"].astype("datetime64[ns]").astype("int64") // 10**6)
    assert check("01.2", epoch, expected=EXPECTED, **COLS).right
    later = EXPECTED.assign(window_start=EXPECTED["window_start"].dt.tz_localize("Asia/Tokyo"))
    verdict = check("01.2", later, expected=EXPECTED, **COLS)
    assert not verdict.right and "missing" in texts(verdict)
