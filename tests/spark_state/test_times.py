"""Timestamps Spark accepts but pandas' nanoseconds cannot hold: every reader converts them
(``statekit.spark_state.times``) instead of failing. Pure logic, no Spark, no broker."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from statekit.changelog.arrow import json_table, parse_times, table_to_pandas
from statekit.errors import BadArgument
from statekit.spark_state.progress import progress_frame
from statekit.spark_state.state_reader import arrow_to_pandas
from statekit.spark_state.times import epoch_ms_times, iso_times, pandas_times, pandas_unit

#: 2026-01-05T10:00:00Z, 9999-12-31T23:59:59Z and 1767607200000 read as seconds (year 57983),
#: in microseconds: what Spark holds
NOW_US, YEAR_9999_US, MS_AS_SECONDS_US = (1_767_607_200_000_000, 253_402_300_799_000_000,
                                          1_767_607_200_000 * 1_000_000)
FAR = [pd.Timestamp(np.datetime64("9999-12-31T23:59:59", "us")),
       pd.Timestamp(np.datetime64("57983-03-30T16:00:00", "us"))]


def test_times_that_fit_stay_nanoseconds_and_far_ones_become_microseconds_exactly():
    near = pa.array([NOW_US, None], pa.timestamp("us", "UTC"))
    far = pa.array([NOW_US, YEAR_9999_US, MS_AS_SECONDS_US, None], pa.timestamp("us", "UTC"))
    assert pandas_times(near).dtype == "datetime64[ns]"
    got = pandas_times(far)
    assert got.dtype == "datetime64[us]"
    assert got.tolist()[1:3] == FAR and got.isna().tolist() == [False, False, False, True]
    assert got.astype("int64").tolist()[:3] == [NOW_US, YEAR_9999_US, MS_AS_SECONDS_US]


@pytest.mark.parametrize(("unit", "values", "expected"), [
    ("s", [0, 1], "ns"),
    ("ms", [-(2**62), 0], "ms"),        # too far for ns and us: its own unit, nothing rounded
    ("us", [-(2**63) + 1, 0], "us"),    # Spark's earliest timestamp
    ("ns", [2**63 - 1], "ns"),
    ("us", [None], "ns"),               # all null
])
def test_the_unit_is_the_finest_that_holds_every_value(unit, values, expected):
    assert pandas_unit(pa.array(values, pa.timestamp(unit))) == expected


def test_iso_texts_with_far_years_and_offsets_are_read():
    texts = pd.Series(["2026-01-05T10:00:00.000Z", None, "9999-12-31T23:59:59.000Z",
                       "+57983-03-30T16:00:00.000Z", "57983-03-30T18:30:00.000+02:30"],
                      index=[7, 8, 9, 10, 11])
    got = iso_times(texts)
    assert got.dtype == "datetime64[us]" and got.index.tolist() == [7, 8, 9, 10, 11]
    assert got.tolist()[2:] == [*FAR, FAR[1]]
    assert iso_times(["2026-01-05T11:00:00+01:00"]).tolist() == [pd.Timestamp("2026-01-05 10:00")]
    assert iso_times(["2026-01-05T11:00:00+01:00"]).dtype == "datetime64[ns]"


@pytest.mark.parametrize("bad", ["soon", "+57983-13-45T00:00:00Z", 17])
def test_a_text_that_is_no_timestamp_is_named(bad):
    with pytest.raises(BadArgument, match="timestamp") as raised:
        iso_times(["+57983-03-30T16:00:00.000Z", bad])
    assert repr(bad) in str(raised.value)


def test_kafka_record_timestamps_far_ahead_are_kept():
    got = epoch_ms_times(np.array([1_767_607_200_000, 253_402_300_799_000]))
    assert got.tolist() == [pd.Timestamp("2026-01-05 10:00"), FAR[0]]


def test_state_read_through_arrow_keeps_far_windows():
    """``snapshot()`` / ``changes()`` go through ``arrow_to_pandas``."""
    utc = pa.timestamp("us", "UTC")
    table = pa.table({"window_start": pa.array([NOW_US, MS_AS_SECONDS_US], utc),
                      "window_end": pa.array([NOW_US + 1, NOW_US + 2], utc),
                      "count": pa.array([1, None], pa.int64())})
    frame = arrow_to_pandas(table, nullable_ints=True)
    assert frame.dtypes.astype(str).tolist() == ["datetime64[us]", "datetime64[ns]", "Int64"]
    assert frame["window_start"].iloc[1] == FAR[1]


def test_progress_with_a_far_watermark():
    """The watermark after an event of year 57983 (Spark writes it with a sign)."""
    frame = progress_frame([
        {"batchId": 0, "timestamp": "2026-11-25T01:00:00.000Z",
         "eventTime": {"watermark": "1970-01-01T00:00:00.000Z"}},
        {"batchId": 1, "timestamp": "2026-11-25T01:00:01.000Z",
         "eventTime": {"watermark": "+57983-03-30T15:50:00.000Z"}}])
    ten_minutes = pd.Timedelta(minutes=10).as_unit("us")  # a ns Timedelta would overflow
    assert frame["watermark"].tolist() == [pd.Timestamp(0), FAR[1] - ten_minutes]
    assert frame["timestamp"].dtype == "datetime64[ns]"


def test_changelog_keys_and_store_rows_with_far_windows():
    """What the changelog writer (Spark's ``to_json``) writes for year 57983, read back by
    ``read_changelog`` (``parse_times``) and by stores and serving (``json_table``)."""
    keys = [json.dumps({"player": "p1", "window_start": start}, separators=(",", ":")).encode()
            for start in ("2026-01-05T10:00:00.000Z", "+57983-03-30T16:00:00.000Z")]
    for times in ((), ("window_start",)):
        frame = table_to_pandas(json_table(keys, times))
        assert frame["window_start"].tolist() == [pd.Timestamp("2026-01-05 10:00"), FAR[1]]
    decoded = parse_times(pd.DataFrame({"window_start": ["2026-01-05T10:00:00.000Z",
                                                         "+57983-03-30T16:00:00.000Z"]}))
    assert decoded["window_start"].tolist() == [pd.Timestamp("2026-01-05 10:00"), FAR[1]]
    near = parse_times(pd.DataFrame({"window_start": ["2026-01-05T10:00:00.000Z"]}))
    assert near["window_start"].dtype == "datetime64[ns]"


def test_the_pandas_reference_windows_far_times_in_their_own_unit():
    from statekit.model.query_spec import QuerySpec, hopping
    from statekit.reference.aggregates import windowed_reference

    times = pd.Series(np.array(["2026-01-05T10:03:00", "57983-03-30T16:04:00"],
                               dtype="datetime64[us]"))
    events = pd.DataFrame({"player": ["a", "b"], "ts": times})
    spec = QuerySpec(keys=["player"], window=hopping("10 minutes", "5 minutes"))
    got = windowed_reference(events, spec)
    five = pd.Timedelta(minutes=5).as_unit("us")
    starts = [pd.Timestamp("2026-01-05 09:55"), pd.Timestamp("2026-01-05 10:00"),
              FAR[1] - five, FAR[1]]
    assert got["window_start"].tolist() == starts
    assert (got["window_end"] - got["window_start"] == 2 * five).all()
    assert got["count"].tolist() == [1, 1, 1, 1]
