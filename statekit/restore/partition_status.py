"""Where one changelog partition's local store stands: restoring or running, at which batch.

Example:
    >>> status = PartitionStatus(2, RESTORING, next_offset=1200, restore_from=0,
    ...                          restore_to=5000)
    >>> status.describe()
    'restoring, 1,200 of 5,000 records'
    >>> reached(status, 0)
    False
"""

from __future__ import annotations

from dataclasses import dataclass

RESTORING, RUNNING = "restoring", "running"
STATUS_COLUMNS = ["partition", "state", "next_offset", "restored", "to_restore", "batch",
                  "shipped_batch", "lag_batches"]


@dataclass(frozen=True)
class PartitionStatus:
    """Where one partition's store stands.

    ``state`` is ``restoring`` until ``next_offset`` reaches ``restore_to`` (the log's
    end when the partition was added), then ``running``. ``batch`` is the batch the
    store reflects (-1: none yet); ``shipped_batch`` the last batch the changelog
    writer has shipped, so ``lag_batches`` is how many batches the store is behind.
    """

    partition: int
    state: str
    next_offset: int
    restore_from: int
    restore_to: int
    batch: int = -1
    shipped_batch: int = -1

    @property
    def restored(self) -> int:
        """Records read since the restore began."""
        return max(0, self.next_offset - self.restore_from)

    @property
    def to_restore(self) -> int:
        """Records the restore has to read in all."""
        return max(0, self.restore_to - self.restore_from)

    @property
    def lag_batches(self) -> int:
        return max(0, self.shipped_batch - self.batch)

    def describe(self) -> str:
        """``restoring, 1,200 of 5,000 records`` or ``running at batch 9``."""
        if self.state == RESTORING:
            return f"restoring, {self.restored:,} of {self.to_restore:,} records"
        return f"{self.state} at batch {self.batch}"



def reached(status: PartitionStatus, batch: int) -> bool:
    return status.state == RUNNING and status.batch >= batch
