"""Restoration: rebuild local stores from a changelog, keep standby replicas, run drills.

Kept apart from the stores themselves (``statekit.stores``), as Kafka Streams and
Quix Streams keep recovery apart from storage.
"""

from statekit.restore.changelog import (
    RestoreResult,
    compacted_copy,
    open_partition_store,
    restore_stores,
    store_kind,
)
from statekit.restore.listener import Listeners, RecordingListener, RestoreListener

__all__ = [
    "Listeners",
    "RecordingListener",
    "RestoreListener",
    "RestoreResult",
    "compacted_copy",
    "open_partition_store",
    "restore_stores",
    "store_kind",
]
