"""Open any Spark 4 Structured Streaming checkpoint, read-only: its logs, operators and state.

``open_checkpoint(path)`` needs no statekit query: every stateful operator's state
(aggregations, session windows, deduplication, stream-stream joins, flatMapGroupsWithState
and applyInPandasWithState, transformWithState's variables and timers), on the RocksDB and
the HDFS-backed providers, as pandas frames with nested fields flattened.

Modules: ``view`` (``CheckpointView``, ``open_checkpoint``), ``logs`` (batches, sources,
commits), ``operators`` (kinds and their readable parts), ``part_names`` (one name per
readable part of every operator: ``"<operator_id>/<name>"``), ``part_views``
(``OperatorView``, ``StateView``: snapshots and change feeds), ``state_diff`` (``diff``: what
changed between two snapshots; with ``diff_result``, ``diff_in_spark``, ``diff_in_pandas``),
``flatten`` (the column naming rule), ``plan_names`` (the names a query's plan gives a
join's keys and an aggregation's buffer fields, where Spark's state keeps ``field0``,
``sum``, ``count``), ``limits`` (what Spark's reader cannot do:
``UnsupportedRead``), ``failures`` (Spark's errors as statekit's, naming corrupt files),
``describe`` (``Description``: a summary for a person, with flags).
"""

from statekit._lazy import lazy_exports

_NAMES = {
    "CheckpointView": "statekit.inspect.view",
    "open_checkpoint": "statekit.inspect.view",
    "OperatorView": "statekit.inspect.part_views",
    "StateView": "statekit.inspect.part_views",
    "UnsupportedRead": "statekit.errors",
    "flat_columns": "statekit.inspect.flatten",
    "Description": "statekit.inspect.describe",
    "StateDiff": "statekit.inspect.diff_result",
    "diff": "statekit.inspect.state_diff",
    "find_part": "statekit.inspect.part_names",
    "part_id": "statekit.inspect.part_names",
    "Flag": "statekit.inspect.describe",
}
__getattr__, __dir__ = lazy_exports(__name__, _NAMES)
__all__ = sorted(_NAMES)
