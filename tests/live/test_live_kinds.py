"""statekit.attach on more kinds of stateful operator, each a plain PySpark job fed from
JSON files (one file a batch, at least five batches):

- ``applyInPandasWithState`` (group state);
- a plain ``dropDuplicates`` (no watermark: its keys are kept for good) before a
  left-outer stream-stream join.

(``transformWithStateInPandas``: tests/live/test_live_tws.py.) For each: the state equals a
pandas computation over the same input, every shipped part's changelog replays to its snapshot
(a join side's: one record per key, its whole list), and a routed ``get`` of every key answers
its entry where Spark placed it.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path

import pandas as pd
import pytest
from helpers.eventfiles import EVENTS, FILES, T0, in_order, write_events
from helpers.livecheck import assert_replays_to_snapshot, assert_routed_gets_equal_snapshot
from pyspark import cloudpickle
from pyspark.sql import functions as F
from pyspark.sql.streaming.state import GroupStateTimeout

import statekit as sk

# Spark's Python workers cannot import this test module: send its functions by value
cloudpickle.register_pickle_by_value(sys.modules[__name__])

pytestmark = pytest.mark.timeout(600)

PROFILES = "player string, team string, pts timestamp"


def _attached_until_drained(query, broker, base: Path, events: pd.DataFrame):
    """Attach (a changelog per part), let the query read all its input and ship it; give
    (live, events, last batch); detach and stop after."""
    live = sk.attach(query, kafka=broker, ledger_dir=base / "ledgers")
    try:
        query.processAllAvailable()
        last = live.wait_shipped()
        yield live, events, last
    finally:
        live.close()
        query.stop()


def _count_and_sum(key, frames, state):
    n, total = state.get if state.exists else (0, 0)
    for frame in frames:
        n, total = n + len(frame), total + int(frame["score"].sum())
    state.update((n, total))
    yield pd.DataFrame({"player": [key[0]], "n": [n], "total": [total]})


@pytest.fixture(scope="module")
def group_state(spark, broker, tmp_path_factory):
    base = tmp_path_factory.mktemp("group-state")
    events = write_events(base / "events")
    query = (spark.readStream.schema(EVENTS).option("maxFilesPerTrigger", 1)
             .json(str(base / "events")).groupBy("player")
             .applyInPandasWithState(_count_and_sum, "player string, n long, total long",
                                     "n long, total long", "update",
                                     GroupStateTimeout.NoTimeout)
             .writeStream.format("noop").outputMode("update").queryName("group_state")
             .option("checkpointLocation", str(base / "ck"))
             .trigger(processingTime="200 milliseconds").start())
    yield from _attached_until_drained(query, broker, base, events)


def test_group_state_equals_pandas_and_its_changelog_replays(group_state, tmp_path):
    live, events, last = group_state
    assert last >= FILES - 1
    [part] = live.states()["part"]
    snap = live.snapshot(part, last)
    sent = pd.concat([events, events.groupby(events.index // 12).head(2).iloc[:-2]])
    counts = sent.groupby("player")["score"].agg(["size", "sum"])
    n = [c for c in snap.columns if c.endswith("n")][0]
    total = [c for c in snap.columns if c.endswith("total")][0]
    assert {p: (a, b) for p, a, b in zip(snap["player"], snap[n], snap[total], strict=True)} \
        == {p: (int(r["size"]), int(r["sum"])) for p, r in counts.iterrows()}
    assert_replays_to_snapshot(live, part, last)
    assert_replays_to_snapshot(live, part, 1)
    assert_routed_gets_equal_snapshot(live, part, tmp_path)


# --- dropDuplicates, then a left-outer join ------------------------------------------------------
@pytest.fixture(scope="module")
def outer(spark, broker, tmp_path_factory):
    base = tmp_path_factory.mktemp("outer")
    events = write_events(base / "events").drop_duplicates("event_id")
    (base / "profiles").mkdir()
    for i in range(FILES):
        rows = [{"player": f"p{j}", "team": ["red", "blue"][(i + j) % 2],
                 "pts": (T0 + dt.timedelta(minutes=5 * i, seconds=30)).isoformat()}
                for j in range(3)]   # p3 never has a profile: its events stay unmatched
        (base / "profiles" / f"p{i:02d}.json").write_text(
            "".join(json.dumps(r) + "\n" for r in rows))
        in_order(base / "profiles" / f"p{i:02d}.json", i)
    left = (spark.readStream.schema(EVENTS).option("maxFilesPerTrigger", 1)
            .json(str(base / "events")).dropDuplicates(["event_id"])
            .withWatermark("ts", "10 minutes").withColumnRenamed("player", "who"))
    right = (spark.readStream.schema(PROFILES).option("maxFilesPerTrigger", 1)
             .json(str(base / "profiles")).withWatermark("pts", "10 minutes"))
    joined = left.join(right, F.expr("who = player AND ts BETWEEN pts - INTERVAL 1 MINUTE "
                                      "AND pts + INTERVAL 1 MINUTE"), "leftOuter")
    query = (joined.writeStream.format("noop").outputMode("append").queryName("outer")
             .option("checkpointLocation", str(base / "ck"))
             .trigger(processingTime="200 milliseconds").start())
    yield from _attached_until_drained(query, broker, base, events)


def test_plain_dedup_keeps_every_id_and_the_outer_join_marks_what_matched(outer):
    live, events, last = outer
    parts = set(live.states()["part"])
    dedup = next(p for p in parts if p.endswith("/default"))
    assert set(live.snapshot(dedup, last)["event_id"]) == set(events["event_id"])
    side = next(p for p in parts if p.endswith("/left-keyWithIndexToValue"))
    held = live.snapshot(side, last)
    assert len(held) > 0
    matched = held["matched"].astype(bool)
    # p3 has no profile: none of its rows matched; every other player's rows sit within a
    # minute of a profile
    assert not matched[held["who"] == "p3"].any()
    within = (held["ts"] - T0).dt.total_seconds() % 300 <= 90
    assert (matched == ((held["who"] != "p3") & within)).all()


def test_outer_join_changelogs_replay_and_its_left_side_serves_lists(outer, tmp_path):
    live, _, last = outer
    for part in live.changelog_topics():
        assert_replays_to_snapshot(live, part, last)
    side = next(p for p in live.changelog_topics() if p.endswith("/left"))
    assert live.part_shape(side).lists
    assert_routed_gets_equal_snapshot(live, side, tmp_path)
