"""A query whose driver-side Python worker dies before its first batch is started again, once.

Pure logic of ``StatefulQuery._restart_after_planning_crash`` with stand-ins for Spark's
query handle (the crash itself cannot be caused on purpose).
"""

from __future__ import annotations

import pytest

from statekit.errors import StatekitError
from statekit.query.stateful import PLANNING_CRASH, StatefulQuery
from statekit.state.checkpoint import Checkpoint


class Failed:
    name, isActive = "q", False

    def __init__(self, message: str):
        self.message = message

    def exception(self):
        return RuntimeError(self.message)


class Running:
    name, isActive = "q", True

    def exception(self):
        return None


def handle(tmp_path, query, restart):
    q = StatefulQuery.__new__(StatefulQuery)
    q.checkpoint, q.query, q._started_batches = Checkpoint(tmp_path), query, 0
    q._restart, q._restarted = restart, False
    return q


def test_a_planning_crash_before_any_batch_starts_the_query_again_once(tmp_path):
    started = []
    q = handle(tmp_path, Failed(f"TransformWithStateInPySpark {PLANNING_CRASH} (crashed)"),
               lambda: started.append(1) or Running())
    with pytest.warns(RuntimeWarning, match="starting the query again"):
        q._raise_if_failed()
    assert started == [1] and isinstance(q.query, Running)
    q.query = Failed(f"TransformWithStateInPySpark {PLANNING_CRASH} (crashed)")
    with pytest.raises(StatekitError, match=PLANNING_CRASH):   # a second crash is raised
        q._raise_if_failed()


def test_other_failures_are_raised_with_their_message(tmp_path):
    q = handle(tmp_path, Failed("[DIVIDE_BY_ZERO] Division by zero"), lambda: Running())
    with pytest.raises(StatekitError, match="query 'q' failed: .*DIVIDE_BY_ZERO"):
        q._raise_if_failed()
