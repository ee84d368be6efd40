"""Reading a query's state: the checkpoint layout, snapshots, the change feed, Spark's state files.

Names resolve on first use, so ``statekit.state.checkpoint`` and
``statekit.state.changes`` load without pyspark.
"""

from statekit._lazy import lazy_exports

_NAMES = {
    "Checkpoint": "statekit.state.checkpoint",
    "apply_changes": "statekit.state.changes",
    "same_rows": "statekit.state.changes",
    "StateReader": "statekit.state.reader",
    "restore_plan": "statekit.state.spark_files",
    "state_files": "statekit.state.spark_files",
    "with_restore_use": "statekit.state.spark_files",
    "restart_summary": "statekit.state.restart",
    "restart_timeline": "statekit.state.restart",
    "state_store_events": "statekit.state.restart",
}
__getattr__, __dir__ = lazy_exports(__name__, _NAMES)
__all__ = sorted(_NAMES)
