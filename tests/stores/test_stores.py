"""Local state stores: key-value, window and session stores in memory and in real RocksDB
directories (rocksdict, in pytest's tmp_path); no Spark, no broker."""

from __future__ import annotations

import json
import random
import warnings

import pandas as pd
import pytest

from statekit.errors import BadArgument, StatekitError
from statekit.model.changelog_record import encode_json, encode_key
from statekit.model.query_spec import QuerySpec, session, tumbling
from statekit.stores import (
    STORE_FORMAT_VERSION,
    ChangelogJsonSerde,
    InMemoryKeyValueStore,
    KeyValueStore,
    RocksDBKeyValueStore,
    RocksDBWindowStore,
    Session,
    SessionStore,
    StoreClosed,
    StoreCorrupt,
    StoreLocked,
    StoreMismatch,
    WindowedKey,
    WindowStore,
    open_store,
)
from statekit.stores.key_layout import MAX_TIME_MS, iso_to_ms, ms_to_iso, successor
from statekit.stores.metadata_file import METADATA_FILE
from statekit.stores.offset_checkpoint import CHECKPOINT_FILE

MIN = 60_000
T0 = iso_to_ms("2026-01-05T10:00:00.000Z")
BACKENDS = ["memory", "rocksdb"]


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    return request.param


@pytest.fixture()
def make(backend, tmp_path):
    """``make(kind, name=..., partition=..., **columns)``: a store on this test's backend."""
    opened = []

    def _make(kind, name="counts", partition=0, **kwargs):
        path = None if backend == "memory" else tmp_path / f"{name}-{partition}"
        store = open_store(kind, name, partition, path, **kwargs)
        opened.append(store)
        return store

    yield _make
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        for store in opened:
            store.close()


def kv(make, **kwargs):
    return make("key-value", key_columns=["player"], value_columns=["total"], **kwargs)


def players(it) -> list[str]:
    with it:
        return [key["player"] for key, _ in it]


# --- key-value store ---------------------------------------------------------------------
def test_key_value_get_put_delete(make):
    store = kv(make)
    assert isinstance(store, KeyValueStore)
    assert store.get({"player": "p07"}) is None
    store.put({"player": "p07"}, {"total": 5})
    store.put({"player": "p08"}, {"total": 1})
    assert store.get({"player": "p07"}) == {"total": 5}
    store.put({"player": "p07"}, {"total": 6})
    assert store.get({"player": "p07"}) == {"total": 6}
    assert store.delete({"player": "p07"}) == {"total": 6}
    assert store.delete({"player": "p07"}) is None
    assert store.get({"player": "p07"}) is None
    store.put({"player": "p08"}, None)  # put None deletes, as in Kafka Streams
    assert store.get({"player": "p08"}) is None
    assert players(store.all()) == []


def test_key_value_range_bounds_are_inclusive(make):
    store = kv(make)
    assert store.put_all(({"player": f"p0{i}"}, {"total": i}) for i in (5, 1, 3, 2, 4)) == 5
    p = [{"player": f"p0{i}"} for i in range(7)]
    assert players(store.range(p[2], p[4])) == ["p02", "p03", "p04"]
    assert players(store.range(p[3], p[3])) == ["p03"]
    assert players(store.range(None, p[2])) == ["p01", "p02"]
    assert players(store.range(p[4], None)) == ["p04", "p05"]
    assert players(store.range(p[0], p[6])) == ["p01", "p02", "p03", "p04", "p05"]
    assert players(store.all()) == ["p01", "p02", "p03", "p04", "p05"]
    with store.range(p[2], p[2]) as it:
        assert list(it) == [({"player": "p02"}, {"total": 2})]
    with pytest.raises(BadArgument, match="from_key"):
        store.range(p[4], p[2])


def test_key_value_prefix_scan(make):
    store = make("key-value", key_columns=["region", "player"], value_columns=["total"])
    rows = [("eu", "p1"), ("eu", "p2"), ("eux", "p3"), ("us", "p1"), ("e", "p9")]
    store.put_all(({"region": r, "player": p}, {"total": 1}) for r, p in rows)
    with store.prefix_scan({"region": "eu"}) as it:
        assert [(k["region"], k["player"]) for k, _ in it] == [("eu", "p1"), ("eu", "p2")]
    with store.prefix_scan({"region": "eu", "player": "p2"}) as it:
        assert [k for k, _ in it] == [{"region": "eu", "player": "p2"}]
    with store.prefix_scan(b'{"region":"eu') as it:  # raw bytes: a byte prefix
        assert [k["region"] for k, _ in it] == ["eu", "eu", "eux"]
    with store.prefix_scan({}) as it:
        assert len(list(it)) == 5
    with pytest.raises(BadArgument, match="leading key columns"):
        store.prefix_scan({"player": "p1"})


