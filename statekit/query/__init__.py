"""The stateful query: what it computes (``spec``), starting and watching it (``stateful``),
its progress reports, and the same aggregates in plain pandas (``reference``).

Names resolve on first use: ``statekit.query.spec`` loads without pyspark.
"""

from statekit._lazy import lazy_exports

_NAMES = {
    "Aggregate": "statekit.query.spec",
    "QuerySpec": "statekit.query.spec",
    "WindowSpec": "statekit.query.spec",
    "hopping": "statekit.query.spec",
    "session": "statekit.query.spec",
    "tumbling": "statekit.query.spec",
    "RunOptions": "statekit.query.options",
    "SourceOptions": "statekit.query.options",
    "StatefulQuery": "statekit.query.stateful",
    "parse_events": "statekit.query.stateful",
    "start_query": "statekit.query.stateful",
    "progress_frame": "statekit.query.progress",
    "windowed_reference": "statekit.query.reference",
}
__getattr__, __dir__ = lazy_exports(__name__, _NAMES)
__all__ = sorted(_NAMES)
