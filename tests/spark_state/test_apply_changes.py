"""Change feeds applied to a table (``statekit.spark_state.changes.apply_changes``). Pure
logic."""

from __future__ import annotations

import pandas as pd
import pytest

from statekit.spark_state.changes import apply_changes


def feed(*rows) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["batch", "change", "k", "v"])


def test_apply_changes_last_change_per_key_wins_in_row_order():
    changes = feed((1, "put", "a", 1), (2, "put", "a", 2), (2, "put", "b", 5))
    table = apply_changes(changes, ["k"], ["v"])
    assert table.to_dict("records") == [{"k": "a", "v": 2}, {"k": "b", "v": 5}]
    reversed_ = apply_changes(changes.iloc[[1, 0, 2]], ["k"], ["v"])
    assert reversed_.set_index("k")["v"].to_dict() == {"a": 1, "b": 5}


def test_apply_changes_delete_removes_and_a_later_put_restores():
    changes = feed((1, "put", "a", 1), (1, "put", "b", 2), (2, "delete", "a", None),
                   (3, "delete", "b", None), (4, "put", "b", 7), (4, "delete", "zzz", None))
    table = apply_changes(changes, ["k"], ["v"])
    assert table["k"].tolist() == ["b"] and table["v"].tolist() == [7]
    assert list(table.columns) == ["k", "v"]


def test_apply_changes_on_a_start_table():
    start = pd.DataFrame({"k": ["a", "b", "c"], "v": [1, 2, 3]})
    changes = feed((5, "delete", "a", None), (5, "put", "b", 20), (6, "put", "d", 4))
    table = apply_changes(changes, ["k"], ["v"], start=start)
    assert table.set_index("k")["v"].to_dict() == {"b": 20, "c": 3, "d": 4}
    assert apply_changes(feed(), ["k"], ["v"], start=start)["k"].tolist() == ["a", "b", "c"]


def test_apply_changes_with_compound_keys():
    changes = pd.DataFrame({"change": ["put", "put", "delete"], "w": [1, 2, 1],
                            "k": ["a", "a", "a"], "v": [1, 2, None]})
    table = apply_changes(changes, ["w", "k"], ["v"])
    assert table[["w", "k"]].values.tolist() == [[2, "a"]]


def test_apply_changes_names_unknown_change_types():
    with pytest.raises(ValueError, match=r"\['upsert'\]; accepted: put, delete"):
        apply_changes(feed((1, "upsert", "a", 1), (1, "put", "b", 1)), ["k"], ["v"])
