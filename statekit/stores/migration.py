"""Migrate a store to a new value format: every live key of a changelog, upgraded, into new stores.

Kafka Streams gives no migration tool: a new value format means a new store (and
changelog) filled from the old one, with code that reads both formats while the
old one drains. ``migrate_changelog`` does the filling: it takes the latest
record per key of an old changelog (tombstoned keys stay deleted), passes each
value through ``upgrade`` and writes the same key bytes with the new value into
one store per partition. ``upgrade`` should accept values of the old *and* the
new format (a value already upgraded passes through unchanged), so that a
migration can run again, or over a log that is half old, half new.

Example:
    >>> import pandas as pd
    >>> from statekit.changelog import Changelog
    >>> records = pd.DataFrame({"partition": [0, 0, 1], "offset": [0, 1, 0],
    ...     "timestamp": pd.to_datetime(["2026-01-05 10:00"] * 3), "batch": [0, 1, 0],
    ...     "seq": [0, 0, 0], "tombstone": [False, False, False],
    ...     "key": ['{"player":"a"}', '{"player":"a"}', '{"player":"b"}'],
    ...     "player": ["a", "a", "b"], "count": [1, 2, 4], "sum_score": [5, 9, 8]})
    >>> log = Changelog(records, topic="app-s-changelog", key_columns=["player"],
    ...                 value_columns=["count", "sum_score"], last_batch=1)
    >>> def upgrade(v):
    ...     return v if "avg_score" in v else {**v, "avg_score": v["sum_score"] / v["count"]}
    >>> stores = migrate_changelog(log, upgrade, "key-value", ["player"],
    ...                            ["count", "sum_score", "avg_score"], store_name="s-v2")
    >>> stores[0].get({"player": "a"})
    {'count': 2, 'sum_score': 9, 'avg_score': 4.5}
    >>> sorted(stores), stores[1].approximate_num_entries()
    ([0, 1], 1)
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

import pandas as pd

from statekit.changelog.log import Changelog
from statekit.errors import BadArgument
from statekit.stores.base import StateStore
from statekit.stores.factory import open_store
from statekit.stores.serde import ChangelogJsonSerde


def _plain(value: object) -> object:
    """A pandas/numpy cell as a plain Python value (NA → None)."""
    if value is None or (not isinstance(value, (list, dict, str)) and pd.isna(value)):
        return None
    if isinstance(value, pd.Timestamp):
        return value
    return value.item() if hasattr(value, "item") else value


def live_values(log: Changelog) -> pd.DataFrame:
    """The latest record per (partition, key) that is not a tombstone: what the store holds.

    Columns: ``partition``, ``key`` (the key's JSON text) and ``value`` (a dict of the
    value columns, plain Python values).
    """
    if not isinstance(log, Changelog):
        raise BadArgument("changelog", type(log).__name__, "a Changelog (read_changelog())")
    records = log.records.sort_values(["partition", "offset"], kind="stable")
    latest = records.drop_duplicates(["partition", "key"], keep="last")
    latest = latest[~latest["tombstone"].astype(bool)]
    columns = list(log.value_columns)
    values = [{c: _plain(v) for c, v in zip(columns, row, strict=True)}
              for row in latest[columns].itertuples(index=False, name=None)]
    return pd.DataFrame({"partition": latest["partition"].to_numpy(),
                         "key": latest["key"].to_numpy(), "value": values})


def migrate_changelog(log: Changelog, upgrade: Callable[[dict], dict], kind: str,
                      key_columns: Sequence[str], value_columns: Sequence[str],
                      directory: str | os.PathLike | None = None, *, store_name: str,
                      window_size_ms: int | None = None) -> dict[int, StateStore]:
    """Fill new stores (one per partition) with ``upgrade(value)`` for every live key of ``log``.

    Args:
        log: the old store's changelog (``read_changelog``).
        upgrade: old (or already new) value dict → new value dict with ``value_columns``.
        kind: the store kind (``key-value``, ``window``, ``session``).
        key_columns: the store's key columns (``QuerySpec.key_columns``): unchanged.
        value_columns: the new format's value columns.
        directory: RocksDB stores in ``<directory>/<store_name>/<partition>``; None: in memory.
        store_name: the new store's name (a new format is a new store).
        window_size_ms: window stores: the window size.

    Returns:
        The new stores by partition (open; close them when done).
    """
    if not callable(upgrade):
        raise BadArgument("upgrade", upgrade, "a function from a value dict to a new value dict")
    serde = ChangelogJsonSerde(key_columns, value_columns)
    live = live_values(log)
    stores: dict[int, StateStore] = {}
    try:
        for partition in sorted(int(p) for p in pd.unique(log.records["partition"])):
            path = None if directory is None else os.path.join(directory, store_name,
                                                               str(partition))
            stores[partition] = store = open_store(
                kind, store_name, partition, path, key_columns=key_columns,
                value_columns=value_columns, window_size_ms=window_size_ms)
            rows = live[live["partition"] == partition]
            store.write_raw((key.encode(), serde.encode_value(upgrade(dict(value))))
                            for key, value in zip(rows["key"], rows["value"], strict=True))
    except BaseException:
        for store in stores.values():
            store.close()
        raise
    return stores
