"""What exactly-once shipping leaves in a changelog topic: one transaction per round, and the
offsets its commit markers take.

statekit ships each round of committed batches as one Kafka transaction. When a transaction
ends, the broker writes a **control record** (a commit or abort marker) into every partition
it wrote to: it takes an offset, and no reader ever sees it as a record. A
``read_committed`` reader (statekit's) also skips the records of aborted transactions. So
in a changelog read back, the offsets between two records are markers (and aborted records),
and the batches of one transaction sit between two markers.

Example:
    >>> import pandas as pd
    >>> records = pd.DataFrame({"partition": [0, 0, 0, 1], "offset": [0, 1, 3, 0],
    ...                         "batch": [0, 0, 1, 1]})
    >>> transaction_marks(records, ends={0: 5, 1: 2})
       partition  records  batches  offsets  without_record  transactions
    0          0        3        2        5               2             2
    1          1        1        1        2               1             1
"""

from __future__ import annotations

from collections.abc import Mapping

from statekit._lazy import pd
from statekit.changelog.log import Changelog, records_of
from statekit.validate import require_columns


def transaction_marks(changelog: Changelog | pd.DataFrame,
                      ends: Mapping[int, int] | None = None) -> pd.DataFrame:
    """Per partition: ``records`` read, ``batches`` they come from, ``offsets`` used (from the
    first record to ``ends[partition]``, the high watermark, or to the last record),
    ``without_record`` (offsets no record holds: markers and aborted records) and
    ``transactions`` (runs of records between two such offsets: each ended by a marker)."""
    records = records_of(changelog) if isinstance(changelog, Changelog) else changelog
    require_columns(records, ["partition", "offset", "batch"], "changelog records",
                    "as read_changelog() gives (read before the broker compacts it)")
    rows = []
    for partition, part in records.sort_values(["partition", "offset"]).groupby("partition"):
        offsets = part["offset"].to_numpy()
        first = int(offsets[0])
        end = int((ends or {}).get(int(partition), offsets[-1] + 1))
        gaps = (offsets[1:] - offsets[:-1]) > 1
        trailing = end > offsets[-1] + 1
        rows.append({"partition": int(partition), "records": len(part),
                     "batches": int(part["batch"].nunique()), "offsets": end - first,
                     "without_record": end - first - len(part),
                     "transactions": int(gaps.sum()) + int(trailing)})
    return pd.DataFrame(rows, columns=["partition", "records", "batches", "offsets",
                                       "without_record", "transactions"])
