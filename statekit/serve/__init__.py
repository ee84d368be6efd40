"""Interactive queries: serve the live state by key from instances kept current by the changelog.

``serve(kafka, topic, instances=3, standbys=1)`` starts serving processes on this
machine; ``ServingCluster.client()`` (or ``ServingClient(urls)``) routes point
lookups to the partition's owner — the partition Spark itself keeps the row in
(``placement``) — and scatters and gathers the rest, falling back to standbys.
A ``ServingInstance`` is one instance in this process; ``statekit.serve.rest``
serves it over HTTP (beyond loopback with a token and TLS: ``ServingSecurity``).
Names resolve on first use.
"""

from statekit._lazy import lazy_exports

_NAMES = {
    "Assignment": "statekit.serve.routing.assignment",
    "assign": "statekit.serve.routing.assignment",
    "ServingCluster": "statekit.serve.cluster",
    "serve": "statekit.serve.cluster",
    "ServingClient": "statekit.serve.client",
    "KeyMetadata": "statekit.serve.router",
    "InstanceDown": "statekit.errors",
    "TokenRefused": "statekit.errors",
    "ServingInstance": "statekit.serve.instance",
    "PartitionNotHeld": "statekit.errors",
    "KeyCodec": "statekit.serve.routing.key_codec",
    "spark_hash": "statekit.serve.routing.value_hash",
    "state_partition": "statekit.serve.routing.placement",
    "QueryResult": "statekit.serve.results",
    "PartitionAnswer": "statekit.serve.results",
    "PartitionUnavailable": "statekit.errors",
    "PositionNotReached": "statekit.errors",
}
__getattr__, __dir__ = lazy_exports(__name__, _NAMES)
__all__ = sorted(_NAMES)
