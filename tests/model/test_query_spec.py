"""Query descriptions (``statekit.model.query_spec``): aggregates, windows and query specs,
their columns, their JSON form, and each bad one named. Pure logic."""

from __future__ import annotations

import pytest

from statekit.datasets import FLIGHT_SPEC, GAME_SPEC
from statekit.errors import BadArgument
from statekit.model.query_spec import Aggregate, QuerySpec, WindowSpec, hopping, session, tumbling


# --- aggregates -------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "function", "column", "name"), [
    ("count", "count", None, "count"),
    ("count(*)", "count", None, "count"),
    ("count()", "count", None, "count"),
    ("COUNT", "count", None, "count"),
    ("count(score)", "count", "score", "count_score"),
    ("sum(score)", "sum", "score", "sum_score"),
    ("  avg( score ) ", "avg", "score", "avg_score"),
    ("Max(score)", "max", "score", "max_score"),
    ("min(level)", "min", "level", "min_level"),
])
def test_aggregate_parse(text, function, column, name):
    agg = Aggregate.parse(text)
    assert (agg.function, agg.column, agg.name) == (function, column, name)


@pytest.mark.parametrize(("text", "named"), [
    ("median(score)", "'median'; accepted: count, sum, min, max, avg"),
    ("sum", "'sum'; accepted: sum(<column name>)"),
    ("avg(*)", "'avg(*)'; accepted: avg(<column name>)"),
    ("sum(a b)", "'sum(a b)'; accepted: count, count(*)"),
    ("", "''; accepted: count"),
    (42, "42; accepted: count"),
])
def test_bad_aggregate_is_named(text, named):
    with pytest.raises(BadArgument, match=named.replace("(", r"\(").replace(")", r"\)")
                       .replace("*", r"\*")):
        Aggregate.parse(text)


# --- windows ----------------------------------------------------------------------------
def test_window_kinds():
    assert tumbling("10 minutes") == WindowSpec("tumbling", "10 minutes")
    assert hopping("10 minutes", "5 minutes").slide == "5 minutes"
    assert session("3 minutes").kind == "session"
    assert tumbling("10 minutes").size_ms == 600_000
    assert hopping("10 minutes", "10 minutes").size_ms == 600_000  # slide = size is allowed


@pytest.mark.parametrize(("build", "named"), [
    (lambda: WindowSpec("weekly", "1 minute"), "window kind: 'weekly'; accepted: tumbling, "
                                               "hopping, session"),
    (lambda: tumbling("ten minutes"), "window size: 'ten minutes'"),
    (lambda: tumbling("0 minutes"), "window size: '0 minutes'"),
    (lambda: session("forever"), "session gap: 'forever'"),
    (lambda: hopping("10 minutes", "later"), "window slide: 'later'"),
    (lambda: hopping("10 minutes", "11 minutes"), "window slide: '11 minutes'; accepted: a "
                                                  "duration no longer than the window size "
                                                  "'10 minutes'"),
    (lambda: WindowSpec("hopping", "10 minutes"), "hopping window slide: None"),
    (lambda: WindowSpec("tumbling", "10 minutes", "5 minutes"),
     "slide for a tumbling window: '5 minutes'; accepted: no slide"),
    (lambda: WindowSpec("session", "10 minutes", "5 minutes"),
     "slide for a session window: '5 minutes'"),
])
def test_bad_window_is_named(build, named):
    with pytest.raises(BadArgument) as info:
        build()
    assert named in str(info.value)


# --- query specs ------------------------------------------------------------------------
def test_query_spec_defaults_and_columns_for_tumbling():
    spec = QuerySpec(keys=["player"], window=tumbling("10 minutes"))
    assert [a.name for a in spec.aggregates] == ["count"]
    assert (spec.event_time, spec.watermark) == ("ts", "10 minutes")
    assert spec.key_columns == ["window_start", "window_end", "player"]
    assert spec.value_columns == ["count"]
    assert spec.input_columns == spec.required_columns == ["player", "ts"]


