"""Reading a query's state: snapshots, the change feed, store metadata."""

from statekit.state.changes import apply_changes
from statekit.state.reader import StateReader

__all__ = ["StateReader", "apply_changes"]
