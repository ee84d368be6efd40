"""Pure tests of the table reading, the clean-up job's rule and the TopK shape (no Spark)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from statekit.datasets.departures import with_departures
from statekit.errors import BadArgument
from statekit.monitor.growth import arriving_users
from statekit.processor.cleanup_job import IdleKeyCleanup
from statekit.processor.table_stream import (
    DELETED,
    RECORD_TIME,
    KeyedTotals,
    keyed_totals_reference,
)
from statekit.processor.top_k import TopK, TopScores, top_k_store, top_scores_reference


class FakeKV:
    """A key-value store as a processor sees it, in a dict (spec from the real declaration)."""

    def __init__(self, spec):
        self.spec, self.name, self.data = spec, spec.name, {}

    def get(self, key):
        return self.data.get(key)

    def put(self, key, value):
        names = [f.name for f in self.spec.value]
        self.data[key] = value if isinstance(value, dict) else dict(zip(names, value, strict=True))

    def delete(self, key):
        return self.data.pop(key, None)

    def all(self):
        return sorted(self.data.items())


def test_with_departures_puts_a_tombstone_after_each_users_last_event():
    users = arriving_users(events=45, per_user=20)
    left = with_departures(users).records
    assert len(left) == 48 and left["value"].isna().sum() == 3
    for _, group in left.groupby("key"):
        assert group["value"].iloc[-1] is None
        assert group["value"].iloc[:-1].notna().all()
    assert left.index[left["value"].isna()].tolist() == [20, 41, 47]
    with pytest.raises(BadArgument, match="Dataset"):
        with_departures(pd.DataFrame())


def test_keyed_totals_deletes_on_a_tombstone_and_matches_pandas():
    users = with_departures(arriving_users(events=45, per_user=20)).records
    values = users["value"].dropna().map(json.loads)
    events = pd.DataFrame(list(values))
    events["ts"] = pd.to_datetime(events["ts"]).dt.tz_localize(None)
    assert keyed_totals_reference(users, events).empty      # every user left
    processor = KeyedTotals()
    store = FakeKV(processor.stores()[0])
    processor.init({"totals": store})
    rows = events[events.user == "u0001"].assign(**{DELETED: False, RECORD_TIME: 1})
    processor.process("u0001", rows)
    assert list(store.data.values())[0]["events"] == 20
    out = processor.process("u0001", pd.DataFrame({"user": ["u0001"], "score": [None],
                                                   "ts": [pd.NaT], DELETED: [True],
                                                   RECORD_TIME: [2]}))
    assert store.data == {} and out["entries"].tolist() == [1]
    kept = keyed_totals_reference(users.iloc[:-1], events)   # the last tombstone not read
    assert kept["user"].tolist() == ["u0002"] and kept["events"].tolist() == [5]


def test_the_cleanup_job_picks_keys_idle_by_event_time_once():
    job = IdleKeyCleanup(None, "totals", None, "t", key="user", idle="1 minute")
    snap = pd.DataFrame({"user": ["a", "b", "c"],
                         "last_seen": pd.to_datetime(["2026-01-05 10:00:00", "2026-01-05 10:01:30",
                                                      "2026-01-05 10:02:00"])})
    assert job.stale(snap) == ["a"]
    job._sent.add("a")
    assert job.stale(snap) == [] and job.stale(snap.iloc[:0]) == []
    assert list(job.history().columns) == ["pass", "after_batch", "rows", "stale_keys",
                                           "tombstones_sent"]
    with pytest.raises(BadArgument, match="idle"):
        IdleKeyCleanup(None, "totals", None, "t", key="user", idle="soon")


def test_top_k_keeps_the_k_best_and_matches_pandas():
    processor = TopScores(k=2)
    store = FakeKV(processor.stores()[0])
    processor.init({"top": store})
    events = pd.DataFrame({"player": ["p"] * 4, "game": ["g1", "g2", "g3", "g4"],
                           "score": [5, 9, 7, 9], "ts": pd.date_range("2026-01-05", periods=4,
                                                                      freq="min")})
    processor.process("p", events)
    assert [v["score"] for _, v in store.all()] == [9, 9]
    assert [v["game"] for _, v in store.all()] == ["g2", "g4"]
    assert top_scores_reference(events, k=2)["score"].tolist() == [9, 9]
    assert top_k_store("top", 3, "game string").layout(["player"]).key_columns == \
        ("player", "rank")
    with pytest.raises(BadArgument):
        TopK(FakeKV(KeyedTotals().stores()[0]), 2)
    with pytest.raises(BadArgument):
        TopScores(k=0)


def test_lookup_costs_rank_local_before_the_service():
    from statekit.stores.lookup_cost import lookup_costs

    costs = lookup_costs({"p1": "1", "p2": "2"}, ["p1", "p2"] * 100, repeat=1)
    us = dict(zip(costs["where"], costs["us_per_lookup"], strict=True))
    assert us["local RocksDB"] < us["service over HTTP (loopback)"]
    with pytest.raises(BadArgument, match="p3"):
        lookup_costs({"p1": "1"}, ["p3"])
