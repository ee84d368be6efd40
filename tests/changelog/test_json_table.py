"""Changelog keys read into Arrow (``statekit.changelog.arrow.json_table``)."""

from __future__ import annotations

import datetime as dt
import json


def test_json_table_parses_named_window_times_directly_to_the_same_table():
    from statekit.changelog.arrow import json_table
    from statekit.stores.key_layout import MAX_TIME_MS, ms_to_iso

    starts = [0, 1, 999, 1_767_607_200_000, MAX_TIME_MS - 60_000, 86_399_999]
    keys = [json.dumps({"player": f"p{i}", "team": None if i % 2 else i,
                        "window_start": ms_to_iso(ms), "window_end": ms_to_iso(ms + 60_000)},
                       separators=(",", ":")).encode() for i, ms in enumerate(starts)]
    inferred = json_table(keys)
    direct = json_table(keys, ["window_start", "window_end"])
    assert direct.equals(inferred)  # same columns, order, types and values
    assert direct.column_names == ["player", "team", "window_start", "window_end"]
    assert direct["window_start"].to_pylist()[3] == dt.datetime(2026, 1, 5, 10, 0)
