"""Where Spark keeps each row of any operator's state: the columns it hashes, per kind.

Every stateful operator is a shuffle on its keys, and each shuffle partition owns one
state store partition, picked by ``HashPartitioning``: ``pmod(murmur3(keys, 42), n)``
(``statekit.serve.placement`` computes it exactly). What the keys are depends on the
operator, and each part's key struct, as Spark's reader gives it, holds them first:

* an aggregation: its grouping expressions (a time window's struct first, if any);
* a deduplication (``dropDuplicates``, ``dropDuplicatesWithinWatermark``): its columns;
* a stream-stream join: its join keys, on both sides; the ``keyWithIndexToValue``
  stores add an ``index`` to the key, which Spark does not hash;
* ``applyInPandasWithState`` and ``transformWithState``: the grouping keys; a map
  state adds the user's map key (``user_map_key``), which Spark does not hash.

So a part's placement columns are its key columns from the state's ``key`` struct
(Spark's field path ``key.…``), without a join store's ``key.index``.

Example:
    >>> import pandas as pd
    >>> columns = pd.DataFrame({"column": ["field0", "index", "who"],
    ...                         "field": ["key.field0", "key.index", "value.who"],
    ...                         "role": ["key", "key", "value"],
    ...                         "type": ["string", "bigint", "string"]})
    >>> placement_columns(columns, "left-keyWithIndexToValue")
    (['field0'], {'field0': 'string'})
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from statekit.serve.placement import TYPES, state_partitions

#: the key field of a join's keyWithIndexToValue stores that Spark adds and does not hash
JOIN_INDEX_FIELD = "key.index"


def placement_columns(schema: pd.DataFrame, store: str) -> tuple[list[str], dict[str, str]]:
    """The columns Spark hashes to place a part's rows, in order, and their Spark types.

    ``schema``: the part's ``StateView.schema()`` (``column``, ``field``, ``role``,
    ``type``); ``store``: the Spark store that holds the part.
    """
    hashed = schema[schema["field"].str.startswith("key.")]
    if store.endswith("keyWithIndexToValue"):
        hashed = hashed[hashed["field"] != JOIN_INDEX_FIELD]
    kinds = {c: t for c, t in zip(hashed["column"], hashed["type"], strict=True)
             if t in TYPES}
    return list(hashed["column"]), kinds


def part_partitions(frame: pd.DataFrame, schema: pd.DataFrame, store: str,
                    partitions: int) -> np.ndarray:
    """The state partition Spark keeps each row of ``frame`` (a part's rows) in."""
    columns, kinds = placement_columns(schema, store)
    return state_partitions(frame, columns, windowed=False, partitions=partitions,
                            key_types=kinds)
