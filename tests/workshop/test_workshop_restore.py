"""The checks of notebooks 04 (restore) and 05 (standby and failover): right answers pass,
wrong ones are told why."""

from __future__ import annotations

import pandas as pd

from statekit.workshop import check, exercises


def _texts(verdict) -> str:
    return " | ".join(p.text for p in verdict.points)


COMPACTED = {"raw_records": 11_722, "compacted_records": 2_029, "rows": 2_029,
             "raw_seconds": 1.2, "compacted_seconds": 0.3}


def test_compacted_restore_counts_one_record_per_key():
    right = check("04.1", 2_029, **COMPACTED)
    assert right.right
    assert "latest record per key" in _texts(right) and "1.20 s" in _texts(right)
    assert "every change the raw log holds" in _texts(check("04.1", 11_722, **COMPACTED))
    assert "leave the store empty" in _texts(check("04.1", 0, **COMPACTED))
    assert "too few" in _texts(check("04.1", 1_000, **COMPACTED))
    assert "count the store's rows" in _texts(check("04.1", 5_000, **COMPACTED))
    assert "more than the raw log" in _texts(check("04.1", 20_000, **COMPACTED))
    for bad in ("lots", 2029.5, True, -3):
        assert "not a number of records" in _texts(check("04.1", bad, **COMPACTED))
    assert check("04.1", ..., **COMPACTED).status == "unanswered"


def test_compacted_restore_without_timings_says_no_seconds():
    verdict = check("04.1", 10, raw_records=40, compacted_records=10, rows=10)
    assert verdict.right and " s instead of " not in _texts(verdict)


TAIL = {"tail_records": 5_300, "total_records": 11_722, "stopped_batch": 4}


def test_tail_replay_names_the_checkpoint():
    right = check("04.2", 5_300, **TAIL)
    assert right.right and "after batch 4" in _texts(right)
    assert "restore into an empty directory" in _texts(check("04.2", 11_722, **TAIL))
    assert "stopped at batch 4" in _texts(check("04.2", 0, **TAIL))
    assert "batches after 4" in _texts(check("04.2", 17, **TAIL))
    assert "not a number" in _texts(check("04.2", "all of them", **TAIL))


def test_spark_restart_review():
    assert check("04.3", "b").right and check("04.3", " B) ").right
    assert "Spark writes no changelog topic" in _texts(check("04.3", "a"))
    assert "offsets log" in _texts(check("04.3", "c"))
    assert "Spark has no standby replicas" in _texts(check("04.3", "d"))
    assert "not one of the choices" in _texts(check("04.3", "e"))


def test_standby_lag_quotes_the_measurement_when_right():
    t = pd.Timestamp("2026-01-05 10:00")
    lag = pd.DataFrame({"time": [t, t + pd.Timedelta("0.1s"), t + pd.Timedelta("0.2s")],
                        "partition": [0, 0, 0], "lag": [0, 1_480, 0]})
    right = check("05.1", "b", lag=lag, largest_batch=1_702)
    assert right.right and "at most 1,480 records, 87% of the largest batch" in _texts(right)
    assert check("05.1", "b").right  # without measurements: the reason only
    assert "after Spark commits" in _texts(check("05.1", "a", lag=lag, largest_batch=3))
    assert "stale standby" in _texts(check("05.1", "c"))


DRILL = {"changelog_records": 11_722, "lag_at_kill": 0, "after_stale_batch": 5_709,
         "stale_batch": 4}


def test_failover_records_judged_per_scenario():
    right = {"no standby": 11_722, "standby": 0, "stale standby": 5_709}
    assert check("05.2", right, **DRILL).right
    wrong = check("05.2", {"no standby": 5_709, "standby": 300, "stale standby": 11_722},
                  **DRILL)
    assert not wrong.right
    assert [p.ok for p in wrong.points] == [False, False, False]
    text = _texts(wrong)
    assert "reads every record" in text and "too many" in text and "later batches" in text
    half = check("05.2", {"no standby": 11_722, "standby": 0, "stale standby": 0}, **DRILL)
    assert [p.ok for p in half.points] == [True, True, False]


def test_failover_records_bad_shapes_are_named():
    assert "dict of scenario" in _texts(check("05.2", 11_722, **DRILL))
    missing = check("05.2", {"no standby": 1, "standby": 0}, **DRILL)
    assert "missing ['stale standby']" in _texts(missing)
    extra = check("05.2", {"no standby": 1, "standby": 0, "stale standby": 0, "spark": 9},
                  **DRILL)
    assert "unknown ['spark']" in _texts(extra)
    typed = check("05.2", {"no standby": "all", "standby": 0, "stale standby": 0}, **DRILL)
    assert "'all' ('no standby') is not a number" in _texts(typed)


def test_reviews_on_spark_and_retention():
    assert check("05.3", "b").right
    assert "always goes through its checkpoint" in _texts(check("05.3", "a"))
    assert "reads no changelog topic" in _texts(check("05.3", "d"))
    assert check("05.4", "b").right
    assert "retention" in _texts(check("05.4", "a"))
    assert "refuses" in _texts(check("05.4", "c"))


def test_exercises_are_listed_with_their_notebooks():
    listed = exercises().set_index("id")
    assert set(listed.loc[["04.1", "04.2", "04.3"], "notebook"]) == {"04_restore"}
    assert set(listed.loc[["05.1", "05.2", "05.3", "05.4"], "notebook"]) == {
        "05_standby_and_failover"}
    assert listed.loc["05.2", "kind"] == "predict" and listed.loc["04.3", "kind"] == "review"
