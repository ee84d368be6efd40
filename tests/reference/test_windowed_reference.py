"""The pandas reference of a windowed aggregation (``statekit.reference.aggregates``):
tumbling and hopping windows, the watermark, nulls. Pure logic."""

from __future__ import annotations

import pandas as pd
import pytest

from statekit.errors import BadArgument
from statekit.model.query_spec import QuerySpec, hopping, session, tumbling
from statekit.reference.aggregates import windowed_reference

T = pd.Timestamp


@pytest.fixture()
def events() -> pd.DataFrame:
    return pd.DataFrame({
        "player": ["a", "a", "b", "a", "b"],
        "score": [1, 4, 10, 7, 2],
        "ts": pd.to_datetime(["2026-01-05 10:01:00", "2026-01-05 10:07:00",
                              "2026-01-05 10:09:59", "2026-01-05 10:10:00",
                              "2026-01-05 10:24:00"]),
    })


AGGS = ["count", "sum(score)", "avg(score)", "max(score)", "min(score)"]


def test_tumbling_reference_counts_sums_averages(events):
    spec = QuerySpec(keys=["player"], window=tumbling("10 minutes"), aggregates=AGGS)
    got = windowed_reference(events, spec)
    assert list(got.columns) == ["window_start", "window_end", "player", "count", "sum_score",
                                 "avg_score", "max_score", "min_score"]
    expected = [  # (start, player, count, sum, avg, max, min); 10:10 opens the next window
        ("10:00", "a", 2, 5, 2.5, 4, 1), ("10:00", "b", 1, 10, 10.0, 10, 10),
        ("10:10", "a", 1, 7, 7.0, 7, 7), ("10:20", "b", 1, 2, 2.0, 2, 2)]
    assert [(r.window_start.strftime("%H:%M"), r.player, r.count, r.sum_score, r.avg_score,
             r.max_score, r.min_score) for r in got.itertuples()] == expected
    assert (got["window_end"] - got["window_start"] == pd.Timedelta("10min")).all()


def test_hopping_reference_puts_each_event_in_size_over_slide_windows(events):
    spec = QuerySpec(keys=["player"], window=hopping("10 minutes", "5 minutes"),
                     aggregates=["count", "sum(score)"])
    got = windowed_reference(events, spec)
    assert got["count"].sum() == 2 * len(events)
    a = got[got["player"] == "a"].set_index("window_start")
    assert a["count"].to_dict() == {T("2026-01-05 09:55"): 1, T("2026-01-05 10:00"): 2,
                                    T("2026-01-05 10:05"): 2, T("2026-01-05 10:10"): 1}
    assert a.loc[T("2026-01-05 10:05"), "sum_score"] == 11


def test_hopping_reference_with_a_slide_that_does_not_divide_the_size():
    events = pd.DataFrame({"player": ["a"], "ts": pd.to_datetime(["2026-01-05 00:09"])})
    spec = QuerySpec(keys=["player"], window=hopping("10 minutes", "3 minutes"),
                     aggregates=["count"])
    got = windowed_reference(events, spec)
    assert got["window_start"].dt.strftime("%H:%M").tolist() == ["00:00", "00:03", "00:06",
                                                                  "00:09"]


def test_reference_watermark_keeps_windows_ending_after_it(events):
    spec = QuerySpec(keys=["player"], window=tumbling("10 minutes"), aggregates=["count"])
    kept = windowed_reference(events, spec, watermark=T("2026-01-05 10:10"))
    assert kept["window_end"].min() > T("2026-01-05 10:10")
    assert kept["window_start"].dt.strftime("%H:%M").tolist() == ["10:10", "10:20"]
    assert len(windowed_reference(events, spec, watermark=T("2026-01-05 11:00"))) == 0


def test_reference_accepts_timezone_aware_times(events):
    spec = QuerySpec(keys=["player"], window=tumbling("10 minutes"), aggregates=["count"])
    aware = events.assign(ts=events["ts"].dt.tz_localize("UTC").dt.tz_convert("Europe/Paris"))
    pd.testing.assert_frame_equal(windowed_reference(aware, spec), windowed_reference(events, spec))


def test_reference_count_of_a_column_skips_missing_values():
    events = pd.DataFrame({"player": ["a", "a"], "score": [1.0, None],
                           "ts": pd.to_datetime(["2026-01-05 10:01", "2026-01-05 10:02"])})
    spec = QuerySpec(keys=["player"], window=tumbling("10 minutes"),
                     aggregates=["count", "count(score)"])
    got = windowed_reference(events, spec)
    assert got[["count", "count_score"]].values.tolist() == [[2, 1]]


def test_reference_refuses_session_windows(events):
    spec = QuerySpec(keys=["player"], window=session("3 minutes"), aggregates=["count"])
    with pytest.raises(BadArgument, match="'session'; accepted: tumbling, hopping"):
        windowed_reference(events, spec)
