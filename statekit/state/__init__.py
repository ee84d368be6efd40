"""Reading a query's state: snapshots, the change feed, store metadata, its files."""

from statekit.state.changes import apply_changes
from statekit.state.files import restore_plan, state_files, with_restore_use
from statekit.state.reader import StateReader

__all__ = [
    "StateReader",
    "apply_changes",
    "restore_plan",
    "state_files",
    "with_restore_use",
]
