"""Reading a query's state: snapshots, the change feed, store metadata, its files."""

from statekit.state.changes import apply_changes
from statekit.state.files import restore_plan, state_files, with_restore_use
from statekit.state.reader import StateReader
from statekit.state.restart import restart_summary, restart_timeline, state_store_events

__all__ = [
    "StateReader",
    "apply_changes",
    "restart_summary",
    "restart_timeline",
    "restore_plan",
    "state_files",
    "state_store_events",
    "with_restore_use",
]
