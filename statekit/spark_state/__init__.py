"""Reading a query's state: the checkpoint layout, snapshots, the change feed, Spark's state files.

Names resolve on first use, so ``statekit.spark_state.checkpoint`` and
``statekit.spark_state.changes`` load without pyspark.
"""

from statekit._lazy import lazy_exports

_NAMES = {
    "Checkpoint": "statekit.spark_state.checkpoint",
    "apply_changes": "statekit.spark_state.changes",
    "progress_frame": "statekit.spark_state.progress",
    "same_rows": "statekit.spark_state.changes",
    "StateReader": "statekit.spark_state.state_reader",
    "restore_plan": "statekit.spark_state.spark_files",
    "state_files": "statekit.spark_state.spark_files",
    "with_restore_use": "statekit.spark_state.spark_files",
    "restart_summary": "statekit.spark_state.restart",
    "restart_timeline": "statekit.spark_state.restart",
    "state_store_events": "statekit.spark_state.store_log",
}
__getattr__, __dir__ = lazy_exports(__name__, _NAMES)
__all__ = sorted(_NAMES)
