"""statekit: see inside a stream processor's state.

Example:
    >>> import statekit as sk                                             # doctest: +SKIP
    >>> broker = sk.EmbeddedBroker().start()                              # doctest: +SKIP
    >>> q = sk.start_query("games", bootstrap_servers=broker.bootstrap_servers,
    ...                    window=sk.tumbling("10 minutes"))              # doctest: +SKIP
    >>> q.wait_until_drained(); q.snapshot()                              # doctest: +SKIP
"""

from statekit import changelog, charts, restore, stores
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
from statekit.kafka.broker import EmbeddedBroker
from statekit.query.spec import Aggregate, QuerySpec, WindowSpec, hopping, session, tumbling
from statekit.query.stateful import StatefulQuery, start_query
from statekit.spark.session import spark_session
from statekit.state import StateReader, apply_changes

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
