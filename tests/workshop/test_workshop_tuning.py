"""The checks of notebook 09's exercises: right answers pass, wrong ones are told why."""

from __future__ import annotations

from statekit.spark.tuning import PRESETS, key
from statekit.workshop import check
from statekit.workshop.tuning import memory_ceiling_mib


def _texts(verdict) -> str:
    return " | ".join(p.text for p in verdict.points)


def test_gets_per_put():
    measured = {"measured": {"default": 2.0, "write_heavy": 1.0, "read_heavy": 2.0}}
    assert check("09.1", 1, **measured).right
    assert "trackTotalNumberOfRows=false" in _texts(check("09.1", 2, **measured))
    assert "not what ran" in _texts(check("09.1", 3, **measured))
    assert "not a number" in _texts(check("09.1", "one", **measured))


def test_memory_ceiling_names_the_usual_mistakes():
    assert memory_ceiling_mib() == 16 * (8 + 64 * 2) == 2176
    assert check("09.2", 2176).right
    assert "one operator's" in _texts(check("09.2", 8 * 136))
    assert "three write buffers" in _texts(check("09.2", 16 * (8 + 64 * 3)))
    assert "block caches only" in _texts(check("09.2", 16 * 8))
    assert "write buffers only" in _texts(check("09.2", 16 * 128))
    assert "boundedMemoryUsage=true" in _texts(check("09.2", 500))
    assert "not it" in _texts(check("09.2", 1234))


def test_a_memory_constrained_preset():
    right = {**PRESETS["memory_bounded"], key("maxMemoryUsageMB"): "128"}
    assert check("09.3", right).right
    assert check("09.3", {key("boundedMemoryUsage"): True, key("maxMemoryUsageMB"): 128}).right
    unbounded = _texts(check("09.3", {key("maxMemoryUsageMB"): "128"}))
    assert "grows with the partitions" in unbounded
    assert "must be 128 (it is '256'" in _texts(check("09.3", dict(PRESETS["memory_bounded"])))
    assert "set as spark.sql.streaming.stateStore.rocksdb." in _texts(
        check("09.3", {**right, "rocksdb.blockCacheSizeMB": "8"}))
    assert "not a RocksDB setting" in _texts(check("09.3", {**right, key("cacheMB"): "8"}))
    assert "fraction between 0 and 1" in _texts(
        check("09.3", {**right, key("writeBufferCacheRatio"): "2"}))
    assert "expected a dict" in _texts(check("09.3", "bounded"))


def test_records_per_key_and_reviews():
    measured = {"measured": 1.0, "events_per_key": 2.4}
    assert check("09.4", 1, **measured).right
    assert "a write per event" in _texts(check("09.4", 2.4, **measured))
    assert "written, once" in _texts(check("09.4", 0.5, **measured))
    for exercise_id, right, wrong, said in (("09.5", "b", "d", "no such setting"),
                                            ("09.6", "b", "a", "Spark neither writes"),
                                            ("09.7", "b", "c", "native (off-heap)")):
        assert check(exercise_id, right).right
        assert said in _texts(check(exercise_id, wrong))
