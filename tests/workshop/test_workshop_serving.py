"""Workshop checks of notebooks 06 (interactive queries, routing) and 07 (global store).

Pure logic: the state rows carry the partitions Spark itself keeps them in (the
values of statekit.serve.routing.value_hash's and placement's doctests, checked against
Spark by tests/serve/test_placement.py), so no Spark runs here.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from statekit import workshop
from statekit.errors import BadArgument
from statekit.serve.results import PartitionAnswer, QueryResult
from statekit.serve.routing.assignment import assign
from statekit.serve.routing.placement import pmod, state_partition
from statekit.serve.routing.value_hash import spark_hash
from statekit.workshop.global_store import held_per_instance

TEN = pd.Timedelta("10min")
START = pd.Timestamp("2026-01-05 10:00")
# p07's windows from 10:00 to 10:30 live on partitions 2, 0, 0, 0 of 3 (Spark's placement)
ROWS = pd.DataFrame({"window_start": [START + i * TEN for i in range(4)],
                     "window_end": [START + (i + 1) * TEN for i in range(4)],
                     "player": ["p07"] * 4, "partition": [2, 0, 0, 0]})
PLAN = assign(3, ["i0", "i1", "i2"], standbys=1)  # p on i{p}, standby on i{p+1}
ACTIVE, STANDBYS = PLAN.active, PLAN.standbys


def spark_owner(key):
    h = spark_hash([key["window_start"], key["window_end"], key["player"]],
                   ["timestamp", "timestamp", "string"])
    partition = pmod(h, 3)
    return partition, ACTIVE[partition]


def check_route(answer):
    return workshop.check("06.1", answer, rows=ROWS, active=ACTIVE, standbys=STANDBYS)


# --- 06.1 route a key ----------------------------------------------------------------------
def test_routing_by_window_and_key_is_right():
    verdict = check_route(spark_owner)
    assert verdict.right, verdict
    assert "all 4 state rows" in str(verdict)


def test_routing_by_the_player_alone_is_named_as_kafka_streams_placement():
    def by_player(key):
        p = state_partition(key, ["player"], windowed=False, partitions=3)
        return p, ACTIVE[p]

    verdict = check_route(by_player)
    assert verdict.status == "wrong"
    assert "alone" in str(verdict) and "window struct" in str(verdict)


def test_a_wrong_partition_is_shown_on_a_row():
    verdict = check_route(lambda key: (1, "i1"))
    assert verdict.status == "wrong"
    assert "agrees with Spark for 0 of 4 rows" in str(verdict)


def test_a_wrong_partition_is_said_once_and_its_owner_judged_against_it():
    """Judged against Spark's partition, routing to the learner's own partition's owner was
    reported again as "'i0' is a standby of partition 2"."""
    verdict = check_route(lambda key: (0, ACTIVE[0]))   # p07's 10:00 window lives on 2
    partition, instance = verdict.points
    assert not partition.ok and "agrees with Spark for 3 of 4 rows" in partition.text
    assert instance.ok and "partition you computed" in instance.text
    assert "standby" not in str(verdict)


def test_both_points_wrong_each_said_on_its_own():
    verdict = check_route(lambda key: (0, STANDBYS[0][0]))
    partition, instance = verdict.points
    assert not partition.ok and not instance.ok
    assert f"{STANDBYS[0][0]!r} is a standby of partition 0" in instance.text


def test_a_partition_that_does_not_exist_is_named():
    verdict = check_route(lambda key: (7, "i1"))
    assert "partition 7 does not exist (partitions: [0, 1, 2])" in str(verdict)


def test_two_ways_of_writing_the_routing_are_right():
    def by_state_partition(key):   # the library's placement, a list instead of a tuple
        p = state_partition(key, ["player"], windowed=True, partitions=3)
        return [np.int64(p), ACTIVE[p]]

    assert check_route(by_state_partition).right
    assert check_route(spark_owner).right


@pytest.mark.parametrize("answer, said", [
    ("i2", "answer with a function"),
    (lambda key: 2, "return a pair"),
    (lambda key: ("two", "i2"), "a whole number"),
    (lambda key: key["nope"], "raised KeyError"),
])
def test_bad_routing_answers_say_what_to_fix(answer, said):
    verdict = check_route(answer)
    assert verdict.status == "wrong" and said in str(verdict), verdict


def test_routing_left_unanswered_does_not_raise():
    assert check_route(...).status == "unanswered"


# --- 06.2 the incomplete count -------------------------------------------------------------
PLAYERS = ["p01", "p02", "p03", "p04", "p05"]
SNAPSHOT = pd.DataFrame({"window_start": [START] * 5 + [START + TEN],
                         "player": [*PLAYERS, "p99"]})


def answered(players, partitions, instance="i0"):
    return QueryResult("fetch_all", [{"player": p, "count": 1} for p in players],
                       [PartitionAnswer(p, instance, "active", 7) for p in partitions])


LOCAL = pd.Series(["p01", "p04"], name="player")   # what the dashboard counted


def check_count(answer, window=START):
    return workshop.check("06.2", answer, snapshot=SNAPSHOT, window=window, local=LOCAL,
                          partitions=3)


def test_the_scatter_gathered_answer_is_right_however_the_window_is_given():
    for window in (START, "2026-01-05T10:00:00Z", START.tz_localize("UTC")):
        verdict = check_count(answered(PLAYERS, [2, 0, 1]), window)
        assert verdict.right, verdict
        assert "every partition answered ([0, 1, 2]" in str(verdict)


def test_a_copied_value_is_not_a_fix():
    """``answer = expected`` (the players, read off the snapshot) passed."""
    for copied in (PLAYERS, pd.Series(PLAYERS), pd.DataFrame({"player": PLAYERS})):
        verdict = check_count(copied)
        assert verdict.status == "wrong" and "could be copied from the snapshot" in str(verdict)


def test_the_local_answer_unchanged_is_named():
    verdict = check_count(answered(["p01", "p04"], [0]))
    assert verdict.status == "wrong"
    text = str(verdict)
    assert "only partitions [0] answered; [1, 2] did not" in text
    assert "still the dashboard's local answer (2 of 5 players)" in text


def test_missing_and_extra_players_are_named():
    verdict = check_count(answered(["p01", "p02", "p03", "p99"], [0, 1, 2]))
    text = str(verdict)
    assert verdict.status == "wrong"
    assert "2 of 5 players missing (p04, p05)" in text
    assert "1 players not in this window in Spark's snapshot (p99)" in text


def test_a_count_is_not_an_answer_to_the_incomplete_count():
    verdict = check_count(5)
    assert verdict.status == "wrong" and "your int could be copied" in str(verdict)


# --- 06.3 and 07.3 review questions --------------------------------------------------------
def test_why_a_players_windows_are_spread():
    assert workshop.check("06.3", "b").right
    wrong = workshop.check("06.3", "c")
    assert not wrong.right and "not the input topic's" in str(wrong)
    assert "not one of the choices" in str(workshop.check("06.3", "e"))


def test_where_a_global_store_restores_from():
    assert workshop.check("07.3", "B").right
    wrong = workshop.check("07.3", "a")
    assert not wrong.right and "writes nothing" in str(wrong)


# --- 07.1 rows held ------------------------------------------------------------------------
def test_the_predicted_ratio_is_right_within_rounding_only():
    for right in (5 / 3, "1.67", 1.7, np.float64(1.6667)):
        verdict = workshop.check("07.1", right, measured=5 / 3, instances=5, standbys=2)
        assert verdict.right and "within 3%" in str(verdict)
    for wrong in (1.6, 1.5, 1.8):  # the old ±15% took answers from other reasoning
        assert not workshop.check("07.1", wrong, measured=5 / 3, instances=5, standbys=2).right


@pytest.mark.parametrize(("answer", "said"), [(2.5, "the active copy counts too"),
                                              (3, "how many instances hold each partition"),
                                              (1, "a global copy holds every row")])
def test_each_usual_wrong_ratio_names_its_reasoning(answer, said):
    verdict = workshop.check("07.1", answer, measured=5 / 3, instances=5, standbys=2)
    assert verdict.status == "wrong" and said in str(verdict)


def test_forgetting_the_standbys_is_named():
    verdict = workshop.check("07.1", 5, measured=5 / 3, instances=5, standbys=2)
    assert verdict.status == "wrong" and "also holds standby copies" in str(verdict)


@pytest.mark.parametrize("answer", ["lots", -1, float("nan"), True])
def test_a_ratio_must_be_a_positive_number(answer):
    verdict = workshop.check("07.1", answer, measured=1.5, instances=3, standbys=1)
    assert verdict.status == "wrong" and "one number > 0" in str(verdict)


def test_a_far_ratio_gives_the_measured_one():
    verdict = workshop.check("07.1", 0.5, measured=1.5, instances=3, standbys=1)
    assert verdict.status == "wrong" and "measured 1.500×" in str(verdict)


# --- 07.2 which way ------------------------------------------------------------------------
RIGHT_WAYS = {"a": "routed", "b": "global", "c": "scatter-gather", "d": "scatter-gather"}


def test_the_right_ways():
    assert workshop.check("07.2", RIGHT_WAYS).right


def test_each_wrong_way_is_explained():
    verdict = workshop.check("07.2", {**RIGHT_WAYS, "a": "global", "d": "teleport"})
    text = str(verdict)
    assert verdict.status == "wrong"
    assert "a) global: better routed" in text
    assert "d) 'teleport' is not one of" in text
    assert "c) scatter-gather:" in text and "✓ b) global" in text


def test_unanswered_and_unknown_questions_are_named():
    verdict = workshop.check("07.2", {"a": "routed", "z": "global"})
    text = str(verdict)
    assert "b) not answered" in text and "no question z" in text
    assert "answer with a dict" in str(workshop.check("07.2", "routed"))


# --- the rows-held table -------------------------------------------------------------------
def test_rows_held_per_instance_by_role():
    held = held_per_instance(PLAN.to_frame(), {0: 10, 1: 20, 2: 30},
                             {"i0": 60, "i1": 60, "i2": 60})
    partitioned = held[held["store"] == "partitioned"].groupby("instance")["rows"].sum()
    assert partitioned.to_dict() == {"i0": 40, "i1": 30, "i2": 50}  # own + the one before
    assert held.loc[(held["instance"] == "i1") & (held["role"] == "active"), "rows"].item() == 20
    assert set(held.loc[held["role"] == "global copy", "rows"]) == {60}


def test_rows_held_needs_every_partition_and_an_assignment_frame():
    with pytest.raises(BadArgument, match="none for"):
        held_per_instance(PLAN.to_frame(), {0: 10}, {})
    with pytest.raises(BadArgument, match="Assignment.to_frame"):
        held_per_instance(pd.DataFrame({"x": [1]}), {0: 1}, {})


def test_every_exercise_of_both_notebooks_is_listed():
    listed = workshop.exercises()
    mine = listed[listed["notebook"].isin(["06_interactive_queries", "07_global_store"])]
    assert mine["id"].tolist() == ["06.1", "06.2", "06.3", "06.4", "07.1", "07.2", "07.3"]
    assert mine["kind"].tolist() == ["build", "debug", "review", "predict", "predict", "review",
                                     "review"]
