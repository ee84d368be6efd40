"""The cost of a hop, measured: a local get and the routing client's get for the same keys."""

from __future__ import annotations

import pytest

from statekit.errors import BadArgument
from statekit.model.query_spec import QuerySpec, tumbling
from statekit.serve.hop_latency import LOCAL, REMOTE, point_read_latencies
from statekit.serve.routing.key_codec import KeyCodec
from statekit.stores import InMemoryWindowStore


class _Answer:
    def __init__(self, rows):
        self.rows = rows


class _Client:
    """A routing client's codec and a ``get`` that answers from a dict, counting calls."""

    def __init__(self, codec, rows):
        self.codec, self.rows, self.calls = codec, rows, 0

    def get(self, key):
        self.calls += 1
        return _Answer([self.rows[key["player"]]] if key["player"] in self.rows else [])


def test_each_held_key_is_read_both_ways(tmp_path):
    codec = KeyCodec(QuerySpec(keys=["player"], window=tumbling("10 minutes")),
                     {"player": "string"}, partitions=3)
    keys = [{"player": f"p{i:02d}", "window_start": "2026-01-05T10:00:00Z"} for i in range(12)]
    held = sorted({codec.partition(codec.key(k)) for k in keys})[:2]
    stores = {}
    for p in held:
        stores[p] = InMemoryWindowStore(f"s{p}", p, key_columns=["player"],
                                        value_columns=["count"], window_size_ms=600_000)
    for key in keys:
        full = codec.key(key)
        store = stores.get(codec.partition(full))
        if store is not None:
            store.write_raw([(codec.store_key(full), b'{"count":1}')])
    client = _Client(codec, {k["player"]: {"count": 1} for k in keys})
    times = point_read_latencies(client, stores, keys, repeat=2)
    mine = [k for k in keys if codec.partition(codec.key(k)) in stores]
    assert len(times) == 2 * 2 * len(mine) and client.calls == 2 * len(mine)
    assert set(times["kind"]) == {LOCAL, REMOTE} and times["found"].all()
    assert (times["seconds"] > 0).all()
    assert times.attrs["skipped"] == len(keys) - len(mine)


def test_no_stores_or_a_bad_repeat_is_named():
    with pytest.raises(BadArgument, match="restore_stores"):
        point_read_latencies(object(), {}, [])
    with pytest.raises(BadArgument, match="repeat"):
        point_read_latencies(object(), {0: object()}, [], repeat=0)
