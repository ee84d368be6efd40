"""Notebook 12's exercises: registered, and what the checks say to right answers written
differently and to wrong ones. 12.3's check reads a join side's changelog; here a stand-in
gives it fixed records (pure logic); the real one runs in the notebook (``pytest --nbmake``)."""

from __future__ import annotations

import pandas as pd
import pytest

from statekit import workshop
from statekit.changelog.log import Changelog
from statekit.errors import BadArgument
from statekit.workshop.live import EVICTION_BATCH


def texts(verdict) -> str:
    return " | ".join(p.text for p in verdict.points)


def test_the_exercises_of_notebook_12_are_registered_and_mapped():
    from statekit.workshop.setup import series

    table = workshop.exercises()
    ours = table[table["id"].str.startswith("12.")]
    assert ours["id"].tolist() == ["12.1", "12.2", "12.3"]
    assert set(ours["notebook"]) == {"12_your_own_job_live"}
    assert ours.set_index("id").loc["12.3", "kind"] == "build"
    assert "12.3 The join keys the watermark emptied (build)" in \
        series().set_index("notebook").loc["12_your_own_job_live", "exercises"]
    assert "12_your_own_job_live" in workshop.check("00.2", "12").points[0].text


@pytest.mark.parametrize("written", ["{}", "{}".upper(), "({})", " {}) "])
def test_the_review_answers_are_read_however_the_letter_is_written(written):
    assert workshop.check("12.1", written.format("b")).right
    assert workshop.check("12.2", written.format("a")).right


def test_wrong_review_answers_say_why():
    assert "Spark writes no Kafka changelog" in texts(workshop.check("12.1", "a"))
    assert "changes nothing in your plan" in texts(workshop.check("12.1", "c"))
    assert "rows removed per batch are above zero" in texts(workshop.check("12.2", "b"))
    assert "old ones go" in texts(workshop.check("12.2", "c"))
    assert "not one of the choices" in texts(workshop.check("12.2", "z"))


class _Live:
    """The two reads 12.3's check makes of an AttachedQuery, over fixed changelog records."""

    def __init__(self, records: pd.DataFrame):
        self.records = records

    def states(self) -> pd.DataFrame:
        return pd.DataFrame({"part": ["0/default", "1/left", "1/right", "2/default"],
                             "kind": ["aggregation", "join", "join", "deduplication"]})

    def read_changelog(self, part, first, last):
        assert part == "1/right"
        chosen = self.records[self.records["batch"].between(first, last)]
        return Changelog(chosen.reset_index(drop=True), "my_job-op1-right-changelog",
                         ["field0", "field1"], ["rows"], int(self.records["batch"].max()))


B = EVICTION_BATCH
ROWS = [{"player": "p2", "game": "g1", "top_ts": "2026-01-05T11:30:00Z"}]
RECORDS = pd.DataFrame({
    "partition": [0, 1, 0, 1, 0], "offset": [7, 3, 8, 4, 9], "timestamp": [0] * 5,
    "batch": [B - 1, B, B, B, B + 1], "seq": [0, 0, 1, 1, 0],
    "tombstone": [True, False, True, True, True], "key": ["k"] * 5,
    "field0": ["p1", "p2", "p3", "p4", "p5"], "field1": ["g1"] * 5,
    "rows": [None, ROWS, None, None, None]})
LIVE = _Live(RECORDS)
EMPTIED = RECORDS[(RECORDS["batch"] == B) & RECORDS["tombstone"]]


def test_the_emptied_keys_are_right_with_or_without_extra_columns_in_any_order():
    assert workshop.check("12.3", EMPTIED[["field0", "field1"]], live=LIVE).right
    assert workshop.check("12.3", EMPTIED.iloc[::-1], live=LIVE).right   # whole records
    assert workshop.check("12.3", EMPTIED[["field1", "field0"]], live=LIVE).right


def test_records_with_rows_other_batches_and_missing_keys_are_named():
    with_rows = RECORDS[RECORDS["batch"] == B]
    assert "keep those whose tombstone is True" in texts(
        workshop.check("12.3", with_rows, live=LIVE))
    every_batch = RECORDS[RECORDS["tombstone"]]
    assert f"batch {B} alone" in texts(workshop.check("12.3", every_batch, live=LIVE))
    verdict = workshop.check("12.3", EMPTIED.iloc[:1][["field0", "field1"]], live=LIVE)
    assert not verdict.right and "missing" in texts(verdict)
    named = EMPTIED[["field0", "field1"]].rename(columns={"field0": "player"})
    assert "lacks the column(s) ['field0']" in texts(workshop.check("12.3", named, live=LIVE))
    assert not workshop.check("12.3", "p3, p4", live=LIVE).right
    # the keys the keyWithIndexToValue store deleted are not the join keys emptied
    extra = pd.concat([EMPTIED, RECORDS.iloc[[1]]])[["field0", "field1"]]
    assert "not in" in texts(workshop.check("12.3", extra, live=LIVE))


def test_the_check_needs_the_attached_query():
    with pytest.raises(BadArgument, match="bad live"):
        workshop.check("12.3", EMPTIED)
