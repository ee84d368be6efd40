"""The checks of notebook 08's exercises: right answers pass, wrong ones are told why."""

from __future__ import annotations

import numpy as np
import pandas as pd

from statekit.workshop import check
from statekit.workshop.monitoring import DASHBOARD_COLUMNS, dashboard_frame


def _texts(verdict) -> str:
    return " | ".join(p.text for p in verdict.points)


def test_running_rows_names_each_confusion():
    measured = {"events": 3000, "per_user": 20, "rows": 150, "windowed": 12, "ttl": 30}
    assert check("08.1", 150, **measured).right
    assert "one row per key" in _texts(check("08.1", 3000, **measured))
    assert "watermark evicts" in _texts(check("08.1", 12, **measured))
    assert "forgets idle users" in _texts(check("08.1", 30, **measured))
    assert "distinct users" in _texts(check("08.1", 149, **measured))
    assert "not a number" in _texts(check("08.1", "150 rows", **measured))
    assert check("08.1", ..., **measured).status == "unanswered"


def test_multiple_choice_reviews():
    assert check("08.2", "b").right and not check("08.2", "c").right
    assert "does not change eviction" in _texts(check("08.2", "c"))
    assert check("08.4", "b").right
    assert "grows exactly the same" in _texts(check("08.4", "c"))
    assert check("08.5", "B)").right
    assert "event time" in _texts(check("08.5", "a"))
    assert "not one of the choices" in _texts(check("08.5", "e"))


def _progress() -> pd.DataFrame:
    return pd.DataFrame({
        "batch": [0, 1, 2, 3], "state_rows_total": [10, 25, 25, 40],
        "rocksdbReadBlockCacheHitCount": [0, 3, 9, 0],
        "rocksdbReadBlockCacheMissCount": [0, 1, 1, 0],
        "duration_ms": [900, 300, 250, 280]})


def test_the_dashboard_frame_check_says_which_column_is_off():
    progress = _progress()
    right = dashboard_frame(progress)
    assert list(right.columns) == list(DASHBOARD_COLUMNS)
    assert right["rows_added"].tolist() == [10, 15, 0, 15]
    assert np.isnan(right["cache_hit_ratio"][0]) and right["cache_hit_ratio"][1] == 0.75
    assert check("08.3", right, progress=progress).right
    assert check("08.3", right.iloc[::-1], progress=progress).right       # order by batch

    no_first = right.assign(rows_added=right["rows_added"].where(right["batch"] > 0, 0))
    assert "first batch added all its state rows" in _texts(
        check("08.3", no_first, progress=progress))
    zeros = right.assign(cache_hit_ratio=right["cache_hit_ratio"].fillna(0))
    assert "NaN, not 0" in _texts(check("08.3", zeros, progress=progress))
    slow = right.assign(latency_ms=right["latency_ms"] + 1)
    verdict = check("08.3", slow, progress=progress)
    assert not verdict.right and "latency_ms: batch 0 has 901" in _texts(verdict)
    assert "missing column(s): latency_ms" in _texts(
        check("08.3", right.drop(columns="latency_ms"), progress=progress))
    assert "one row per batch" in _texts(check("08.3", right.head(2), progress=progress))
    assert "expected a pandas DataFrame" in _texts(check("08.3", [1, 2], progress=progress))


def test_tombstone_and_cleanup_reviews():
    assert check("08.6", "b").right and check("08.6", " (B) ").right
    assert not check("08.6", "a").right
    assert "KTable" in _texts(check("08.6", "a"))
    assert not check("08.6", "d").right
    assert check("08.7", "b) the clean-up job").right
    assert "processing time" in _texts(check("08.7", "a"))
    assert not check("08.7", "c").right
    assert "not one of the choices" in _texts(check("08.7", "e"))
