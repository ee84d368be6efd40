"""Tombstones in a source topic: a keyed stream where each key says when it is gone.

In a Kafka Streams KTable's source topic, a record with a null value (a **tombstone**) for a
key deletes that key from the table's store. ``with_departures`` adds one to a dataset
for every key, right after the key's last record (same Kafka timestamp): the user logged
out, the device was retired. What a query does with such a record is the engine's choice:
Spark's aggregations read it as a malformed event (its value is no JSON object); a
processor can delete the key (``statekit.processor.table_stream``).

Example:
    >>> import pandas as pd
    >>> ds = Dataset("x", pd.DataFrame({"key": ["a", "a", "b"], "value": ["1", "2", "3"],
    ...                                 "timestamp": [10, 11, 12]}))
    >>> with_departures(ds).records.to_dict("list")["value"]
    ['1', '2', None, '3', None]
"""

from __future__ import annotations

import pandas as pd

from statekit.datasets.dataset import Dataset
from statekit.errors import BadArgument


def with_departures(dataset: Dataset) -> Dataset:
    """``dataset`` with a tombstone (the key, a None value, the key's last timestamp) right
    after each key's last record; records without a key get none.

    Raises:
        BadArgument: ``dataset`` is not a ``Dataset`` with ``key``, ``value`` and
            ``timestamp`` columns.
    """
    records = getattr(dataset, "records", None)
    if not isinstance(records, pd.DataFrame) or not {"key", "value", "timestamp"} <= set(
            records.columns):
        raise BadArgument("dataset", type(dataset).__name__,
                          "a statekit Dataset whose records have key, value and timestamp")
    ordered = records.reset_index(drop=True)
    keyed = ordered[ordered["key"].notna()]
    last = keyed.drop_duplicates("key", keep="last")
    tombstones = last.assign(value=None)
    # a tombstone sorts right after its key's last record
    position = pd.concat([pd.Series(ordered.index, dtype="float64"),
                          pd.Series(last.index + 0.5, dtype="float64")], ignore_index=True)
    both = pd.concat([ordered, tombstones], ignore_index=True)
    both = both.iloc[position.argsort(kind="stable")].reset_index(drop=True)
    return Dataset(f"{dataset.name}_with_departures", both,
                   f"{dataset.description}; a tombstone after each key's last record",
                   dataset.schema, dataset.spec)
