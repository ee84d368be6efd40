"""Where Spark keeps each row of any operator's state: the columns it hashes, per kind.

Every stateful operator is a shuffle on its keys, and each shuffle partition owns one
state store partition, picked by ``HashPartitioning``: ``pmod(murmur3(keys, 42), n)``
(``statekit.serve.routing.placement`` computes it exactly). What the keys are depends on the
operator, and each part's key struct, as Spark's reader gives it, holds them first:

* an aggregation: its grouping expressions (a time window's struct first, if any);
* a deduplication (``dropDuplicates``, ``dropDuplicatesWithinWatermark``): its columns;
* a stream-stream join: its join keys, on both sides; the ``keyWithIndexToValue``
  stores add an ``index`` to the key, which Spark does not hash;
* ``applyInPandasWithState`` and ``transformWithState``: the grouping keys; a map
  state adds the user's map key (``user_map_key``), which Spark does not hash.

So a part's placement columns are its key columns from the state's ``key`` struct
(Spark's field path ``key.…``), without a join store's ``key.index``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from statekit.inspect.hashed_columns import placement_columns
from statekit.serve.routing.placement import state_partitions


def part_partitions(frame: pd.DataFrame, schema: pd.DataFrame, store: str,
                    partitions: int) -> np.ndarray:
    """The state partition Spark keeps each row of ``frame`` (a part's rows) in."""
    columns, kinds = placement_columns(schema, store)
    return state_partitions(frame, columns, windowed=False, partitions=partitions,
                            key_types=kinds)
