"""The stateful query: what it computes (``spec``), starting and watching it (``stateful``),
its progress reports, and the same aggregates in plain pandas (``reference``).

Names resolve on first use: ``statekit.model.query_spec`` loads without pyspark.
"""

from statekit._lazy import lazy_exports

_NAMES = {
    "Aggregate": "statekit.model.query_spec",
    "QuerySpec": "statekit.model.query_spec",
    "WindowSpec": "statekit.model.query_spec",
    "hopping": "statekit.model.query_spec",
    "session": "statekit.model.query_spec",
    "tumbling": "statekit.model.query_spec",
    "StatefulQuery": "statekit.query.stateful",
    "parse_events": "statekit.query.stateful",
    "start_query": "statekit.query.stateful",
    "progress_frame": "statekit.spark_state.progress",
    "windowed_reference": "statekit.reference.aggregates",
}
__getattr__, __dir__ = lazy_exports(__name__, _NAMES)
__all__ = sorted(_NAMES)
