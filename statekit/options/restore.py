"""How a restore reads a changelog: which partitions, up to which batch, with which consumers.

``RestoreOptions`` is what ``restore_stores`` (``statekit.restore.rebuild``) takes, or
its fields as keyword arguments (routed by that module's ``SHORTCUTS``).
``consumers="auto"`` chooses the way that restores fastest for the records to read
(``auto_consumers``): worker processes for large restores, a consumer per partition for
middling ones, one consumer for small.

Example:
    >>> RestoreOptions(partitions=[0, 1], to_batch=4).partitions
    (0, 1)
    >>> auto_consumers(50_000, 3)
    'one'
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from statekit.errors import BadArgument
from statekit.options.base import Options
from statekit.processes import available_cpus, processes_supported
from statekit.validate import optional_batch_id, whole_number

#: how restore_stores reads the topic: partitions split among worker processes (one per
#: CPU, each partition with a consumer of its own, written by the worker), a consumer per
#: partition (each in a thread of the caller), one consumer assigned every partition
#: (Kafka Streams' restore consumer), or ``auto``: processes from ``PROCESSES_FROM``
#: records to read (2 partitions and 2 CPUs at least, stores on disk), else a consumer
#: per partition from ``PER_PARTITION_FROM``, else one
CONSUMERS = ("auto", "processes", "per_partition", "one")
_CONSUMERS_ACCEPTED = "'auto', 'processes', 'per_partition' or 'one'"
#: below this many records to read, one consumer restores faster than one per partition
#: (the threads' consumers cost more to start than they save: ``bench.restore``)
PER_PARTITION_FROM = 250_000
#: from this many records to read, worker processes restore faster than threads. A worker
#: costs ~0.5 s to start (a fresh interpreter importing pandas, pyarrow, confluent-kafka
#: and rocksdict), which the interpreter of its own gains back only on a large restore.
#: Measured with ``nice -n 10`` on the shared 2-core machine (3 partitions, 2 workers,
#: medians, 2026-11-29): 100,000 records: processes 1.12 s, threads 0.61 s; 300,000:
#: 1.69 / 1.45 s; 450,000: 2.41 / 2.45 s; 600,000: 2.81 / 2.95 s (processes ahead in 4
#: rounds of 4). Between the last two, then.
PROCESSES_FROM = 500_000


@dataclass(frozen=True)
class RestoreOptions(Options):
    """Which part of a changelog a restore reads, and how: ``partitions`` (all when None),
    ``to_batch`` (stop before the first record of a later batch: the store at that batch),
    ``chunk`` (records consumed per fetch; each partition's share is one write batch),
    ``consumers`` (``"auto"``, ``"processes"``, ``"per_partition"`` or ``"one"``: see
    ``restore_stores``),
    ``progress`` (one tqdm bar for the topic; None: for restores over 100,000 records),
    ``label`` (a ``source`` column in the events, e.g. "raw log" or "compacted")."""

    partitions: tuple[int, ...] | None = None
    to_batch: int | None = None
    chunk: int = 50_000
    consumers: str = "auto"
    progress: bool | None = None
    label: str | None = None

    def __post_init__(self):
        if self.partitions is not None:  # each checked against the topic's by the restore
            if isinstance(self.partitions, (str, bytes)) or not isinstance(self.partitions,
                                                                           Iterable):
                raise BadArgument("partitions", self.partitions,
                                  "a list of partition numbers, or None for all")
            object.__setattr__(self, "partitions", tuple(self.partitions))
        object.__setattr__(self, "to_batch", optional_batch_id(self.to_batch, "to_batch"))
        object.__setattr__(self, "chunk", whole_number(self.chunk, "chunk", minimum=1))
        if self.consumers not in CONSUMERS:
            raise BadArgument("consumers", self.consumers, _CONSUMERS_ACCEPTED)


def auto_consumers(records: int, partitions: int, on_disk: bool = True,
                   cpus: int | None = None) -> str:
    """What ``consumers="auto"`` reads ``records`` of ``partitions`` partitions with:
    ``processes`` from ``PROCESSES_FROM`` records (with 2 partitions, 2 CPUs and stores on
    disk at least, on Linux or macOS), else ``per_partition`` from ``PER_PARTITION_FROM``,
    else ``one``.

    Example:
        >>> auto_consumers(50_000, 3), auto_consumers(300_000, 3, cpus=2)
        ('one', 'per_partition')
        >>> auto_consumers(5_000_000, 3, cpus=2), auto_consumers(5_000_000, 1, cpus=2)
        ('processes', 'per_partition')
        >>> auto_consumers(5_000_000, 3, on_disk=False, cpus=2)   # in-memory stores
        'per_partition'
        >>> auto_consumers(5_000_000, 3, cpus=1)
        'per_partition'
    """
    cpus = available_cpus() if cpus is None else cpus
    if records >= PROCESSES_FROM and partitions >= 2 and cpus >= 2 and on_disk \
            and processes_supported():
        return "processes"
    return "per_partition" if records >= PER_PARTITION_FROM else "one"
