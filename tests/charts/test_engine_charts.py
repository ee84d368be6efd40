"""The charts of one query on two engines (notebook 14): what they draw, and bad frames
refused by name."""

from __future__ import annotations

import pandas as pd
import pytest

from statekit import charts
from statekit.errors import BadArgument

HELD = pd.DataFrame({
    "player": ["p1", "p1", "p2", "p2"],
    "window_start": pd.to_datetime(["2026-01-05 10:00", "2026-01-05 10:10"] * 2),
    "where": ["only in Kafka Streams", "both", "only in Kafka Streams", "both"],
    "partition_spark": pd.array([None, 2, None, 3], dtype="Int64"),
    "partition_kafka_streams": pd.array([0, 0, 1, 1], dtype="Int64")})


def _values(spec: dict, part: dict) -> list[dict]:
    """The rows one layer or panel of a chart's spec draws (Altair names its datasets)."""
    data = part["data"]
    return data["values"] if "values" in data else spec["datasets"][data["name"]]


def test_held_by_engine_counts_windows_per_start_and_marks_the_watermark():
    spec = charts.held_by_engine_chart(HELD, watermark="2026-01-05 10:10").to_dict()
    bars = _values(spec, spec["layer"][0])
    assert {(b["where"], b["windows"]) for b in bars} == {("only in Kafka Streams", 2),
                                                          ("both", 2)}
    assert spec["layer"][1]["mark"]["type"] == "rule"
    with pytest.raises(BadArgument, match="where"):
        charts.held_by_engine_chart(HELD.assign(where="nowhere"))


def test_changelog_records_bars_and_marks():
    spec = charts.changelog_records_chart({"Kafka Streams, cache off": 4_986, "Spark": 479},
                                          marks={"events": 5_000}).to_dict()
    assert [v["records"] for v in _values(spec, spec["layer"][0])] == [4_986, 479]
    assert _values(spec, spec["layer"][2]) == [{"what": "events", "count": 5_000}]
    with pytest.raises(BadArgument, match="records"):
        charts.changelog_records_chart({})


def test_key_placement_one_panel_per_engine_over_windows_both_hold():
    spec = charts.key_placement_chart(HELD, "player").to_dict()
    spark, streams = (_values(spec, panel) for panel in spec["hconcat"])
    assert sorted((v["player"], v["partition"]) for v in spark) == [("p1", 2), ("p2", 3)]
    assert sorted((v["player"], v["partition"]) for v in streams) == [("p1", 0), ("p2", 1)]


def test_segments_bars_and_a_frame_without_rows_refused():
    frame = pd.DataFrame({"segment": ["aggregate.0", "aggregate.600000"], "partition": [0, 0],
                          "rows": [13, 13]})
    assert charts.segments_chart(frame).to_dict()["mark"]["type"] == "bar"
    with pytest.raises(BadArgument):
        charts.segments_chart(frame.drop(columns="rows"))


def test_failover_answers_one_tick_per_answer_and_unknown_roles_refused():
    answers = pd.DataFrame({"seconds": [0.0, 0.3, 10.6], "role": ["stale", "stale", "active"],
                            "served_by": ["127.0.0.1:1"] * 3, "rows": [12] * 3})
    spec = charts.failover_answers_chart(answers).to_dict()
    assert [v["role"] for v in _values(spec, spec)] == ["stale", "stale", "active"]
    with pytest.raises(BadArgument, match="role"):
        charts.failover_answers_chart(answers.assign(role="leader"))


def test_restores_chart_draws_seconds_and_what_each_engine_read():
    table = pd.DataFrame({"engine": ["Kafka Streams", "Spark", "statekit"],
                          "records": pd.array([4986, None, 1016], dtype="Int64"),
                          "files": pd.array([None, 18, None], dtype="Int64"),
                          "seconds": [0.38, 0.23, 0.11]})
    spec = charts.restores_chart(table).to_dict()
    amounts = {row["engine"]: (row["amount"], row["unit"])
               for row in spec["datasets"][next(iter(spec["datasets"]))]}
    assert amounts == {"Kafka Streams": (4986, "changelog records"),
                       "Spark": (18, "checkpoint files"), "statekit": (1016, "changelog records")}
    assert [c["mark"]["type"] for c in spec["hconcat"][:1]] == ["bar"]
    with pytest.raises(BadArgument, match="seconds"):
        charts.restores_chart(table.drop(columns="seconds"))
