"""What a lost store costs to get back, with its changelog and without it.

Kafka Streams can switch a store's changelog off (``withLoggingDisabled()``): no writes to
a topic for each change, but after a crash the store is empty and must be **recomputed**
from the input, from the start of what the input topic still retains. With the changelog
on, it is **restored**: the topic is read (compacted: about one record per live key).
``recovery_reads`` puts the three side by side for one store, in records read.

Example:
    >>> reads = recovery_reads(changelog_records=1200, compacted_records=150,
    ...                        input_records=5000)
    >>> reads["records"].tolist(), reads["source"].iloc[2]
    ([1200, 150, 5000], 'recompute: the input, logging off')
"""

from __future__ import annotations

from statekit._lazy import pd
from statekit.errors import BadArgument

SOURCES = ("restore: the changelog, as written", "restore: the changelog, compacted",
           "recompute: the input, logging off")
NEEDS = ("the changelog topic", "the changelog topic, after the log cleaner",
         "every input record the state depends on, still retained")


def recovery_reads(changelog_records: int, compacted_records: int,
                   input_records: int) -> pd.DataFrame:
    """Records read to get one store back, three ways: ``source``, ``records``, ``needs``."""
    counts = {"changelog_records": changelog_records, "compacted_records": compacted_records,
              "input_records": input_records}
    for name, value in counts.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise BadArgument(name, value, "a whole number of records ≥ 0")
    return pd.DataFrame({"source": SOURCES, "records": list(counts.values()),
                         "needs": NEEDS})
