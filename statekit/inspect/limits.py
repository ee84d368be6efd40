"""What Spark's State Data Source cannot read, and the error that says so.

Each limit is a fact of Spark 4.3's reader, measured here; statekit refuses the read
before Spark fails (or instead of passing on Spark's failure) with ``UnsupportedRead``,
which names what was asked, why it cannot be done and what works instead.

Example:
    >>> err = UnsupportedRead("the change feed of join side 'left'",
    ...                       "Spark's reader refuses joinSide with readChangeFeed",
    ...                       "the change feed of store 'left-keyWithIndexToValue'")
    >>> print(err)
    cannot read the change feed of join side 'left': Spark's reader refuses joinSide with \
readChangeFeed; instead: the change feed of store 'left-keyWithIndexToValue'
"""

from __future__ import annotations

from statekit.errors import UnsupportedRead


def join_side_changes(side: str, operator_id: int) -> UnsupportedRead:
    """A join side's change feed: Spark's reader refuses ``joinSide`` with ``readChangeFeed``."""
    return UnsupportedRead(
        f"the change feed of join side {side!r} (operator {operator_id})",
        "Spark's State Data Source refuses the options joinSide and readChangeFeed together "
        "(STDS_CONFLICT_OPTIONS)",
        f"the change feed of the store that keeps that side's rows: "
        f"state({side + '-keyWithIndexToValue'!r}, operator_id={operator_id}).changes(...) "
        f"(puts and deletes of (join key, index) -> row), or snapshot(batch) of the side at "
        f"each batch")


def timer_changes(name: str, operator_id: int) -> UnsupportedRead:
    """Registered timers' change feed: Spark 4.3's reader declares a schema without
    ``batch_id`` / ``change_type`` and its tasks then fail (ClassCastException)."""
    return UnsupportedRead(
        f"the change feed of the registered timers {name!r} (operator {operator_id})",
        "Spark's State Data Source does not support readRegisteredTimers with readChangeFeed "
        "(Spark 4.3 declares the snapshot's columns for it and its tasks fail with a "
        "ClassCastException)",
        f"state({name!r}, operator_id={operator_id}).snapshot(batch) at each batch (the timers "
        f"registered then)")


def no_delta_files(store: str, operator_id: int, versions: str, checkpoint: str) -> UnsupportedRead:
    """A RocksDB store written without changelog checkpointing has snapshots only."""
    return UnsupportedRead(
        f"the change feed of store {store!r} (operator {operator_id}) in {checkpoint!r}",
        f"the change feed reads Spark's delta files (N.changelog), and versions {versions} have "
        f"none: the query ran RocksDB state without changelog checkpointing "
        f"(spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled=false), "
        f"which writes only snapshots (N.zip)",
        "snapshot(batch) at each batch, compared batch by batch; or run the query with "
        "changelog checkpointing enabled (statekit's sessions enable it)")


def store_of_transform_with_state(operator_id: int, variables: list[str]) -> UnsupportedRead:
    """transformWithState keeps every state variable in one store, read one variable at a
    time."""
    shown = ", ".join(repr(v) for v in variables) or "(none recorded)"
    return UnsupportedRead(
        f"the store of transformWithState operator {operator_id} as a whole",
        "Spark's State Data Source reads transformWithState state one state variable at a time "
        "(option stateVarName is required)",
        f"one of its state variables: {shown}")
