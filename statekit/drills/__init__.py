"""Crash drills: kill a process holding state, restart it, and measure what comes back.

``failover``: a store owner killed and its standby promoted, or a store rebuilt from its
changelog (``failover_drill``, ``SCENARIOS``); ``spark_restart``: a Spark query killed
with ``kill -9`` and restarted from its checkpoint (``spark_restart_drill``); ``worker``:
the processes a drill kills (``python -m statekit.drills (query|store) CONFIG_JSON``).

Example:
    >>> from statekit.drills import SCENARIOS
    >>> "standby" in SCENARIOS
    True
"""

from statekit._lazy import lazy_exports

_NAMES = {
    "SCENARIOS": "statekit.drills.failover",
    "failover_drill": "statekit.drills.failover",
    "SparkRestartDrill": "statekit.drills.spark_restart",
    "DrillPlan": "statekit.drills.spark_restart",
    "spark_restart_drill": "statekit.drills.spark_restart",
}
__getattr__, __dir__ = lazy_exports(__name__, _NAMES)
__all__ = sorted(_NAMES)