def test_query_spec_input_columns_lists_each_column_once():
    spec = QuerySpec(keys=["player"], window=tumbling("10 minutes"),
                     aggregates=["count", "sum(score)", "max(score)"])
    assert spec.input_columns == ["player", "ts", "score"]


def test_query_spec_round_trips_through_json():
    import json

    for spec in (GAME_SPEC, FLIGHT_SPEC,
                 QuerySpec(keys=["team", "player"], window=hopping("10 minutes", "5 minutes"),
                           aggregates=["count(level)", "avg(level)"], event_time="at",
                           watermark="1 hour"),
                 QuerySpec(keys="player", window=session("3 minutes"))):
        assert QuerySpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec
    assert GAME_SPEC.to_dict() == {
        "keys": ["player"], "window": {"kind": "tumbling", "size": "10 minutes"},
        "aggregates": ["count", "sum(score)", "max(score)"], "event_time": "ts",
        "watermark": "10 minutes"}
    with pytest.raises(BadArgument, match="query spec field: 'colour'"):
        QuerySpec.from_dict({**GAME_SPEC.to_dict(), "colour": "red"})
    with pytest.raises(BadArgument, match="at least keys and window"):
        QuerySpec.from_dict({"keys": ["player"]})
    with pytest.raises(BadArgument, match="window description"):
        QuerySpec.from_dict({"keys": ["player"], "window": "10 minutes"})


def test_default_event_schema_reads_what_the_query_needs():
    spec = QuerySpec(keys=["origin"], window=tumbling("1 hour"),
                     aggregates=["count(dest)", "avg(dep_delay)", "max(dep_delay)"])
    assert spec.default_event_schema() == (
        "`origin` string, `ts` timestamp, `dest` string, `dep_delay` double")


def test_query_spec_columns_for_session_windows():
    spec = QuerySpec(keys="player", window=session("3 minutes"), aggregates=["count", "avg(score)"])
    assert spec.keys == ("player",)  # a single name becomes a tuple
    assert spec.key_columns == ["window_start", "player"]
    assert spec.value_columns == ["window_end", "count", "avg_score"]


def test_query_spec_columns_for_hopping_windows_with_two_keys():
    spec = QuerySpec(keys=["team", "player"], window=hopping("10 minutes", "5 minutes"),
                     aggregates=[Aggregate("min", "level"), "count"])
    assert spec.key_columns == ["window_start", "window_end", "team", "player"]
    assert spec.value_columns == ["min_level", "count"]
    assert spec.input_columns == ["team", "player", "ts", "level"]


@pytest.mark.parametrize(("kwargs", "named"), [
    ({"keys": None}, "bad group keys: None"),
    ({"keys": ["player", "player"]}, "bad group keys: ['player', 'player']; accepted: distinct"),
    ({"window": "none"}, "bad window: 'none'; accepted: tumbling(..), hopping(..)"),
    ({"event_time": "player"}, "bad event_time column: 'player'"),
    ({"aggregates": ["count", "count(*)"]}, "each aggregate at most once"),
    ({"aggregates": ["sum(score)", "SUM(score)"]}, "each aggregate at most once"),
    ({"aggregates": []}, "bad aggregates: []; accepted: at least one aggregate"),
    ({"keys": []}, "bad group keys: []; accepted: one or more column names"),
    ({"keys": ["player", ""]}, "bad group keys: ['player', '']"),
    ({"keys": ""}, "bad group keys: ''"),
    ({"window": "10 minutes"}, "bad window: '10 minutes'; accepted: tumbling(..)"),
    ({"watermark": "soon"}, "bad watermark delay: 'soon'"),
])
def test_bad_query_spec_is_named(kwargs, named):
    with pytest.raises(BadArgument) as info:
        QuerySpec(**{"keys": ["player"], "window": tumbling("1 minute"), **kwargs})
    assert named in str(info.value)
