"""The checks of notebook 03's durability exercises: logging on or off (03.7), brokers down
(03.8), a crash between Spark's commit and the changelog (03.9). Right answers written
differently pass; wrong ones stay wrong."""

from __future__ import annotations

import numpy as np
import pytest

from statekit.workshop import check

RIGHT = {"payments dedup": "on", "profile cache": "off", "last hour counts": "off",
         "all time totals": "on"}


def texts(verdict) -> str:
    return " | ".join(p.text for p in verdict.points)


@pytest.mark.parametrize("answer", [
    RIGHT,
    {"Payments-Dedup": "ON", "profile_cache": " Off ", "LAST HOUR COUNTS": "logging off",
     "'all time totals'": "enabled"},
    {"payments dedup": "keep it", "profile cache": "disabled", "last-hour-counts": "off",
     "all_time_totals": "On"}])
def test_03_7_right_however_written(answer):
    verdict = check("03.7", answer)
    assert verdict.right, texts(verdict)


@pytest.mark.parametrize(("answer", "said"), [
    ({**RIGHT, "payments dedup": "off"}, "would forget ids"),
    ({**RIGHT, "all time totals": "off"}, "only the changelog can bring it back"),
    ({**RIGHT, "profile cache": "on"}, "a cache"),
    ({**RIGHT, "last hour counts": "maybe"}, "neither"),
    ({k: v for k, v in RIGHT.items() if k != "profile cache"}, "profile cache: not answered"),
    ({**RIGHT, "leaderboard": "on"}, "none of the stores"),
    ({name: "on" for name in RIGHT}, "not on"),
    ({name: "off" for name in RIGHT}, "not off"),
    ("off", "expected a dict"), ({}, "expected a dict")])
def test_03_7_wrong_stays_wrong(answer, said):
    verdict = check("03.7", answer)
    assert verdict.status == "wrong" and said in texts(verdict)


CLUSTER = {"replication_factor": 3, "min_insync_replicas": 2}


@pytest.mark.parametrize("answer", [1, "1", " 1 ", 1.0, np.int64(1), "+1"])
def test_03_8_one_broker(answer):
    verdict = check("03.8", answer, **CLUSTER)
    assert verdict.right and "losing 1 loses none" in texts(verdict)


@pytest.mark.parametrize(("answer", "said"), [
    (2, "NOT_ENOUGH_REPLICAS"), ("2", "fewer than min.insync.replicas=2"),
    (3, "offline"), (0, "more can go"), ("one", "whole number"), (True, "whole number"),
    (1.5, "whole number"), (-1, "whole number")])
def test_03_8_wrong_stays_wrong(answer, said):
    verdict = check("03.8", answer, **CLUSTER)
    assert verdict.status == "wrong" and said in texts(verdict)


def test_03_8_follows_the_settings():
    assert check("03.8", 2, replication_factor=5, min_insync_replicas=3).right
    assert check("03.8", 0, replication_factor=1, min_insync_replicas=1).right
    assert not check("03.8", 1, replication_factor=1, min_insync_replicas=1).right


@pytest.mark.parametrize("right", ["b", "B", "(b)", " b) on restart"])
def test_03_9_the_topic_follows_the_checkpoint(right):
    assert check("03.9", right).right


@pytest.mark.parametrize(("wrong", "said"), [
    ("a", "the checkpoint is the source"), ("c", "two commits"), ("d", "fences the old"),
    ("e", "not one of the choices")])
def test_03_9_wrong_choices_stay_wrong(wrong, said):
    verdict = check("03.9", wrong)
    assert verdict.status == "wrong" and said in texts(verdict)