def test_key_value_keys_are_changelog_keys_and_to_pandas(make):
    store = make("key-value", key_columns=["window_start", "player"], value_columns=["total"])
    row = {"player": "p07", "window_start": pd.Timestamp("2026-01-05 10:00")}
    store.write_raw([(encode_key(row, ["window_start", "player"]), b'{"total":3}')])
    assert store.get({"player": "p07", "window_start": "2026-01-05T10:00:00.000Z"}) == {"total": 3}
    frame = store.to_pandas()
    assert list(frame.columns) == ["player", "window_start", "total"]
    assert frame["window_start"].dtype == "datetime64[ns]"
    assert frame.iloc[0].to_dict() == {"player": "p07", "window_start": row["window_start"],
                                       "total": 3}


def test_write_raw_applies_puts_and_tombstones_in_order(make):
    store = kv(make)
    store.put({"player": "old"}, {"total": 0})
    records = [(b'{"player":"a"}', b'{"total":1}'), (b'{"player":"b"}', b'{"total":2}'),
               (b'{"player":"a"}', b'{"total":10}'), (b'{"player":"old"}', None),
               (b'{"player":"never"}', None), (b'{"player":"c"}', b'{"total":3}'),
               (b'{"player":"c"}', None)]
    assert store.write_raw(iter(records)) == 7
    assert players(store.all()) == ["a", "b"]
    assert store.get({"player": "a"}) == {"total": 10}
    assert store.to_pandas().to_dict("list") == {"player": ["a", "b"], "total": [10, 2]}
    assert store.write_raw([]) == 0


def test_write_raw_in_many_batches(make, backend):
    store = kv(make)
    if backend == "rocksdb":
        store._backend.batch_size = 7  # several write batches and a partial last one
    n = 100
    assert store.write_raw((b'{"player":"p%03d"}' % i, b'{"total":%d}' % i) for i in range(n)) == n
    assert store.write_raw((b'{"player":"p%03d"}' % i, None) for i in range(0, n, 2)) == n // 2
    with store.all() as it:
        assert [v["total"] for _, v in it] == list(range(1, n, 2))


def test_compact_after_a_bulk_load_keeps_every_entry_in_one_sorted_run(make, backend):
    store = kv(make)
    n = 3000
    store.write_raw((b'{"player":"p%05d"}' % i, b'{"total":%d}' % i) for i in range(n))
    store.write_raw((b'{"player":"p%05d"}' % i, None) for i in range(0, n, 3))
    before = store.to_pandas()
    store.compact()
    pd.testing.assert_frame_equal(store.to_pandas(), before)
    assert store.get({"player": "p00001"}) == {"total": 1} and store.get({"player": "p00000"}) \
        is None
    if backend == "rocksdb":  # flushed and compacted: nothing in memory or in level 0
        db = store._backend._db
        assert db.property_int_value("rocksdb.num-entries-active-mem-table") == 0
        assert db.property_int_value("rocksdb.num-files-at-level0") == 0


