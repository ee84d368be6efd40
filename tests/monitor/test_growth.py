"""Unbounded state, a TTL, and a watermark: the same aggregate's state in three shapes.

A stream where a new user appears every 20 events: a running aggregate per user keeps
every user forever; with a TTL idle users are forgotten; per window with a watermark,
closed windows are evicted. Real broker, real Spark, the queries' own progress.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

import statekit as sk
from statekit.datasets import Dataset
from statekit.kafka.dataset_replay import replay
from statekit.monitor.growth import growth_warning, state_growth
from statekit.reference.aggregates import windowed_reference

EVENTS, PER_USER, BATCH = 3_000, 20, 300
SCHEMA = "user string, score long, ts timestamp"


def user_events() -> pd.DataFrame:
    base = pd.Timestamp("2026-01-05 10:00")
    return pd.DataFrame({"user": [f"u{i // PER_USER:04d}" for i in range(EVENTS)],
                         "score": [i % 7 for i in range(EVENTS)],
                         "ts": [base + pd.Timedelta(seconds=i) for i in range(EVENTS)]})


@pytest.fixture(scope="module")
def users_topic(broker):
    events = user_events()
    values = [json.dumps({"user": u, "score": int(s), "ts": t.strftime("%Y-%m-%dT%H:%M:%SZ")})
              for u, s, t in zip(events["user"], events["score"], events["ts"], strict=True)]
    records = pd.DataFrame({"key": events["user"], "value": values,
                            "timestamp": (events["ts"].astype("int64") // 1_000_000)})
    replay(Dataset("users", records), broker, "users", partitions=1, progress=False)
    return "users"


def run(spark, broker, topic, tmp_path, name, **spec):
    query = sk.start_query(topic, keys=["user"], aggregates=["count", "sum(score)"],
                           event_schema=SCHEMA, kafka=broker, spark=spark, name=name,
                           checkpoint=str(tmp_path / name), changelog=False,
                           max_offsets_per_trigger=BATCH, trigger="1 second", **spec)
    try:
        query.wait_until_drained(timeout=240)
    finally:
        query.close()
    return query


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_three_shapes_of_state_and_a_warning_that_names_the_cause(spark, broker, users_topic,
                                                                  tmp_path):
    events = user_events()
    running = run(spark, broker, users_topic, tmp_path, "running", window=None)
    ttl = run(spark, broker, users_topic, tmp_path, "ttl", window=None, ttl="3 seconds")
    windowed = run(spark, broker, users_topic, tmp_path, "windowed",
                   window=sk.tumbling("1 minute"), watermark="30 seconds")

    # running: one row per user ever seen, equal to pandas; nothing ever removed
    expected = windowed_reference(events, running.spec)
    snapshot = running.snapshot(sort=True).drop(columns="partition")
    pd.testing.assert_frame_equal(snapshot, expected, check_dtype=False)
    progress = running.progress()
    assert progress["state_rows_removed"].sum() == 0
    assert progress["state_rows_total"].iloc[-1] == EVENTS // PER_USER
    warning = growth_warning(progress, running.spec)
    assert warning is not None and "running aggregate (no window) keeps every key" in warning

    # TTL: idle users are forgotten; those still held have their full totals
    held = ttl.snapshot()
    ttl_progress = ttl.progress()
    assert ttl_progress["state_rows_removed"].sum() > 0
    assert len(held) < EVENTS // PER_USER
    totals = expected.set_index("user")
    for row in held.itertuples():
        assert row.count == totals.loc[row.user, "count"]
        assert row.sum_score == totals.loc[row.user, "sum_score"]
    changes = ttl.changes(from_batch=0)
    assert (changes["change"] == "delete").sum() == ttl_progress["state_rows_removed"].sum()

    # windowed: closed windows are evicted, the state stays bounded
    win = windowed.progress()
    assert win["state_rows_removed"].sum() > 0
    assert win["state_rows_total"].max() < progress["state_rows_total"].max()
    assert growth_warning(win, windowed.spec) is None

    growth = state_growth({"running": progress, "TTL 3 s": ttl_progress, "windowed": win})
    assert set(growth["query"]) == {"running", "TTL 3 s", "windowed"}
    chart = sk.charts.state_growth_chart(growth).to_dict()
    assert chart["mark"]["type"] == "line"


def test_growth_warnings_name_their_cause():
    spec = sk.QuerySpec(keys=["user"], window=sk.tumbling("1 minute"), watermark="30 seconds")
    stalled = pd.DataFrame({"batch": range(6), "input_rows": [10] * 6,
                            "state_rows_total": [1, 2, 3, 4, 5, 6],
                            "state_rows_removed": [0] * 6,
                            "watermark": [pd.Timestamp("2026-01-05 10:00")] * 6})
    assert "watermark has not moved for 5 batches" in growth_warning(stalled, spec)
    moving = stalled.assign(watermark=pd.date_range("2026-01-05", periods=6, freq="1min"))
    assert "no window has closed yet" in growth_warning(moving, spec)
    bounded = stalled.assign(state_rows_removed=[0, 1, 1, 1, 1, 1])
    assert growth_warning(bounded, spec) is None
    assert growth_warning(stalled.head(3), spec) is None  # too few batches to tell
    ttl = sk.QuerySpec(keys=["user"], window=None, ttl="1 minute")
    assert "within the TTL (1 minute)" in growth_warning(stalled, ttl)
    with pytest.raises(sk.BadArgument, match="batches: 1"):
        growth_warning(stalled, spec, batches=1)
    with pytest.raises(sk.BadArgument, match="missing column 'state_rows_removed'"):
        growth_warning(stalled.drop(columns="state_rows_removed"), spec)


def test_a_ttl_needs_a_running_aggregate():
    with pytest.raises(sk.BadArgument, match="ttl: '1 minute'; accepted: None for a windowed"):
        sk.QuerySpec(keys=["user"], window=sk.tumbling("1 minute"), ttl="1 minute")
    with pytest.raises(sk.BadArgument, match="bad ttl: 'soon'"):
        sk.QuerySpec(keys=["user"], window=None, ttl="soon")
    spec = sk.QuerySpec(keys=["user"], window=None, ttl="1 minute")
    assert (spec.kind, spec.store_kind, spec.windowed, spec.key_columns) == (
        "running", "key-value", False, ["user"])
    assert sk.QuerySpec.from_dict(spec.to_dict()) == spec
