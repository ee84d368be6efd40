"""One rule reads every number and every letter a workshop check is given (no Spark)."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from statekit.workshop import check
from statekit.workshop.answers import count, letter, mebibytes, number, whole


@pytest.mark.parametrize("given", [40, 40.0, np.int64(40), np.int32(40), np.float64(40.0),
                                   np.uint8(40), Decimal(40), Fraction(80, 2), "40", " 40 ",
                                   "+40", "40.0", "4e1", np.array(40), np.array([40]),
                                   pd.Series([40]), pd.DataFrame({"rows": [40]})["rows"]])
def test_forty_written_any_way_is_forty(given):
    assert whole(given) == 40 and count(given) == 40 and number(given) == 40.0


@pytest.mark.parametrize(("given", "value"), [("1,200", 1200), ("1_200", 1200),
                                              ("12,345,678", 12_345_678), ("-3", -3)])
def test_digit_groups_and_signs(given, value):
    assert whole(given) == value


@pytest.mark.parametrize("given", [True, False, np.bool_(True), None, ..., "", "  ", "forty",
                                   "40 rows", "1,2", "4,00", "1.2.3", "e3", float("nan"),
                                   float("inf"), "nan", "inf", np.float64("nan"), [40],
                                   (40,), {"rows": 40}, pd.Series([40, 41]), np.array([1, 2]),
                                   3 + 0j, b"40"])
def test_what_is_not_a_number(given):
    assert number(given) is None and whole(given) is None and count(given) is None


def test_fractions_are_numbers_but_not_whole_and_counts_are_not_negative():
    assert number("0.5") == 0.5 and whole("0.5") is None and whole(2.5) is None
    assert number(".5") == 0.5 and number(np.float32(0.25)) == 0.25
    assert whole(-3) == -3 and count(-3) is None and count(0) == 0


@pytest.mark.parametrize(("given", "said"), [("b", "b"), ("B", "b"), (" b ", "b"), ("b)", "b"),
                                             ("(b)", "b"), ("b.", "b"), ("B) the micro-batch", "b"),
                                             ("c: the memtables", "c")])
def test_a_letter_however_written(given, said):
    assert letter(given) == said


@pytest.mark.parametrize("given", ["all of them", "ab", "", "b and c", 2, None, True, "bb)"])
def test_what_is_not_a_letter(given):
    assert letter(given) is None


# Every check that asks for a number reads it by this rule: each gets the right number as a
# Python int, a NumPy scalar (what a value read out of a DataFrame is) and a string.
NUMBER_CHECKS = {
    "02.1": (9, {"rows": 9, "keys": 3, "windows_made": 141, "watermark": "2013-01-03 08:28"}),
    "03.1": (120, {"compacted": 120, "raw": 900, "store_rows": 120, "tombstones": 30}),
    "04.1": (2029, {"raw_records": 11722, "compacted_records": 2029, "rows": 2029}),
    "04.2": (700, {"tail_records": 700, "total_records": 2000, "stopped_batch": 3}),
    "07.1": (1.5, {"measured": 1.5, "instances": 3, "standbys": 1}),
    "08.1": (150, {"events": 3000, "per_user": 20, "rows": 150, "windowed": 12, "ttl": 30}),
    "09.1": (1, {"measured": {"default": 2.0, "write_heavy": 1.0}}),
    "09.2": (2176, {}),
    "09.4": (1, {"measured": 1.0, "events_per_key": 3.2}),
    "10.3": (40, {"users": 40, "batches": 6, "rows": 40}),
    "13.2": (4, {"late": 4, "malformed": 2, "records": 1047}),
    "13.4": (5, {"changed": 5, "added": 1, "removed": 2}),
}


@pytest.mark.parametrize("exercise", sorted(NUMBER_CHECKS))
def test_every_number_check_reads_numbers_alike(exercise):
    right, measured = NUMBER_CHECKS[exercise]
    numpy = np.float64(right) if isinstance(right, float) else np.int64(right)
    for given in (right, numpy, str(right), f" {right} ", np.array([right])):
        verdict = check(exercise, given, **measured)
        assert verdict.right, (exercise, given, str(verdict))
    for given in (True, "lots", float("nan"), [right, right]):
        verdict = check(exercise, given, **measured)
        assert verdict.status == "wrong", (exercise, given)
        assert "number" in " ".join(p.text for p in verdict.points), (exercise, given)


def test_the_failover_dict_reads_its_numbers_alike():
    measured = {"changelog_records": 900, "lag_at_kill": 0, "after_stale_batch": 300,
                "stale_batch": 2}
    for answer in ({"no standby": 900, "standby": 0, "stale standby": 300},
                   {"no standby": np.int64(900), "standby": "0", "stale standby": " 300 "}):
        assert check("05.2", answer, **measured).right
    assert "not a number" in str(check("05.2", {"no standby": True, "standby": 0,
                                                 "stale standby": 300}, **measured))


# --- named answers: one rule (answers.words) for case, quotes, hyphens, underscores, spaces --
def _texts(verdict) -> str:
    return " | ".join(p.text for p in verdict.points)


@pytest.mark.parametrize("engine", ["kafka streams", "kafka-streams", "Kafka Streams",
                                    "kafka_streams", "KafkaStreams", " 'Kafka--Streams' "])
def test_an_engine_written_any_way_is_that_engine(engine):
    assert check("03.5", {"statekit": "b", engine: "a"}).right


@pytest.mark.parametrize("engine", ["kafka", "flink", "kafka streamz", ""])
def test_an_engine_that_is_not_one_stays_unknown(engine):
    judged = check("03.5", {"statekit": "b", engine: "a"})
    assert not judged.right
    assert f"{engine!r} is not an engine of this question" in _texts(judged)


@pytest.mark.parametrize("flag", ["stalled_watermark", "stalled-watermark", "Stalled Watermark",
                                  "'STALLED_WATERMARK'", " stalled  watermark "])
def test_the_flag_written_any_way_is_the_flag(flag):
    assert check("10.1", flag).right


@pytest.mark.parametrize("flag", ["growing-state", "watermark", "stalled", 7])
def test_other_flags_and_non_flags_stay_wrong(flag):
    assert not check("10.1", flag).right


DRILL_RIGHT = {"changelog_records": 11_722, "lag_at_kill": 0, "after_stale_batch": 5_709,
               "stale_batch": 4}


@pytest.mark.parametrize("keys", [("no standby", "standby", "stale standby"),
                                  ("No standby", "Standby", "Stale Standby"),
                                  ("no_standby", "STANDBY", "stale-standby")])
def test_scenario_keys_written_any_way_are_read(keys):
    answer = dict(zip(keys, (11_722, 0, 5_709), strict=True))
    assert check("05.2", answer, **DRILL_RIGHT).right
    wrong = dict(zip(keys, (5_709, 0, 11_722), strict=True))
    assert not check("05.2", wrong, **DRILL_RIGHT).right


RIGHT_WAYS = {"a": "routed", "b": "global", "c": "scatter-gather", "d": "scatter-gather"}


@pytest.mark.parametrize("answer", [
    RIGHT_WAYS,
    {k.upper(): v for k, v in RIGHT_WAYS.items()},
    {"a": "Routed Lookup", "b": "global store", "c": "scatter gather", "d": "Scatter_Gather"},
])
def test_the_ways_written_any_way_are_right(answer):
    assert check("07.2", answer).right


def test_a_wrong_way_or_an_unknown_word_stays_wrong_whatever_its_case():
    judged = check("07.2", {"A": "Global", "b": "global", "c": "scatter gather",
                            "d": "broadcast"})
    assert [p.ok for p in judged.points] == [False, True, True, False]
    assert "'broadcast' is not one of routed, scatter-gather, global" in _texts(judged)
    assert "no question e" in _texts(check("07.2", {**RIGHT_WAYS, "e": "routed"}))


@pytest.mark.parametrize(("given", "value"), [("5/3", 5 / 3), (" 5 / 3 ", 5 / 3), ("-1/4", -0.25),
                                              ("50%", 0.5), ("12.5 %", 0.125)])
def test_fractions_and_percentages_are_numbers(given, value):
    assert number(given) == pytest.approx(value)


@pytest.mark.parametrize("given", ["1/0", "5/", "/3", "5/3/2", "50%%", "%", "half", "1/2%"])
def test_broken_fractions_and_percentages_are_not(given):
    assert number(given) is None


def test_a_ratio_written_as_a_fraction_is_read_by_07_1():
    assert check("07.1", "5/3", measured=5 / 3, instances=5, standbys=2).right
    assert not check("07.1", "3/5", measured=5 / 3, instances=5, standbys=2).right


@pytest.mark.parametrize("given", [2176, "2176", "2176 MiB", "2176MB", "2,176 mib",
                                   "2.125 GiB", "2.125G"])
def test_the_memory_ceiling_written_with_its_unit(given):
    assert mebibytes(given) == 2176
    assert check("09.2", given).right


@pytest.mark.parametrize("given", ["2176 apples", "2176 TiB", "MiB", "2176 MiB MiB"])
def test_a_size_with_an_unknown_unit_is_not_one(given):
    assert mebibytes(given) is None
    assert not check("09.2", given).right


def test_a_budget_and_a_share_written_with_units_and_percent():
    prefix = "spark.sql.streaming.stateStore.rocksdb."
    settings = {prefix + "boundedMemoryUsage": "true", prefix + "maxMemoryUsageMB": "128 MiB",
                prefix + "writeBufferCacheRatio": "50%"}
    assert check("09.3", settings).right
    assert not check("09.3", {**settings, prefix + "writeBufferCacheRatio": "25%"}).right


@pytest.mark.parametrize("given", ["restore", "Restore", "04", 4, "04_restore"])
def test_the_restore_notebook_named_any_way(given):
    assert check("00.2", given).right


@pytest.mark.parametrize("given", ["standby", "global store", "st"])
def test_other_notebooks_and_ambiguous_names_stay_wrong(given):
    assert not check("00.2", given).right


@pytest.mark.parametrize("given", ["smaller", "Smaller", "fewer", "less", " FEWER "])
def test_smaller_written_any_way(given):
    assert check("00.3", given, events=300, state_rows=41).right


@pytest.mark.parametrize("given", ["larger", "more", "equal", "same", "tiny"])
def test_not_smaller_stays_wrong(given):
    assert not check("00.3", given, events=300, state_rows=41).right
