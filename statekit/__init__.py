"""statekit: see inside a stream processor's state.

Example:
    >>> import statekit as sk                                             # doctest: +SKIP
    >>> broker = sk.EmbeddedBroker().start()                              # doctest: +SKIP
    >>> q = sk.start_query("games", bootstrap_servers=broker.bootstrap_servers,
    ...                    window=sk.tumbling("10 minutes"))              # doctest: +SKIP
    >>> q.wait_until_drained(); q.snapshot()                              # doctest: +SKIP
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from statekit.errors import (
    BadArgument,
    BatchNotRetained,
    BrokerUnreachable,
    ChangelogError,
    CheckpointError,
    DataLoss,
    StatekitError,
    TopicNotFound,
)

# Everything else is imported on first use (PEP 562): Spark's Python workers import
# ``statekit.spark.source`` for every streaming source, and must not pay for pandas, Altair
# and the rest of the package (about a second) before they read a record.
_LAZY = {
    "EmbeddedBroker": "statekit.kafka.broker",
    "Aggregate": "statekit.query.spec",
    "QuerySpec": "statekit.query.spec",
    "WindowSpec": "statekit.query.spec",
    "hopping": "statekit.query.spec",
    "session": "statekit.query.spec",
    "tumbling": "statekit.query.spec",
    "StatefulQuery": "statekit.query.stateful",
    "start_query": "statekit.query.stateful",
    "spark_session": "statekit.spark.session",
    "StateReader": "statekit.state",
    "apply_changes": "statekit.state",
}
_SUBPACKAGES = ("changelog", "charts", "restore", "stores")

if TYPE_CHECKING:  # for type checkers and IDEs: the names as if imported eagerly
    from statekit import changelog, charts, restore, stores
    from statekit.kafka.broker import EmbeddedBroker
    from statekit.query.spec import Aggregate, QuerySpec, WindowSpec, hopping, session, tumbling
    from statekit.query.stateful import StatefulQuery, start_query
    from statekit.spark.session import spark_session
    from statekit.state import StateReader, apply_changes


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
    elif name in _SUBPACKAGES:
        value = importlib.import_module(f"statekit.{name}")
    else:
        raise AttributeError(f"module 'statekit' has no attribute {name!r}")
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__version__ = "0.1.0"

__all__ = [
    "Aggregate",
    "BadArgument",
    "BatchNotRetained",
    "BrokerUnreachable",
    "ChangelogError",
    "CheckpointError",
    "DataLoss",
    "EmbeddedBroker",
    "QuerySpec",
    "StateReader",
    "StatefulQuery",
    "StatekitError",
    "TopicNotFound",
    "WindowSpec",
    "apply_changes",
    "changelog",
    "charts",
    "restore",
    "stores",
    "hopping",
    "session",
    "spark_session",
    "start_query",
    "tumbling",
]
