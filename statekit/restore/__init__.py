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
from statekit.restore.drill import SCENARIOS, failover_drill
from statekit.restore.listener import Listeners, RecordingListener, RestoreListener
from statekit.restore.panel import DrillPanel
from statekit.restore.spark_drill import SparkRestartDrill, spark_restart_drill
from statekit.restore.standby import StandbyReplica

__all__ = [
    "SCENARIOS",
    "DrillPanel",
    "Listeners",
    "RecordingListener",
    "RestoreListener",
    "RestoreResult",
    "SparkRestartDrill",
    "StandbyReplica",
    "compacted_copy",
    "failover_drill",
    "open_partition_store",
    "restore_stores",
    "spark_restart_drill",
    "store_kind",
]
