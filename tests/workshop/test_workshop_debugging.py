"""Checks of notebook 10 (debug a checkpoint): right and wrong answers, pure logic."""

from __future__ import annotations

from statekit import workshop

FLAGS = ["stalled_watermark", "growing_state"]


def test_the_cause_is_the_stalled_watermark():
    assert workshop.check("10.1", "stalled_watermark", flags=FLAGS).right
    assert workshop.check("10.1", "stalled watermark", flags=FLAGS).right


def test_growth_is_the_symptom_not_the_cause():
    verdict = workshop.check("10.1", "growing_state", flags=FLAGS)
    assert not verdict.right
    assert "symptom" in verdict.points[0].text


def test_a_flag_not_raised_is_named_as_such():
    verdict = workshop.check("10.1", "skewed_partition", flags=FLAGS)
    assert not verdict.right
    assert any("did not raise skewed_partition" in p.text for p in verdict.points)


def test_an_unknown_flag_lists_the_flags():
    verdict = workshop.check("10.1", "memory", flags=FLAGS)
    assert not verdict.right and "stalled_watermark" in verdict.points[0].text


def test_the_fix_is_the_event_time_column():
    assert workshop.check("10.2", "b").right
    wrong = workshop.check("10.2", "a")
    assert not wrong.right and "never moves" in wrong.points[0].text
    assert "never evicts" in workshop.check("10.2", "c").points[0].text


def test_rows_after_the_fix_are_compared_with_the_measure():
    measured = {"rows": 40, "users": 40, "batches": 8}
    assert workshop.check("10.3", 40, **measured).right
    unbounded = workshop.check("10.3", 320, **measured)
    assert not unbounded.right and "broken job" in unbounded.points[0].text
    assert "no data" in workshop.check("10.3", 80, **measured).points[0].text
    assert "more than the 40" in workshop.check("10.3", 120, **measured).points[0].text
    assert "fewer than the 40" in workshop.check("10.3", 0, **measured).points[0].text
    assert "not a whole number" in workshop.check("10.3", "forty", **measured).points[0].text


def test_unanswered_exercises_do_not_raise():
    assert workshop.check("10.1", ...).status == "unanswered"
    assert workshop.check("10.3", ..., rows=40, users=40, batches=8).status == "unanswered"


def test_the_exercises_belong_to_the_notebook():
    listed = workshop.exercises()
    mine = listed[listed["notebook"] == "10_debug_a_checkpoint"]
    assert list(mine["id"]) == ["10.1", "10.2", "10.3"]
