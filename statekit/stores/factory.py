"""``open_store``: a store of any kind, in memory or in a RocksDB directory.

Example:
    >>> store = open_store("key-value", "totals", 0, key_columns=["player"],
    ...                    value_columns=["total"])
    >>> store.put({"player": "p07"}, {"total": 5}); store.get({"player": "p07"})
    {'total': 5}
    >>> open_store("table", "totals", 0, key_columns=["player"])
    Traceback (most recent call last):
    ...
    statekit.errors.BadArgument: bad store kind: 'table'; accepted: key-value, window, session
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from statekit.errors import BadArgument
from statekit.options.base import route, settle
from statekit.stores.base import StateStore
from statekit.stores.key_layout import KINDS
from statekit.stores.memory import InMemoryKeyValueStore, InMemorySessionStore, InMemoryWindowStore
from statekit.stores.rocksdb import RocksDBKeyValueStore, RocksDBSessionStore, RocksDBWindowStore
from statekit.stores.serde import Serde

#: ``open_store``'s keyword shortcuts: the fields of ``StoreColumns``
_COLUMNS = dict.fromkeys(("key_columns", "value_columns"), "columns")


@dataclass(frozen=True)
class StoreColumns:
    """A store's key columns and value columns, which travel together.

    Example:
        >>> StoreColumns(["player"], ["total"])
        StoreColumns(key_columns=('player',), value_columns=('total',))
    """

    key_columns: tuple[str, ...] | None = None
    value_columns: tuple[str, ...] | None = None

    def __post_init__(self):
        for what in ("key_columns", "value_columns"):
            value = getattr(self, what)
            if value is None:
                continue
            if isinstance(value, str) or not isinstance(value, Sequence):
                raise BadArgument(what, value, "a list of column names, or None")
            object.__setattr__(self, what, tuple(value))


def open_store(kind: str, name: str, partition: int, path: str | os.PathLike | None = None, *,
               columns: StoreColumns | None = None, window_size_ms: int | None = None,
               changelog_topic: str | None = None, serde: Serde | None = None,
               **shortcuts: Sequence[str] | None) -> StateStore:
    """Open store ``name``'s ``partition``: in memory when ``path`` is None, else RocksDB there.

    ``columns`` (``StoreColumns``), or ``key_columns=`` and ``value_columns=`` as keyword
    arguments (not both).

    Args:
        kind: ``key-value``, ``window`` or ``session``.
        name: the store name (``<app>-<name>-changelog`` is its changelog topic).
        partition: the state partition (= changelog partition) the store holds.
        path: the store directory (created with its metadata when new); None: in memory.
        key_columns: the key columns (``QuerySpec.key_columns`` fits); for an existing
            directory None takes its own, given ones must match.
        value_columns: the value columns (``QuerySpec.value_columns``); None: any.
        window_size_ms: window stores: the window size, for typed ``put`` when keys
            hold ``window_end`` (tumbling and hopping windows).
        changelog_topic: recorded in the directory's metadata (and checked when given).
        serde: default: the changelog JSON format.
    """
    if kind not in KINDS:
        raise BadArgument("store kind", kind, KINDS)
    routed = route(shortcuts, _COLUMNS, "open_store").get("columns", {})
    if columns is None:  # the columns as given (a list stays a list: the stores check them)
        key_columns, value_columns = routed.get("key_columns"), routed.get("value_columns")
    else:
        settle(columns, StoreColumns, routed, "columns")
        key_columns, value_columns = columns.key_columns, columns.value_columns
    if window_size_ms is not None and kind != "window":
        raise BadArgument(f"window_size_ms of a {kind} store", window_size_ms,
                          "None (only window stores have a window size)")
    common = {"key_columns": key_columns, "value_columns": value_columns,
              "changelog_topic": changelog_topic, "serde": serde}
    if kind == "window":
        common["window_size_ms"] = window_size_ms
    if path is None:
        if key_columns is None:
            raise BadArgument("key_columns", None, "the key columns of the store, e.g. ['player']")
        memory = {"key-value": InMemoryKeyValueStore, "window": InMemoryWindowStore,
                  "session": InMemorySessionStore}[kind]
        return memory(name, partition, **common)
    rocks = {"key-value": RocksDBKeyValueStore, "window": RocksDBWindowStore,
             "session": RocksDBSessionStore}[kind]
    return rocks(path, name, partition, **common)
