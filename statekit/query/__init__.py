"""The stateful query: starting it (``stateful``: ``start_query`` and its handle), where its
events come from (``source``) and how they are parsed (``parsing``), what it computes
(``aggregation``), watching it run (``running``, ``failures``), its late events
(``late_events``), why a key holds its value (``explain``) and whether a changed one will
restart on its checkpoint (``restart_check``).

What it computes is described in ``statekit.model.query_spec``, its progress reports are
read by ``statekit.spark_state.progress`` and the same aggregates in plain pandas are in
``statekit.reference``. Names resolve on first use.
"""

from statekit._lazy import lazy_exports

_NAMES = {
    "RestartCheck": "statekit.query.restart_check",
    "StatefulQuery": "statekit.query.stateful",
    "check_restart": "statekit.query.restart_check",
    "parse_events": "statekit.query.parsing",
    "start_query": "statekit.query.start",
}
__getattr__, __dir__ = lazy_exports(__name__, _NAMES)
__all__ = sorted(_NAMES)
