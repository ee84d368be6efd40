"""Restoration: rebuild local stores from a changelog, keep standby replicas, run drills.

Kept apart from the stores themselves (``statekit.stores``), as Kafka Streams and
Quix Streams keep recovery apart from storage. Names resolve on first use, so a
store-owner worker process loads the stores and the restore code only.
"""

from statekit._lazy import lazy_exports

_NAMES = {
    **{name: "statekit.restore.changelog" for name in (
        "RestoreOptions", "RestoreResult", "compacted_copy", "open_partition_store",
        "restore_stores", "store_kind")},
    "SCENARIOS": "statekit.restore.drill",
    "failover_drill": "statekit.restore.drill",
    "Listeners": "statekit.restore.listener",
    "RecordingListener": "statekit.restore.listener",
    "RestoreListener": "statekit.restore.listener",
    "SparkRestartDrill": "statekit.restore.spark_drill",
    "DrillPlan": "statekit.restore.spark_drill",
    "spark_restart_drill": "statekit.restore.spark_drill",
    "StandbyReplica": "statekit.restore.standby",
}
__getattr__, __dir__ = lazy_exports(__name__, _NAMES)
__all__ = sorted(_NAMES)
