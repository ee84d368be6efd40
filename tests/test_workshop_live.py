"""Notebook 12's exercises: registered, and what the checks say to right answers written
differently and to wrong ones. 12.3's check reads a change feed; here a stand-in gives it a
fixed one (pure logic); the real one runs in the notebook (``pytest --nbmake``)."""

from __future__ import annotations

import pandas as pd
import pytest

from statekit import workshop
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
    assert "12.3 The keys the watermark let go (build)" in \
        series().set_index("notebook").loc["12_your_own_job_live", "exercises"]
    assert "12_your_own_job_live" in workshop.check("00.2", "12").points[0].text


@pytest.mark.parametrize("written", ["b", "B", "(b)", " b) "])
def test_the_review_answers_are_read_however_the_letter_is_written(written):
    assert workshop.check("12.1", written).right
    assert workshop.check("12.2", written).right


def test_wrong_review_answers_say_why():
    assert "Spark writes no Kafka changelog" in texts(workshop.check("12.1", "a"))
    assert "changes nothing in your plan" in texts(workshop.check("12.1", "c"))
    assert "rows removed per batch are above zero" in texts(workshop.check("12.2", "a"))
    assert "a plain groupBy's rows stay" in texts(workshop.check("12.2", "c"))
    assert "not one of the choices" in texts(workshop.check("12.2", "z"))


class _Live:
    """The two reads 12.3's check makes of an AttachedQuery, over a fixed change feed."""

    def __init__(self, feed: pd.DataFrame):
        self.feed = feed

    def states(self) -> pd.DataFrame:
        return pd.DataFrame({"part": ["0/default", "1/default"],
                             "kind": ["aggregation", "deduplication"]})

    def state(self, part):
        assert part == "1/default"
        return type("View", (), {"key_columns": ["player", "game", "ts"]})()

    def changes(self, part, first, last):
        assert part == "1/default"
        return self.feed[self.feed["batch"].between(first, last)].reset_index(drop=True)


B = EVICTION_BATCH
FEED = pd.DataFrame({
    "batch": [B - 1, B, B, B, B + 1],
    "change": ["delete", "put", "delete", "delete", "delete"],
    "player": ["p1", "p2", "p3", "p4", "p5"],
    "game": ["g1"] * 5,
    "ts": pd.to_datetime(["2026-01-05 10:00", "2026-01-05 11:30", "2026-01-05 10:05",
                          "2026-01-05 10:06", "2026-01-05 10:40"]),
    "partition": [0, 1, 0, 1, 0]})
LIVE = _Live(FEED)
DELETED = FEED[(FEED["batch"] == B) & (FEED["change"] == "delete")]


def test_the_deleted_keys_are_right_with_or_without_extra_columns_in_any_order():
    assert workshop.check("12.3", DELETED[["player", "game", "ts"]], live=LIVE).right
    assert workshop.check("12.3", DELETED.iloc[::-1], live=LIVE).right   # the whole feed rows


def test_puts_other_batches_and_missing_keys_are_named():
    with_puts = FEED[FEED["batch"] == B]
    assert "keep the deletes only" in texts(workshop.check("12.3", with_puts, live=LIVE))
    every_batch = FEED[FEED["change"] == "delete"]
    assert f"batch {B} alone" in texts(workshop.check("12.3", every_batch, live=LIVE))
    verdict = workshop.check("12.3", DELETED.iloc[:1][["player", "game", "ts"]], live=LIVE)
    assert not verdict.right and "missing" in texts(verdict)
    assert not workshop.check("12.3", "p3, p4", live=LIVE).right


def test_the_check_needs_the_attached_query():
    with pytest.raises(BadArgument, match="bad live"):
        workshop.check("12.3", DELETED)
