"""Restoration: rebuild local stores from a changelog and keep them current (``tail``).

Standby replicas are in ``statekit.standby``, the crash drills in ``statekit.drills``.

Kept apart from the stores themselves (``statekit.stores``), as Kafka Streams and
Quix Streams keep recovery apart from storage. Names resolve on first use, so a
store-owner worker process loads the stores and the restore code only.
"""

from statekit._lazy import lazy_exports

_NAMES = {
    "restore_stores": "statekit.restore.rebuild",
    "RestoreResult": "statekit.restore.result",
    "compacted_copy": "statekit.restore.compacted",
    "open_partition_store": "statekit.restore.partition",
    "store_kind": "statekit.restore.partition",
    "Listeners": "statekit.restore.listener",
    "RecordingListener": "statekit.restore.listener",
    "RestoreListener": "statekit.restore.listener",
    "RestoreProgress": "statekit.restore.listener",
    "RestoreWorkerLost": "statekit.errors",
    "RestorePreflight": "statekit.restore.preflight",
    "restore_preflight": "statekit.restore.preflight",
}
__getattr__, __dir__ = lazy_exports(__name__, _NAMES)
__all__ = sorted(_NAMES)