def test_compact_reads_a_rocksdb_store_into_the_shared_block_cache(tmp_path, monkeypatch):
    from statekit.stores import rocksdb

    cache = rocksdb.shared_block_cache()
    records = [(b'{"player":"p%06d"}' % i, b'{"total":%d}' % i) for i in range(20_000)]
    size = sum(len(k) + len(v) for k, v in records)

    def loaded_then_compacted(name: str) -> int:
        store = open_store("key-value", name, 0, tmp_path / name, key_columns=["player"])
        store.write_raw(records)
        before = cache.get_usage()
        store.compact()
        grown = cache.get_usage() - before
        assert store.get({"player": "p000007"}) == {"total": 7}
        store.close()
        return grown

    # warmed: its blocks were read once, so the first point reads come from memory
    assert loaded_then_compacted("warm") > size // 2
    monkeypatch.setattr(rocksdb, "BLOCK_CACHE_BYTES", size // 16)  # larger than half of it
    assert loaded_then_compacted("too-big") < size // 4


def test_bad_raw_record_is_named_and_earlier_records_are_written(make):
    store = kv(make)
    good = (b'{"player":"a"}', b'{"total":1}')
    for bad in [("text key", b"{}"), (b'{"player":"b"}', "text value"), (b"k",), 42]:
        with pytest.raises(BadArgument, match=r"raw record #1") as err:
            store.write_raw([good, bad, (b'{"player":"z"}', b'{"total":9}')])
        assert "bytes" in str(err.value)
        assert store.get({"player": "a"}) == {"total": 1}
        assert store.get({"player": "z"}) is None


def test_put_all_passes_serde_errors_through(make):
    store = kv(make)
    with pytest.raises(BadArgument, match="bad key: .*columns player"):
        store.put_all([({"player": "a"}, {"total": 1}), ({"who": "b"}, {"total": 2})])
    assert store.get({"player": "a"}) == {"total": 1}


def test_approximate_num_entries(make, backend):
    store = kv(make)
    assert store.approximate_num_entries() == 0
    store.put_all(({"player": f"p{i:02d}"}, {"total": i}) for i in range(10))
    assert store.approximate_num_entries() == 10
    for i in range(3):
        store.delete({"player": f"p{i:02d}"})
    if backend == "memory":
        assert store.approximate_num_entries() == 7
    else:  # RocksDB's estimate-num-keys: an estimate once deletes are involved
        assert 0 <= store.approximate_num_entries() <= 10


def test_random_operations_match_a_sorted_dict(make):
    """Puts, deletes and raw writes, interleaved with scans (memory: lazy re-sorting)."""
    store = kv(make)
    rng, model = random.Random(7), {}
    for step in range(3000):
        name = f"p{rng.randrange(400):03d}"
        op = rng.random()
        if op < 0.5:
            store.put({"player": name}, {"total": step})
            model[name] = step
        elif op < 0.7:
            store.delete({"player": name})
            model.pop(name, None)
        elif op < 0.75:
            batch = [(f"p{rng.randrange(400):03d}", rng.choice([None, step])) for _ in range(1500)]
            store.write_raw((encode_json({"player": n}, ["player"]),
                             None if v is None else encode_json({"total": v}, ["total"]))
                            for n, v in batch)
            for n, v in batch:
                if v is None:
                    model.pop(n, None)
                else:
                    model[n] = v
        if step % 150 == 0:
            lo, hi = sorted(f"p{rng.randrange(400):03d}" for _ in range(2))
            with store.range({"player": lo}, {"player": hi}) as it:
                assert [(k["player"], v["total"]) for k, v in it] == sorted(
                    (k, v) for k, v in model.items() if lo <= k <= hi)
    with store.all() as it:
        assert [(k["player"], v["total"]) for k, v in it] == sorted(model.items())


# --- window store ------------------------------------------------------------------------
SPEC = QuerySpec(keys=["player"], window=tumbling("10 minutes"),
                 aggregates=["count", "max(score)"])


def window_store(make, **kwargs):
    return make("window", key_columns=SPEC.key_columns, value_columns=SPEC.value_columns,
                window_size_ms=10 * MIN, **kwargs)


def test_window_fetch_bounds_are_inclusive_and_per_key(make):
    store = window_store(make)
    assert isinstance(store, WindowStore)
    assert store.key_columns == ("player", "window_start", "window_end")
    for player in ("p0", "p07", "p08"):  # "p0" and "p07": one group key a prefix of another
        for i in range(4):
            store.put({"player": player}, {"count": i, "max_score": 10 * i}, T0 + i * 10 * MIN)

    def fetch(player, start, end):
        with store.fetch({"player": player}, start, end) as it:
            return list(it)

    assert fetch("p07", T0 + 10 * MIN, T0 + 20 * MIN) == [
        (T0 + 10 * MIN, {"count": 1, "max_score": 10}),
        (T0 + 20 * MIN, {"count": 2, "max_score": 20})]
    assert fetch("p07", T0 + 10 * MIN + 1, T0 + 20 * MIN - 1) == []
    assert fetch("p07", T0 + 30 * MIN, T0 + 30 * MIN) == [(T0 + 30 * MIN,
                                                          {"count": 3, "max_score": 30})]
    assert [s for s, _ in fetch("p0", 0, MAX_TIME_MS)] == [T0 + i * 10 * MIN for i in range(4)]
    assert fetch("p09", 0, MAX_TIME_MS) == []
    store.put({"player": "p07"}, None, T0 + 20 * MIN)  # None deletes the window
    assert [s for s, _ in fetch("p07", 0, MAX_TIME_MS)] == [T0, T0 + 10 * MIN, T0 + 30 * MIN]


def test_window_keys_are_changelog_key_bytes(make):
    store = window_store(make)
    start = pd.Timestamp("2026-01-05 10:00")
    row = {"player": "p07", "window_start": start, "window_end": start + pd.Timedelta("10min"),
           "count": 3, "max_score": 9}
    key, value = encode_key(row, SPEC.key_columns), encode_json(row, SPEC.value_columns)
    store.write_raw([(key, value)])
    with store.fetch({"player": "p07"}, T0, T0) as it:
        assert list(it) == [(T0, {"count": 3, "max_score": 9})]
    store.put({"player": "p07"}, {"count": 4, "max_score": 9}, T0)  # the same key bytes
    assert len(store.to_pandas()) == 1
    store.write_raw([(key, None)])  # a changelog tombstone deletes the typed put
    assert store.approximate_num_entries() == 0 or store.to_pandas().empty


def test_window_fetch_all_and_all(make):
    store = window_store(make)
    for player, minute in [("p08", 0), ("p07", 10), ("p07", 0), ("p08", 20), ("p07", 30)]:
        store.put({"player": player}, {"count": minute, "max_score": 1}, T0 + minute * MIN)
    with store.fetch_all(T0 + 10 * MIN, T0 + 20 * MIN) as it:
        found = list(it)
    assert found == [(WindowedKey({"player": "p07"}, T0 + 10 * MIN), {"count": 10, "max_score": 1}),
                     (WindowedKey({"player": "p08"}, T0 + 20 * MIN), {"count": 20, "max_score": 1})]
    assert found[0][0] == ({"player": "p07"}, T0 + 10 * MIN)  # a plain (key, start) tuple too
    with store.all() as it:
        assert [(k.key["player"], (k.start - T0) // MIN) for k, _ in it] == [
            ("p07", 0), ("p07", 10), ("p07", 30), ("p08", 0), ("p08", 20)]
    frame = store.to_pandas()
    assert list(frame.columns) == ["player", "window_start", "window_end", "count", "max_score"]
    assert frame["window_start"].dtype == frame["window_end"].dtype == "datetime64[ns]"
    assert (frame["window_end"] - frame["window_start"] == pd.Timedelta("10min")).all()
    assert frame["window_start"].iloc[0] == pd.Timestamp("2026-01-05 10:00")


def test_window_store_without_window_end(make):
    store = make("window", key_columns=["player"], value_columns=["count"])
    assert store.key_columns == ("player", "window_start")
    store.put({"player": "p07"}, {"count": 1}, T0)
    assert store.to_pandas().to_dict("list") == {
        "player": ["p07"], "window_start": [pd.Timestamp("2026-01-05 10:00")], "count": [1]}


def test_window_typed_put_needs_the_window_size(make):
    store = make("window", key_columns=SPEC.key_columns, value_columns=SPEC.value_columns)
    with pytest.raises(BadArgument, match="window_size_ms"):
        store.put({"player": "p07"}, {"count": 1, "max_score": 1}, T0)


@pytest.mark.parametrize(("time_from", "time_to", "match"), [
    (-1, 10, "time_from"), (0, -5, "time_to"), (20, 10, "time_from.*no later than"),
    (1.5, 10, "time_from"), ("0", 10, "time_from"), (True, 10, "time_from"),
    (0, MAX_TIME_MS + 1, "time_to"),
])
def test_window_bad_time_ranges(make, time_from, time_to, match):
    store = window_store(make)
    with pytest.raises(BadArgument, match=match):
        store.fetch({"player": "p07"}, time_from, time_to)
    with pytest.raises(BadArgument, match=match):
        store.fetch_all(time_from, time_to)


def test_window_bad_put(make):
    store = window_store(make)
    with pytest.raises(BadArgument, match="window_start_ms"):
        store.put({"player": "p07"}, {"count": 1, "max_score": 1}, -10)
    with pytest.raises(BadArgument, match="bad key.*columns player"):
        store.put({"player": "p07", "team": "x"}, {"count": 1, "max_score": 1}, T0)
    with pytest.raises(BadArgument, match="bad value.*count, max_score"):
        store.put({"player": "p07"}, {"count": 1}, T0)


# --- session store -----------------------------------------------------------------------
SESSION_SPEC = QuerySpec(keys=["player"], window=session("5 minutes"), aggregates=["count"])


def session_store(make, name="counts", **kwargs):
    return make("session", name, key_columns=SESSION_SPEC.key_columns,
                value_columns=SESSION_SPEC.value_columns, **kwargs)


def test_find_sessions_overlapping_as_in_kafka_streams(make):
    store = session_store(make)
    assert isinstance(store, SessionStore)
    assert store.key_columns == ("player", "window_start")
    assert store.value_columns == ("window_end", "count")
    s = 1000
    for start, end in [(0, 10), (20, 30), (40, 50)]:
        store.put(Session({"player": "p07"}, start * s, end * s), {"count": start})
        store.put(Session({"player": "p0"}, start * s, end * s), {"count": -start})

    def find(earliest_end, latest_start, player="p07"):
        with store.find_sessions({"player": player}, earliest_end * s, latest_start * s) as it:
            return [(k.start // s, k.end // s) for k, _ in it]

    assert find(25, 45) == [(20, 30), (40, 50)]
    assert find(30, 40) == [(20, 30), (40, 50)]  # both bounds inclusive
    assert find(31, 39) == []
    assert find(0, 100) == [(0, 10), (20, 30), (40, 50)]
    assert find(51, 100) == []
    assert find(30, 20) == [(20, 30)]  # sessions spanning [20, 30]
    assert find(0, 100, "p09") == []
    with store.find_sessions({"player": "p07"}, 25 * s, 25 * s) as it:
        assert list(it) == [(Session({"player": "p07"}, 20 * s, 30 * s), {"count": 20})]


def test_session_remove_fetch_and_all(make):
    store = session_store(make)
    store.put(Session({"player": "p08"}, 5000, 9000), {"count": 2})
    store.put(Session({"player": "p07"}, 0, 4000), {"count": 1})
    store.put(({"player": "p07"}, 10_000, 12_000), {"count": 3})  # a plain tuple is a session
    with store.fetch({"player": "p07"}) as it:
        assert list(it) == [(({"player": "p07"}, 0, 4000), {"count": 1}),
                            (({"player": "p07"}, 10_000, 12_000), {"count": 3})]
    assert store.fetch_session({"player": "p07"}, 10_000, 12_000) == {"count": 3}
    assert store.fetch_session({"player": "p07"}, 10_000, 12_001) is None  # another end
    assert store.fetch_session({"player": "p09"}, 10_000, 12_000) is None
    store.remove(Session({"player": "p07"}, 0, 3999))  # another session: nothing removed
    store.remove(Session({"player": "p07"}, 50_000, 60_000))
    with store.all() as it:
        assert [(k.key["player"], k.start) for k, _ in it] == [
            ("p07", 0), ("p07", 10_000), ("p08", 5000)]
    store.remove(Session({"player": "p07"}, 0, 4000))
    with store.fetch({"player": "p07"}) as it:
        assert [k.start for k, _ in it] == [10_000]
    store.put(Session({"player": "p08"}, 5000, 8999), None)  # another session: kept
    assert store.fetch_session({"player": "p08"}, 5000, 9000) == {"count": 2}
    store.put(Session({"player": "p08"}, 5000, 9000), None)  # None removes, as remove()
    with store.fetch({"player": "p08"}) as it:
        assert list(it) == []


def test_session_old_spellings_warn_and_do_the_same(make):
    """put(key, start, end, value), remove(key, start, end) and the name SessionKey: kept one
    release, each with a DeprecationWarning naming the new spelling."""
    old, new = session_store(make, "old"), session_store(make, "new")
    p07 = {"player": "p07"}
    with pytest.warns(DeprecationWarning, match=r"put\(Session\(key, start, end\), value\)"):
        old.put(p07, 0, 4000, {"count": 1})
    with pytest.warns(DeprecationWarning):
        old.put(p07, 10_000, 12_000, {"count": 3})
    new.put(Session(p07, 0, 4000), {"count": 1})
    new.put(Session(p07, 10_000, 12_000), {"count": 3})
    assert old.to_pandas().equals(new.to_pandas())
    with pytest.warns(DeprecationWarning, match=r"remove\(Session\(key, start, end\)\)"):
        old.remove(p07, 0, 4000)
    new.remove(Session(p07, 0, 4000))
    assert old.to_pandas().equals(new.to_pandas()) and len(new.to_pandas()) == 1
    with pytest.warns(DeprecationWarning, match="SessionKey .*use statekit.stores.Session"):
        from statekit.stores import SessionKey
    with pytest.warns(DeprecationWarning, match="use statekit.stores.base.Session"):
        from statekit.stores.base import SessionKey as base_name
    assert SessionKey is base_name is Session
    with pytest.raises(BadArgument, match=r"bad put arguments: \(\{'player': 'p07'\}, 0, "
                                          r"4000\).*put\(session, value\)"):
        old.put(p07, 0, 4000)  # the old spelling without its value
    with pytest.raises(BadArgument, match=r"bad remove arguments.*remove\(session\)"):
        old.remove(p07, 0)


def test_session_store_reads_changelog_records(make):
    store = session_store(make)
    key_columns = SESSION_SPEC.key_columns  # ["window_start", "player"] → changelog order
    start = pd.Timestamp("2026-01-05 10:00")
    rows = [{"player": "p07", "window_start": start, "window_end": start + pd.Timedelta("4min"),
             "count": 4},
            {"player": "p07", "window_start": start + pd.Timedelta("30min"),
             "window_end": start + pd.Timedelta("31min"), "count": 1}]
    store.write_raw((encode_key(r, key_columns), encode_json(r, SESSION_SPEC.value_columns))
                    for r in rows)
    with store.find_sessions({"player": "p07"}, T0 + 4 * MIN, T0 + 4 * MIN) as it:
        assert list(it) == [(Session({"player": "p07"}, T0, T0 + 4 * MIN), {"count": 4})]
    assert store.fetch_session({"player": "p07"}, T0 + 30 * MIN, T0 + 31 * MIN) == {"count": 1}
    store.put(Session({"player": "p07"}, T0, T0 + 6 * MIN), {"count": 5})  # same key bytes
    frame = store.to_pandas()
    assert list(frame.columns) == ["player", "window_start", "window_end", "count"]
    assert frame["window_end"].tolist() == [start + pd.Timedelta("6min"),
                                            start + pd.Timedelta("31min")]
    assert frame["count"].tolist() == [5, 1]
    store.write_raw([(encode_key(rows[1], key_columns), None)])
    assert len(store.to_pandas()) == 1


@pytest.mark.parametrize(("session", "message"), [
    (Session({"player": "p07"}, 5000, 1000),
     r"bad session: Session\(key=\{'player': 'p07'\}, start=5000, end=1000\); accepted: a "
     r"session that ends at or after its start"),
    ({"player": "p07"}, r"bad session: \{'player': 'p07'\}; accepted: a Session\(key, start, "
                        r"end\)"),
    (({"player": "p07"}, 0), r"bad session: \(\{'player': 'p07'\}, 0\); accepted: a "
                             r"Session\(key, start, end\)"),
    (({"player": "p07"}, 0, 10, 20), r"bad session: .*, 0, 10, 20\); accepted: a Session"),
    (Session({"player": "p07"}, -1, 10), r"bad session start: -1; accepted: milliseconds"),
    (Session({"player": "p07"}, 0, "10"), r"bad session end: '10'; accepted: an integer"),
])
def test_session_bad_sessions_are_named(make, session, message):
    store = session_store(make)
    for use in (lambda: store.put(session, {"count": 1}), lambda: store.remove(session)):
        with pytest.raises(BadArgument, match=message):
            use()
    assert store.approximate_num_entries() == 0


def test_session_bad_arguments(make):
    store = session_store(make)
    with pytest.raises(BadArgument, match="bad session: .*ends at or after its start"):
        store.fetch_session({"player": "p07"}, 5000, 1000)
    with pytest.raises(BadArgument, match="earliest_session_end"):
        store.find_sessions({"player": "p07"}, -1, 10)
    with pytest.raises(BadArgument, match="bad session value.*aggregate columns only"):
        store.put(Session({"player": "p07"}, 0, 10), {"count": 1, "window_end": 10})
    with pytest.raises(BadArgument, match="bad value.*columns count"):
        store.put(Session({"player": "p07"}, 0, 10), {"sum": 1})
    with pytest.raises(BadArgument, match="session store key columns"):
        open_store("session", "s", 0, key_columns=["player", "window_start", "window_end"])


# --- checkpoint, iterators, lifecycle (every kind, both backends) ----------------------------
def test_checkpoint_round_trip(make, backend, tmp_path):
    store = kv(make)
    assert store.read_checkpoint() == {}
    store.put({"player": "p07"}, {"total": 1})
    store.write_checkpoint({0: 42})
    assert store.read_checkpoint() == {0: 42}
    store.write_checkpoint({0: 50, 3: 7})
    assert store.read_checkpoint() == {0: 50, 3: 7}
    for bad in [{0: -1}, {-1: 5}, {"0": 5}, [(0, 1)], {0: 1.5}]:
        with pytest.raises(BadArgument, match="checkpoint offsets"):
            store.write_checkpoint(bad)
    assert store.read_checkpoint() == {0: 50, 3: 7}
    if backend == "rocksdb":
        directory = tmp_path / "counts-0"
        assert json.loads((directory / CHECKPOINT_FILE).read_text())["offsets"] == {"0": 50,
                                                                                   "3": 7}
        assert not list(directory.glob("*.tmp"))
        store.close()
        with RocksDBKeyValueStore(directory, "counts", 0) as again:
            assert again.read_checkpoint() == {0: 50, 3: 7}
            assert again.get({"player": "p07"}) == {"total": 1}


@pytest.mark.parametrize("kind", ["key-value", "window", "session"])
def test_open_iterators_are_counted_and_reported_on_close(make, kind):
    columns = {"key-value": {"key_columns": ["player"]},
               "window": {"key_columns": ["player"], "window_size_ms": MIN},
               "session": {"key_columns": ["player"]}}[kind]
    store = make(kind, **columns)
    for i in range(3):
        if kind == "key-value":
            store.put({"player": f"p{i}"}, {"total": i})
        elif kind == "window":
            store.put({"player": "p"}, {"count": i}, i * MIN)
        else:
            store.put(Session({"player": "p"}, i * MIN, i * MIN + 10), {"count": i})
    assert store.open_iterators == 0
    with store.all() as it:
        next(it)
        assert store.open_iterators == 1
    assert store.open_iterators == 0 and it.closed
    finished = store.all()
    assert len(list(finished)) == 3
    assert store.open_iterators == 0  # read to its end: closed
    left1, left2 = store.all(), store.all()
    next(left1)
    assert store.open_iterators == 2
    left2.close()
    left2.close()
    assert store.open_iterators == 1
    with pytest.warns(ResourceWarning, match=r"closed with 1 open iterator"):
        store.close()
    assert store.open_iterators == 0 and left1.closed
    with pytest.raises(StoreClosed):
        next(left1)
    assert list(left2) == []  # closed by its user: simply exhausted


def test_a_scan_does_not_see_keys_added_after_it_started(make):
    store = kv(make)
    store.put({"player": "a"}, {"total": 1})
    store.put({"player": "c"}, {"total": 3})
    with store.all() as it:
        assert next(it)[0] == {"player": "a"}
        store.put({"player": "b"}, {"total": 2})
        assert [k["player"] for k, _ in it] == ["c"]
    assert players(store.all()) == ["a", "b", "c"]


def test_closed_store_refuses_use(make):
    store = window_store(make)
    store.close()
    store.close()  # closing twice is fine
    assert not store.is_open
    for use in [lambda: store.put({"player": "p"}, {"count": 1, "max_score": 1}, 0),
                lambda: store.fetch({"player": "p"}, 0, 1), lambda: store.all(),
                lambda: store.write_raw([]), lambda: store.to_pandas(),
                lambda: store.read_checkpoint(), lambda: store.approximate_num_entries()]:
        with pytest.raises(StoreClosed, match="closed store.*'counts'.*open_store"):
            use()
    assert isinstance(StoreClosed("x"), BadArgument)


# --- RocksDB directories -----------------------------------------------------------------
def test_rocksdb_reopen_sees_the_data(tmp_path):
    path = tmp_path / "store"
    with open_store("window", "counts", 2, path, key_columns=SPEC.key_columns,
                    value_columns=SPEC.value_columns, window_size_ms=10 * MIN,
                    changelog_topic="app-counts-changelog") as store:
        for i in range(5):
            store.put({"player": f"p{i}"}, {"count": i, "max_score": i}, T0)
        before = store.to_pandas()
    meta = json.loads((path / METADATA_FILE).read_text())
    assert meta == {"name": "counts", "kind": "window", "partition": 2,
                    "key_columns": ["player", "window_start", "window_end"],
                    "value_columns": ["count", "max_score"],
                    "changelog_topic": "app-counts-changelog", "window_size_ms": 600000,
                    "format_version": STORE_FORMAT_VERSION}
    with RocksDBWindowStore(path, "counts", 2) as again:  # columns from the directory
        assert again.window_size_ms == 10 * MIN
        pd.testing.assert_frame_equal(again.to_pandas(), before)
        with again.fetch({"player": "p3"}, T0, T0) as it:
            assert list(it) == [(T0, {"count": 3, "max_score": 3})]
    with open_store("window", "counts", 2, path, key_columns=["player"]) as again:
        assert again.key_columns == ("player", "window_start", "window_end")  # size: the dir's


def test_rocksdb_write_raw_survives_reopen(tmp_path):
    path = tmp_path / "kv"
    store = open_store("key-value", "totals", 0, path, key_columns=["player"])
    store.write_raw((b'{"player":"p%04d"}' % i, b'{"total":%d}' % i) for i in range(2000))
    store.close()
    with open_store("key-value", "totals", 0, path) as again:
        assert again.get({"player": "p1999"}) == {"total": 1999}
        assert again.approximate_num_entries() == 2000


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"name": "totals"}, r"its name is 'counts', not 'totals'; open it with name='counts'"),
    ({"kind": "session"}, r"its kind is 'window', not 'session'; open it as a window store"),
    ({"partition": 1}, r"its partition is 2, not 1; open it with partition=2"),
    ({"key_columns": ["team"]}, r"key_columns \['player', 'window_start', 'window_end'\], "
                                r"not \['team', 'window_start', 'window_end'\]; open it with"),
    ({"value_columns": ["sum"], "key_columns": ["player"]}, r"value_columns None, not \['sum'\]"),
    ({"window_size_ms": 2 * MIN}, r"window_size_ms 60000, not 120000"),
    ({"changelog_topic": "other-changelog"}, r"changelog_topic 'app-counts-changelog'"),
])
def test_rocksdb_directory_of_another_store(tmp_path, kwargs, match):
    path = tmp_path / "store"
    open_store("window", "counts", 2, path, key_columns=["player"], window_size_ms=MIN,
               changelog_topic="app-counts-changelog").close()
    args = {"kind": "window", "name": "counts", "partition": 2, **kwargs}
    with pytest.raises(StoreMismatch, match=match) as err:
        open_store(args.pop("kind"), args.pop("name"), args.pop("partition"), path, **args)
    assert "delete the directory" in str(err.value)
    assert isinstance(err.value, StatekitError)


