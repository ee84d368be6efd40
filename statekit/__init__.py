"""statekit: see inside a stream processor's state.

Example:
    >>> import statekit as sk                                             # doctest: +SKIP
    >>> broker = sk.EmbeddedBroker().start()                              # doctest: +SKIP
    >>> q = sk.start_query("games", kafka=broker,
    ...                    window=sk.tumbling("10 minutes"))              # doctest: +SKIP
    >>> q.wait_until_drained(); q.snapshot()                              # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from statekit._lazy import lazy_exports
from statekit.errors import (
    AlreadyAttached,
    BadArgument,
    BatchNotRetained,
    BrokerUnreachable,
    ChangelogError,
    ChangelogFenced,
    CheckpointError,
    CheckpointNotShared,
    ClusterStartError,
    CorruptFile,
    DataLoss,
    DiskFull,
    HandoutFailed,
    IncompatibleRestart,
    InstanceDown,
    KafkaJarsMissing,
    KafkaStreamsAppError,
    KafkaStreamsStateError,
    NoLiveInstance,
    NotOnConnect,
    NotShippedYet,
    NotSolved,
    ObjectStoreError,
    PartitionNotHeld,
    PartitionUnavailable,
    PositionNotReached,
    ProcessorError,
    RestoreWorkerLost,
    ResultTooLarge,
    S3AJarsMissing,
    StatekitError,
    StoreClosed,
    StoreCorrupt,
    StoreLocked,
    StoreMismatch,
    TokenRefused,
    TopicNotFound,
    UnsupportedRead,
    WorkersLackStatekit,
)

# Everything else is imported on first use (PEP 562): Spark's Python workers import
# ``statekit.spark.kafka_source`` for every streaming source, and must not pay for pandas,
# Altair and the rest of the package (about a second) before they read a record.
_NAMES = {  # name → the subpackage that exports it (which knows its module)
    **dict.fromkeys(("EmbeddedBroker", "KafkaConnection", "TopicRef"), "statekit.kafka"),
    **dict.fromkeys(("Aggregate", "QuerySpec", "WindowSpec", "hopping", "session", "tumbling",
                     "QueryHandle"), "statekit.model"),
    **dict.fromkeys(("SourceOptions", "RunOptions", "ReplayOptions", "RestoreOptions",
                     "ServeOptions", "GlobalTable", "ServingSecurity"), "statekit.options"),
    **dict.fromkeys(("StatefulQuery", "start_query", "RestartCheck"), "statekit.query"),
    "check_restart": "statekit.processor",
    "spark_session": "statekit.spark.session",
    **dict.fromkeys(("Checkpoint", "StateReader", "apply_changes"), "statekit.spark_state"),
    "Changelog": "statekit.changelog",
    **dict.fromkeys(("RestorePreflight", "restore_preflight", "restore_stores"),
                    "statekit.restore"),
    "ServingClient": "statekit.serve",
    "StandbyReplica": "statekit.standby",
    **dict.fromkeys(("ProcessorQuery", "start_processor"), "statekit.processor"),
    **dict.fromkeys(("CheckpointView", "StateDiff", "diff", "open_checkpoint"),
                   "statekit.inspect"),
    **dict.fromkeys(("AttachedQuery", "attach"), "statekit.live"),
    "open_kafka_streams": "statekit.kafka_streams",
}
SUBPACKAGES = ("changelog", "charts", "datasets", "inspect", "kafka", "kafka_streams", "live",
               "model",
               "monitor", "options", "processor", "query", "reference", "restore", "serve",
               "spark", "spark_state", "standby", "stores", "widgets", "workshop")

if TYPE_CHECKING:  # for type checkers and IDEs: the names as if imported eagerly
    from statekit import (
        changelog,
        charts,
        datasets,
        inspect,
        kafka,
        kafka_streams,
        live,
        model,
        monitor,
        options,
        processor,
        query,
        reference,
        restore,
        serve,
        spark,
        spark_state,
        standby,
        stores,
        widgets,
        workshop,
    )
    from statekit.changelog.log import Changelog
    from statekit.inspect.diff_result import StateDiff
    from statekit.inspect.state_diff import diff
    from statekit.inspect.view import CheckpointView, open_checkpoint
    from statekit.kafka.broker import EmbeddedBroker
    from statekit.kafka_streams.state_dir import open_kafka_streams
    from statekit.live.handle import AttachedQuery, attach
    from statekit.model.connection import KafkaConnection, TopicRef
    from statekit.model.query_handle import QueryHandle
    from statekit.model.query_spec import (
        Aggregate,
        QuerySpec,
        WindowSpec,
        hopping,
        session,
        tumbling,
    )
    from statekit.options.query import RunOptions, SourceOptions
    from statekit.options.replay import ReplayOptions
    from statekit.options.restore import RestoreOptions
    from statekit.options.security import ServingSecurity
    from statekit.options.serve import GlobalTable, ServeOptions
    from statekit.processor.query import ProcessorQuery, start_processor
    from statekit.processor.restart import check_restart
    from statekit.query.restart_check import RestartCheck
    from statekit.query.start import start_query
    from statekit.query.stateful import StatefulQuery
    from statekit.restore.preflight import RestorePreflight, restore_preflight
    from statekit.restore.rebuild import restore_stores
    from statekit.serve.client import ServingClient
    from statekit.spark.session import spark_session
    from statekit.spark_state.changes import apply_changes
    from statekit.spark_state.checkpoint import Checkpoint
    from statekit.spark_state.state_reader import StateReader
    from statekit.standby.replica import StandbyReplica

__getattr__, __dir__ = lazy_exports(__name__, _NAMES, SUBPACKAGES)

__version__ = "0.1.0"

__all__ = [
    "Aggregate",
    "AlreadyAttached",
    "AttachedQuery",
    "BadArgument",
    "BatchNotRetained",
    "BrokerUnreachable",
    "Changelog",
    "ChangelogError",
    "ChangelogFenced",
    "Checkpoint",
    "CheckpointError",
    "CheckpointNotShared",
    "CheckpointView",
    "ClusterStartError",
    "CorruptFile",
    "DataLoss",
    "DiskFull",
    "EmbeddedBroker",
    "GlobalTable",
    "HandoutFailed",
    "IncompatibleRestart",
    "InstanceDown",
    "KafkaConnection",
    "KafkaJarsMissing",
    "KafkaStreamsAppError",
    "KafkaStreamsStateError",
    "NoLiveInstance",
    "NotOnConnect",
    "NotShippedYet",
    "NotSolved",
    "ObjectStoreError",
    "PartitionNotHeld",
    "PartitionUnavailable",
    "PositionNotReached",
    "ProcessorError",
    "ProcessorQuery",
    "QueryHandle",
    "QuerySpec",
    "ReplayOptions",
    "RestartCheck",
    "RestoreOptions",
    "RestorePreflight",
    "RestoreWorkerLost",
    "ResultTooLarge",
    "RunOptions",
    "S3AJarsMissing",
    "ServeOptions",
    "ServingClient",
    "ServingSecurity",
    "SourceOptions",
    "StandbyReplica",
    "StateDiff",
    "StateReader",
    "StatefulQuery",
    "StatekitError",
    "StoreClosed",
    "StoreCorrupt",
    "StoreLocked",
    "StoreMismatch",
    "TokenRefused",
    "TopicNotFound",
    "TopicRef",
    "UnsupportedRead",
    "WindowSpec",
    "WorkersLackStatekit",
    "apply_changes",
    "attach",
    "changelog",
    "charts",
    "check_restart",
    "datasets",
    "diff",
    "hopping",
    "inspect",
    "kafka",
    "kafka_streams",
    "live",
    "model",
    "monitor",
    "open_checkpoint",
    "open_kafka_streams",
    "options",
    "processor",
    "query",
    "reference",
    "restore",
    "restore_preflight",
    "restore_stores",
    "serve",
    "session",
    "spark",
    "spark_session",
    "spark_state",
    "standby",
    "start_processor",
    "start_query",
    "stores",
    "tumbling",
    "widgets",
    "workshop",
]
