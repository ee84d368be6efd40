"""Which of a part's key columns Spark hashes to place its rows (pure: from the part's schema).

Every stateful operator is a shuffle on its keys; each part's key struct, as Spark's reader
gives it, holds them first. A join's ``keyWithIndexToValue`` stores add an ``index`` that
Spark does not hash. ``statekit.live.part_routing`` hashes these columns; the changelog's
``PartShape`` records them so a serving instance routes a key as Spark placed it.

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

import pandas as pd

#: Spark types statekit hashes as Spark's Murmur3 does
#: (``statekit.serve.routing.value_hash.TYPES``)
HASHED_TYPES = ("string", "int", "bigint", "timestamp", "date", "boolean", "double", "float",
                "binary", "smallint", "tinyint", "timestamp_ntz")


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
             if t in HASHED_TYPES}
    return list(hashed["column"]), kinds