def test_rocksdb_newer_format_and_unreadable_metadata(tmp_path):
    path = tmp_path / "store"
    open_store("key-value", "totals", 0, path, key_columns=["player"]).close()
    meta = json.loads((path / METADATA_FILE).read_text())
    (path / METADATA_FILE).write_text(json.dumps({**meta, "format_version": 99}))
    with pytest.raises(StoreMismatch, match=r"store format 99, newer than format 1.*upgrade"):
        open_store("key-value", "totals", 0, path)
    (path / METADATA_FILE).write_text("{not json")
    with pytest.raises(StoreCorrupt, match=r"statekit-store.json.*not JSON"):
        open_store("key-value", "totals", 0, path)
    (path / METADATA_FILE).write_text(json.dumps(meta))
    (path / CHECKPOINT_FILE).write_text("[]")
    with open_store("key-value", "totals", 0, path) as store, pytest.raises(
            StoreCorrupt, match="checkpoint.*restore the store from the changelog"):
        store.read_checkpoint()


def test_rocksdb_refuses_a_directory_that_is_not_a_store(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(StoreMismatch, match=r"not a statekit store directory.*notes.txt"):
        open_store("key-value", "totals", 0, tmp_path, key_columns=["player"])
    with pytest.raises(BadArgument, match="key_columns"):
        open_store("key-value", "totals", 0, tmp_path / "new")  # new: columns needed


def test_rocksdb_directory_open_twice_is_locked(tmp_path):
    path = tmp_path / "store"
    with open_store("key-value", "totals", 0, path, key_columns=["player"]), pytest.raises(
            StoreLocked, match="open elsewhere"):
        open_store("key-value", "totals", 0, path)
    with open_store("key-value", "totals", 0, path):
        pass  # free again once closed


def test_rocksdb_close_with_open_iterator_releases_the_directory(tmp_path):
    path = tmp_path / "store"
    store = open_store("key-value", "totals", 0, path, key_columns=["player"])
    store.put({"player": "a"}, {"total": 1})
    store.put({"player": "b"}, {"total": 2})
    it = store.all()
    next(it)
    with pytest.warns(ResourceWarning):
        store.close()
    with open_store("key-value", "totals", 0, path) as again:  # not held by the iterator
        assert again.get({"player": "b"}) == {"total": 2}


# --- bad arguments -----------------------------------------------------------------------
@pytest.mark.parametrize(("call", "match"), [
    (lambda: open_store("table", "s", 0, key_columns=["k"]), "store kind: 'table'; accepted: "
                                                             "key-value, window, session"),
    (lambda: open_store("key-value", "bad name", 0, key_columns=["k"]), "store name"),
    (lambda: open_store("key-value", "s", -1, key_columns=["k"]), "partition: -1"),
    (lambda: open_store("key-value", "s", "0", key_columns=["k"]), "partition: '0'"),
    (lambda: open_store("key-value", "s", 0), "key_columns"),
    (lambda: open_store("key-value", "s", 0, key_columns="k"), "key columns: 'k'"),
    (lambda: open_store("key-value", "s", 0, key_columns=[]), "key columns"),
    (lambda: open_store("key-value", "s", 0, key_columns=["k", "k"]), "distinct"),
    (lambda: open_store("session", "s", 0, key_columns=["k"], window_size_ms=5),
     "window_size_ms of a session store"),
    (lambda: open_store("window", "s", 0, key_columns=["k"], window_size_ms=0), "window_size_ms"),
    (lambda: open_store("window", "s", 0, key_columns=["k"], value_columns=["window_end"]),
     "window store value columns"),
    (lambda: InMemoryKeyValueStore("s", key_columns=["k"], serde="json"), "serde"),
    (lambda: open_store("window", "s", 0, key_columns=["k"], serde=object()), "serde"),
])
def test_bad_arguments_name_the_value_and_what_is_accepted(call, match):
    with pytest.raises(BadArgument, match=match) as err:
        call()
    assert "accepted:" in str(err.value)


def test_bad_keys_and_values(make):
    store = kv(make)
    for key in [{"who": "p"}, {"player": "p", "extra": 1}, "p07", None]:
        with pytest.raises(BadArgument, match="bad key.*columns player"):
            store.put(key, {"total": 1})
    with pytest.raises(BadArgument, match="bad value.*columns total"):
        store.put({"player": "p"}, {"sum": 1})


# --- helpers -----------------------------------------------------------------------------
def test_time_text_and_bounds():
    assert ms_to_iso(0) == "1970-01-01T00:00:00.000Z"
    assert ms_to_iso(MAX_TIME_MS) == "9999-12-31T23:59:59.999Z"
    for ms in (0, 1, 999, T0 + 123, MAX_TIME_MS):
        assert iso_to_ms(ms_to_iso(ms)) == ms
        assert ms_to_iso(ms) == encode_key({"window_start": pd.Timestamp(ms, unit="ms")},
                                           ["window_start"])[17:-2].decode()
    assert iso_to_ms("2026-01-05T11:00:00.000+01:00") == T0
    assert successor(b"a\xff\xff") == b"b" and successor(b"\xff") is None


def test_serde_prefix_and_repr():
    serde = ChangelogJsonSerde(["region", "player"], ["total"])
    assert serde.encode_key_prefix({}) == b"{"
    assert serde.encode_key_prefix({"region": "eu", "player": "p"}) == serde.encode_key(
        {"player": "p", "region": "eu"}) == b'{"region":"eu","player":"p"}'
    assert repr(serde) == "ChangelogJsonSerde(['region', 'player'], ['total'])"
