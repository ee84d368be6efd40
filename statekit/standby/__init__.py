"""Standby replicas: a second copy of a query's local stores, kept current from the changelog.

As Kafka Streams' standby tasks (``num.standby.replicas``), a ``StandbyReplica`` restores
its stores, then tails the changelog and measures its lag; ``promote()`` is a failover.
Serving instances keep their standby partitions the same way (``statekit.serve``).

Example:
    >>> from statekit.standby import StandbyReplica
    >>> StandbyReplica.__name__
    'StandbyReplica'
"""

from statekit._lazy import lazy_exports

_NAMES = {"StandbyReplica": "statekit.standby.replica"}
__getattr__, __dir__ = lazy_exports(__name__, _NAMES)
__all__ = sorted(_NAMES)
