"""Write your own stateful processor, with Kafka-Streams-shaped stores, run by Spark.

A ``Processor`` subclass declares stores (``key_value_store``, ``window_store``,
``session_store``: each one transformWithState map state named by the store), an
``output`` and a clock (``time``), and writes ``init(stores)``, ``process(key, rows)``
and ``@schedule(every)`` punctuations. ``start_processor`` runs it with
``transformWithStateInPandas``; the ``ProcessorQuery`` it returns reads each store by
name (``snapshot(store)``, ``changes(store, from_batch)``).

Modules: ``fields`` (store field types and checks), ``layout`` (store declarations and
where each lies in Spark's state: the one place that says so), ``stores`` (the stores a
processor uses inside Spark's Python worker, and what each method scans; a session store's
names and ``Session`` are the local stores'), ``map_store`` (the map state under each store:
the call's cache, the checks, retention), ``processor``
(``Processor``, ``schedule``, the runner Spark calls), ``frame`` (the streaming DataFrame
a processor runs as), ``query`` (``start_processor``, ``ProcessorQuery``), ``restart``
(``check_restart`` for every kind of new query, a processor included), ``examples``
(sessions, deduplication with a TTL, a per-player rule), ``table_stream`` (a keyed topic
read as a table: a tombstone deletes the key's state), ``cleanup_job`` (an external job that
deletes idle keys by writing tombstones), ``top_k`` (a store of your own shape over a named
store);
``ProcessorError`` lives with every other error in ``statekit.errors``.

Example:
    >>> from statekit.processor import key_value_store
    >>> seen = key_value_store("seen", key="id string", value="at timestamp")
    >>> seen.layout(["player"]).key_columns
    ('player', 'id')
"""

from statekit._lazy import lazy_exports

_NAMES = {
    "Processor": "statekit.processor.processor",
    "schedule": "statekit.processor.processor",
    "plan_of": "statekit.processor.processor",
    "key_value_store": "statekit.processor.layout",
    "window_store": "statekit.processor.layout",
    "session_store": "statekit.processor.layout",
    "StoreSpec": "statekit.processor.layout",
    "StoreLayout": "statekit.processor.layout",
    "Session": "statekit.model.session_key",
    "KeyValueStore": "statekit.processor.stores",
    "WindowStore": "statekit.processor.stores",
    "SessionStore": "statekit.processor.stores",
    "ProcessorError": "statekit.errors",
    "ProcessorQuery": "statekit.processor.query",
    "start_processor": "statekit.processor.query",
    "processor_frame": "statekit.processor.frame",
    "ProcessorFrame": "statekit.processor.frame",
    "check_restart": "statekit.processor.restart",
}
__getattr__, __dir__ = lazy_exports(__name__, _NAMES)
__all__ = sorted(_NAMES)
