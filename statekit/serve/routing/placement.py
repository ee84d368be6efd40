"""Where Spark keeps a state row: its partition, computed exactly as Spark computes it.

A streaming aggregation is a shuffle on its grouping expressions, and each
shuffle partition owns one state store partition. Spark picks the partition
with ``HashPartitioning``: ``pmod(murmur3(grouping values, seed 42), n)``, the
same function as SQL's ``hash()`` (``statekit.serve.routing.value_hash``), over the
values in grouping order:

* **time windows** (tumbling, hopping): the ``window`` struct ``(start, end)``
  first, then the group keys — so one player's windows are spread over the
  partitions;
* **session windows**: the group keys alone (Spark merges a key's sessions in
  the partition of the key).

``n`` is the query's number of state partitions: ``spark.sql.shuffle.partitions``
when the query first ran (a checkpoint keeps it; changing the setting later does
not move state).

``state_partition`` places one row; ``state_partitions`` a whole frame, in NumPy.
``tests/serve/test_placement.py`` checks both on every row of real streaming state.

Example:
    >>> import pandas as pd
    >>> start = pd.Timestamp("2026-01-05 10:00")
    >>> state_partition({"player": "p07", "window_start": start,
    ...                  "window_end": start + pd.Timedelta("10min")},
    ...                 keys=["player"], windowed=True, partitions=3)
    2
    >>> pmod(-7, 3)
    2
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from statekit.errors import BadArgument
from statekit.serve.routing.value_hash import (
    SEED,
    check_kind,
    hash_column,
    is_null,
    kind_of,
    spark_hash,
)
from statekit.validate import whole_number

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

_WINDOW = ("window_start", "window_end")


def pmod(h: int, n: int) -> int:
    """Spark's ``pmod``: the non-negative remainder."""
    return ((h % n) + n) % n


def _key_kinds(keys: Sequence[str] | str,
               key_types: Mapping[str, str] | None) -> tuple[list[str], dict[str, str]]:
    """The keys as a list and their declared types, each checked (a typo is named)."""
    keys = [keys] if isinstance(keys, str) else keys
    if not isinstance(keys, Sequence) or not keys or not all(isinstance(k, str) for k in keys):
        raise BadArgument("group keys", keys, "one or more column names")
    keys = list(keys)
    if key_types is None:
        return keys, {}
    if not isinstance(key_types, Mapping):
        raise BadArgument("key_types", key_types, 'a dict such as {"level": "int"}')
    for name in key_types:
        if name not in keys:
            raise BadArgument("key_types key", name, f"one of the group keys {keys}")
    return keys, {name: check_kind(kind) for name, kind in key_types.items()}


def state_partition(row: Mapping[str, object], keys: Sequence[str] | str, windowed: bool,
                    partitions: int, key_types: Mapping[str, str] | None = None) -> int:
    """The state partition Spark keeps ``row`` in.

    Args:
        row: the group keys (and for time windows ``window_start`` and ``window_end``).
        keys: the group keys in grouping order (a string for one key).
        windowed: True for tumbling and hopping windows (the window struct is hashed
            first); False for session windows (keys only).
        partitions: the query's state partitions (``spark.sql.shuffle.partitions``).
        key_types: Spark types of the keys, by name (one of ``TYPES``, as Spark's
            ``simpleString`` spells them: ``"int"`` for an int column — an int and a
            bigint hash differently); a key left out is typed from its Python value
            (``kind_of``). A name that is not a group key is refused.
    """
    partitions = whole_number(partitions, "partitions", minimum=1)
    keys, declared = _key_kinds(keys, key_types)
    values: list[object] = []
    kinds: list[str] = []
    if windowed:
        for column in _WINDOW:
            if column not in row:
                raise BadArgument(f"row: no {column!r} in it", dict(row),
                                  f"a row with window_start, window_end and the group keys "
                                  f"{keys} (a time window is part of the state key)")
            values.append(row[column])
            kinds.append("timestamp")
    for key in keys:
        if key not in row:
            raise BadArgument(f"row: no group key {key!r} in it", dict(row),
                              f"a value for each group key {keys}")
        value = row[key]
        values.append(value)
        kinds.append(declared.get(key) or ("string" if is_null(value, "double")
                                           else kind_of(value)))
    return pmod(spark_hash(values, kinds), partitions)


def state_partitions(frame: pd.DataFrame, keys: Sequence[str] | str, windowed: bool,
                     partitions: int, key_types: Mapping[str, str] | None = None) -> np.ndarray:
    """``state_partition`` of every row of ``frame``, vectorized: a NumPy int array.

    Fixed-width columns (ints, bigints, booleans, doubles, floats, timestamps) hash
    in NumPy; strings and binary in NumPy too, one pass per byte length; object
    columns of other values row by row. Without ``key_types`` a column's type
    comes from its dtype (int8/16/32 → int, int64 → bigint, float32 → float,
    float64 → double, datetime64 → timestamp, bool → boolean), or row by row from
    the values of an object column (as ``state_partition`` does).

    Example:
        >>> import pandas as pd
        >>> start = pd.Timestamp("2026-01-05 10:00")
        >>> frame = pd.DataFrame({"window_start": [start] * 2,
        ...                       "window_end": [start + pd.Timedelta("10min")] * 2,
        ...                       "player": ["p07", "p03"]})
        >>> state_partitions(frame, ["player"], windowed=True, partitions=3).tolist()
        [2, 0]
    """
    import numpy as np
    import pandas as pd

    partitions = whole_number(partitions, "partitions", minimum=1)
    keys, declared = _key_kinds(keys, key_types)
    if not isinstance(frame, pd.DataFrame):
        raise BadArgument("frame", type(frame).__name__, "a pandas DataFrame")
    columns = [*_WINDOW, *keys] if windowed else keys
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise BadArgument(f"frame: missing column {missing[0]!r}", list(frame.columns),
                          f"a frame with columns {columns}")
    h = np.full(len(frame), SEED, dtype=np.uint32)
    for column in columns:
        kind = "timestamp" if column in _WINDOW and windowed else declared.get(column)
        h = hash_column(frame[column], kind, h)
    return np.mod(h.view(np.int32).astype(np.int64), partitions)
