"""Descriptions every layer shares, and nothing else: the bottom of statekit's layers.

What a query computes (``query_spec``: ``QuerySpec``, windows, aggregates), what a
changelog's store holds (``store_schema``), a session store's entry key (``session_key``:
``Session``, one type for the local stores and a processor's), the verbs every query
handle answers (``query_handle``: ``QueryHandle``), the changelog record codec
(``changelog_record``: key and value JSON, the batch headers) and where Kafka is
(``connection``: ``KafkaConnection``, ``TopicRef``). Plain values, no I/O; these modules import only
``statekit.errors``, ``statekit.validate``, ``statekit.durations`` and each other, so any
layer above may use them.

Example:
    >>> from statekit.model import QuerySpec, tumbling
    >>> QuerySpec(keys=["player"], window=tumbling("10 minutes")).windowed
    True
"""

from statekit._lazy import lazy_exports

_NAMES = {
    "Aggregate": "statekit.model.query_spec",
    "QuerySpec": "statekit.model.query_spec",
    "WindowSpec": "statekit.model.query_spec",
    "hopping": "statekit.model.query_spec",
    "session": "statekit.model.query_spec",
    "tumbling": "statekit.model.query_spec",
    "PartReader": "statekit.model.query_handle",
    "QueryHandle": "statekit.model.query_handle",
    "PartShape": "statekit.model.store_schema",
    "Session": "statekit.model.session_key",
    "StoreSchema": "statekit.model.store_schema",
    "WriterInfo": "statekit.model.store_schema",
    "KafkaConnection": "statekit.model.connection",
    "TopicRef": "statekit.model.connection",
    "connect": "statekit.model.connection",
    "decode_json": "statekit.model.changelog_record",
    "encode_key": "statekit.model.changelog_record",
}
__getattr__, __dir__ = lazy_exports(__name__, _NAMES)
__all__ = sorted(_NAMES)
