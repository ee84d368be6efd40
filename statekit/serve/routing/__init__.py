"""Routing an interactive query: key → Spark state partition → the instance that owns it.

``key_codec`` makes a key exact (its group keys, window, store bytes); ``partitioner``
computes the state partition exactly as Spark places the row (murmur3, seed 42);
``assignment`` says which serving instance owns each partition (active and standbys).
``statekit.serve.client`` sends each query where these say.

Example:
    >>> from statekit.serve.routing import KeyCodec
    >>> KeyCodec.__module__
    'statekit.serve.routing.key_codec'
"""

from statekit._lazy import lazy_exports

_NAMES = {
    "Assignment": "statekit.serve.routing.assignment",
    "assign": "statekit.serve.routing.assignment",
    "KeyCodec": "statekit.serve.routing.key_codec",
    "spark_hash": "statekit.serve.routing.partitioner",
    "state_partition": "statekit.serve.routing.partitioner",
}
__getattr__, __dir__ = lazy_exports(__name__, _NAMES)
__all__ = sorted(_NAMES)
