"""The checks of notebook 14 (Kafka Streams and Spark, side by side): right answers written
differently pass, plausible wrong ones stay wrong and are told why; Kafka Streams' segment rule
as its source states it."""

from __future__ import annotations

import pandas as pd
import pytest

from statekit.workshop import check
from statekit.workshop.kafka_streams import oldest_live_segment, segment_interval_ms


def _texts(verdict) -> str:
    return " | ".join(p.text for p in verdict.points)


#: measured on the 5,000 game events (6 malformed, 8 later than the grace)
CACHE = {"events": 5_000, "accepted": 4_986, "windows": 479, "cached": 494}


@pytest.mark.parametrize("answer", [
    {"cache off": 4_986, "cache on": 494},
    {"Cache-Off": "4,986", "cache_on": "479"},
    {" CACHE OFF ": 4986.0, "cache on": 4_986},   # at most one per event
    {"cache off": "4_986", "cache on": "1,000"},
])
def test_the_changelog_counts_are_read_however_written(answer):
    assert check("14.1", answer, **CACHE).right


@pytest.mark.parametrize("answer, says", [
    ({"cache off": 5_000, "cache on": 494}, "dropped too"),          # dropped events counted
    ({"cache off": 4_994, "cache on": 494}, "not what was measured"),  # late events forgotten
    ({"cache off": 479, "cache on": 479}, "one record per (key, window)"),
    ({"cache off": 4_986, "cache on": 40}, "fewer than the (key, window)"),  # the players
    ({"cache off": 4_986, "cache on": 5_000}, "more than one per event"),
    ({"cache off": True, "cache on": 494}, "not a number"),
    ({"cache off": 4_986}, "exactly the keys"),
    ({"cache off": 4_986, "cache on": 494, "spark": 1}, "exactly the keys"),
    (4_986, "dict"),
])
def test_wrong_changelog_counts_stay_wrong(answer, says):
    verdict = check("14.1", answer, **CACHE)
    assert not verdict.right and says in _texts(verdict)


def test_the_changelog_check_needs_the_measurements():
    assert "the cell does it" in _texts(check("14.1", {"cache off": 1, "cache on": 1}))
    assert check("14.1", ..., **CACHE).status == "unanswered"


def test_the_segment_rule_is_kafka_streams():
    """``Stores.persistentTimestampedWindowStore``: max(retention / 2, 60 s)."""
    assert segment_interval_ms(1_200_000) == 600_000
    assert segment_interval_ms(60_000) == 60_000 and segment_interval_ms(1_000) == 60_000
    assert oldest_live_segment(1_767_614_399_999, 1_200_000) == "aggregate.1767612600000"
    assert oldest_live_segment(1_767_614_400_000, 1_200_000) == "aggregate.1767613200000"


STORES = pd.DataFrame({"partition": [0, 1], "store": ["aggregate"] * 2, "segments": [
    ["aggregate.1767612600000", "aggregate.1767613200000", "aggregate.1767613800000"]] * 2})
#: stream time 11:55:00 (1767613800000 is 11:50), a 20-minute retention
SEGMENTS = {"stores": STORES, "stream_time_ms": 1_767_614_100_000, "retention_ms": 1_200_000}


@pytest.mark.parametrize("answer", ["aggregate.1767612600000", " Aggregate.1767612600000 ",
                                    1_767_612_600_000, "1,767,612,600,000",
                                    "2026-01-05 11:30", "2026-01-05T12:30:00+01:00"])
def test_the_oldest_segment_is_read_however_written(answer):
    verdict = check("14.2", answer, **SEGMENTS)
    assert verdict.right and "the directory keeps" in _texts(verdict)


@pytest.mark.parametrize("answer, says", [
    (1_767_612_900_000, "stream time − retention itself"),   # not rounded down
    ("aggregate.1767612660000", "multiples of the interval"),  # a 60 s interval
    ("aggregate.1767607200000", "older than what Kafka Streams keeps"),  # nothing dropped
    ("aggregate.1767613200000", "too new"),
    ("the oldest one", "names no segment"),
])
def test_wrong_segments_stay_wrong(answer, says):
    verdict = check("14.2", answer, **SEGMENTS)
    assert not verdict.right and says in _texts(verdict)


def test_a_directory_that_disagrees_with_the_rule_is_said():
    stores = STORES.assign(segments=[["aggregate.1767613200000"]] * 2)
    verdict = check("14.2", "aggregate.1767613200000", stores=stores,
                    stream_time_ms=1_767_614_100_000, retention_ms=1_200_000)
    assert verdict.right and "the directory disagrees" in _texts(verdict)


PLACEMENT = pd.DataFrame({"player": ["p00", "p01", "p02"], "windows": [2, 2, 3],
                          "spark_partitions": [1, 2, 3], "kafka_streams_partitions": [1, 1, 1]})


@pytest.mark.parametrize("answer", [{"player": "p01", "why": "b"},
                                    {"Player": " P02 ", "WHY": "(B)"},
                                    {"player": "p01", "why": "b) Spark hashes the window"}])
def test_a_key_spread_by_spark_and_the_reason(answer):
    assert check("14.3", answer, placement=PLACEMENT).right


@pytest.mark.parametrize("answer, says", [
    ({"player": "p00", "why": "b"}, "no difference"),        # one partition on both engines
    ({"player": "p01", "why": "a"}, "would keep a key's windows in one partition"),
    ({"player": "p01", "why": "c"}, "inside one partition"),
    ({"player": "p99", "why": "b"}, "is no player"),
    ({"player": "p01", "why": "murmur"}, "not one of the choices"),
    ({"player": "p01"}, "exactly the keys"),
    ("p01", "dict"),
])
def test_wrong_routing_answers_stay_wrong(answer, says):
    verdict = check("14.3", answer, placement=PLACEMENT)
    assert not verdict.right and says in _texts(verdict)
