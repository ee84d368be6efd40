"""The same results computed by plain pandas: references to check Spark's state against.

``aggregates``: windowed and running aggregates per key (``windowed_reference``);
``sessions``: session windows. Pure pandas, no Spark: a test or a notebook compares a
snapshot of the state store with them.

Example:
    >>> from statekit.reference import windowed_reference
    >>> windowed_reference.__module__
    'statekit.reference.aggregates'
"""

from statekit._lazy import lazy_exports

_NAMES = {"windowed_reference": "statekit.reference.aggregates"}
__getattr__, __dir__ = lazy_exports(__name__, _NAMES)
__all__ = sorted(_NAMES)
