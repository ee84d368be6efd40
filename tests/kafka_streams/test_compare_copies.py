"""compare_copies over the partitions both copies have files for: a copy whose store holds no
rows there (a killed instance's, which had flushed nothing) differs by every entry of the
other, instead of being left out as if it held none of those partitions."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd

from statekit.kafka_streams.state_dir import compare_copies
from statekit.model.query_spec import QuerySpec, tumbling

SPEC = QuerySpec(keys=["player"], window=tumbling("10 minutes"), aggregates=["count"])
ROWS = pd.DataFrame({"player": ["p1", "p2"],
                     "window_start": pd.to_datetime(["2026-01-05 10:00"] * 2),
                     "window_end": pd.to_datetime(["2026-01-05 10:10"] * 2),
                     "count": [3, 4], "partition": [0, 1]})


def _copy(rows: pd.DataFrame, partitions: list[int]) -> SimpleNamespace:
    stores = pd.DataFrame({"store": ["aggregate"] * len(partitions), "partition": partitions})
    return SimpleNamespace(spec=SPEC, snapshot=lambda store=None: rows,
                           stores=lambda: stores,
                           _files=lambda store=None: [SimpleNamespace(name="aggregate")])


def test_equal_copies_differ_nowhere():
    assert compare_copies(_copy(ROWS, [0, 1]), _copy(ROWS, [0, 1])).empty


def test_a_copy_with_files_but_no_rows_differs_by_every_entry():
    nothing = pd.DataFrame({c: pd.Series(dtype=object) for c in ROWS.columns})
    differ = compare_copies(_copy(ROWS, [0, 1]), _copy(nothing, [0, 1]))
    assert differ["player"].tolist() == ["p1", "p2"] and set(differ["in"]) == {"first"}


def test_only_the_partitions_both_hold_are_compared():
    differ = compare_copies(_copy(ROWS, [0, 1]), _copy(ROWS[ROWS["partition"] == 0], [0]))
    assert differ.empty
