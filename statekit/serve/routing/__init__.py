"""Routing an interactive query: key → Spark state partition → the instance that owns it.

``key_codec`` makes a key exact (its group keys, window, store bytes), checking its
text (``key_text``), times (``key_times``) and values (``key_values``); ``placement``
computes the state partition exactly as Spark places the row, hashing each value as
Spark does (``value_hash``) with Spark's Murmur3 (``murmur3``, seed 42);
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
    "spark_hash": "statekit.serve.routing.value_hash",
    "state_partition": "statekit.serve.routing.placement",
}
__getattr__, __dir__ = lazy_exports(__name__, _NAMES)
__all__ = sorted(_NAMES)
