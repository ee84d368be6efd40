"""The live half for any query: attach statekit to a streaming query a person started with
their own PySpark code.

``attach(query)`` takes a running ``StreamingQuery`` (any source, any sink, any stateful
operators) and gives a live handle with the verbs of every handle
(``statekit.model.query_handle.QueryHandle``): ``parts()``, ``snapshot(part)``,
``changes(part, ...)``, ``progress()``, ``describe()``, ``wait_for_batches(n)``, ``close()``,
and ``operators()``, ``states()``, ``health()`` besides. Attaching reads only: the query's
plan, results and checkpoint stay as they were (statekit writes nothing into the checkpoint).

Modules: ``locate`` (the query's checkpoint, and the checks a query must pass to be
attached), ``handle`` (``AttachedQuery``, ``attach``), ``shipped_parts`` (its parts shipped to
changelog topics and read back, replayed, served), ``reports`` (the progress reports kept in
memory), ``shipping_claims`` (one shipping handle per query), ``own_names`` (the person's
names or Spark's), ``health``, ``changelogs`` (topic and ledger names), ``part_routing``.
"""

from statekit._lazy import lazy_exports

_NAMES = {
    "attach": "statekit.live.handle",
    "AttachedQuery": "statekit.live.handle",
}
__getattr__, __dir__ = lazy_exports(__name__, _NAMES)
__all__ = sorted(_NAMES)
