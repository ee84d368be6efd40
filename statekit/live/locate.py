"""Find a running query's checkpoint, and check that statekit can follow the query live.

Spark's public API does not say where a running query keeps its checkpoint. ``locate``
takes it from the person (``checkpoint=``, the query's ``checkpointLocation``), else
from the session's default root (``spark.sql.streaming.checkpointLocation`` /
the query's name), else, on classic PySpark, from the query's JVM object (Spark's
``resolvedCheckpointRoot``; also for the temporary checkpoint of a query started
without a location). Whatever the source, the checkpoint's ``metadata`` must hold the
query's id: a wrong folder is refused by name.

To be followed live a query must be active, keep state (a stateful operator whose
state Spark's reader can read) and give a change feed: Spark's HDFS-backed provider
always does; the RocksDB provider only with changelog checkpointing
(``spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled=true`` when
the query starts). Each refusal names what was found and what works.

Example:
    >>> require_query("not a query")
    Traceback (most recent call last):
    ...
    statekit.errors.BadArgument: bad query: 'str'; accepted: a running \
pyspark.sql.streaming.StreamingQuery (what DataStreamWriter.start() returns)
"""

from __future__ import annotations

import os
import re

from statekit.errors import BadArgument, CheckpointError, StatekitError, UnsupportedRead
from statekit.spark_state.checkpoint import Checkpoint
from statekit.spark_state.spark_files import state_files

ROOT_SETTING = "spark.sql.streaming.checkpointLocation"
PROVIDER_SETTING = "spark.sql.streaming.stateStore.providerClass"
CHANGELOG_SETTING = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
_QUERY_ATTRIBUTES = ("id", "runId", "name", "isActive", "lastProgress", "status")


def require_query(query: object) -> None:
    """BadArgument naming the type unless ``query`` is a streaming query (classic or
    Spark Connect)."""
    if not all(hasattr(type(query), a) for a in _QUERY_ATTRIBUTES):
        raise BadArgument("query", type(query).__name__,
                          "a running pyspark.sql.streaming.StreamingQuery (what "
                          "DataStreamWriter.start() returns)")


def describe_query(query) -> str:
    """``query 'name' (id ...)`` for messages."""
    name = query.name
    return f"query {name!r} (id {query.id})" if name else f"query {query.id}"


_RAISED = re.compile(r"^(\w+\.)*\w*(Error|Exception|Exit|Interrupt)\b(: .*)?$")


def failure_line(text: str) -> str:
    r"""The line of a query's failure that says what went wrong: Spark's first line, and
    where a Python worker's traceback follows, the exception it ends with.

    Example:
        >>> failure_line("[PYTHON_EXCEPTION] From the worker: Traceback (most recent call "
        ...              "last):\n  File \"job.py\", line 3\nValueError: bad score\n\tat org")
        '[PYTHON_EXCEPTION] From the worker: ValueError: bad score'
    """
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    if not lines:
        return "no message"
    first = lines[0]
    if "Traceback (most recent call last)" not in first:
        return first
    raised = [line for line in lines if _RAISED.match(line)]
    head = first.split("Traceback (most recent call last)")[0].rstrip(" :")
    return f"{head}: {raised[-1]}" if raised else first


def require_active(query) -> None:
    """StatekitError unless the query runs, naming how it ended."""
    if query.isActive:
        return
    failure = query.exception()
    how = f"it failed: {failure_line(str(failure))}" if failure is not None else \
        "it was stopped"
    raise StatekitError(f"{describe_query(query)} is not active ({how}); statekit attaches to a "
                        f"running query: start it again with the same checkpoint, then attach, "
                        f"or read what it left with statekit.open_checkpoint(<its checkpoint>)")


def _local(path: str) -> str:
    return path[len("file:"):] if path.startswith("file:") else path


def _jvm_root(query) -> str | None:
    """The checkpoint folder of a classic PySpark query, from its JVM object (Spark keeps it
    in ``resolvedCheckpointRoot``; no public getter exists). None on Spark Connect."""
    jsq = getattr(query, "_jsq", None)
    if jsq is None:
        return None
    try:
        return _local(str(jsq.streamingQuery().resolvedCheckpointRoot()))
    except Exception:  # a Spark without the field: the person passes checkpoint=
        return None


def _session_root(query, spark) -> str | None:
    if spark is None or not query.name:
        return None
    try:
        root = spark.conf.get(ROOT_SETTING, None)
    except Exception:
        return None
    return os.path.join(_local(root), query.name) if root else None


def locate(query, checkpoint: str | os.PathLike | None = None, spark=None) -> Checkpoint:
    """The checkpoint of the running ``query``, checked to be its own.

    Raises:
        StatekitError: no checkpoint given and none can be found (Spark Connect), naming
            what to pass.
        CheckpointError: the folder is not a streaming checkpoint, or belongs to another
            query (both ids named).
    """
    if checkpoint is not None:
        if not isinstance(checkpoint, str | os.PathLike | Checkpoint):
            raise BadArgument("checkpoint", checkpoint,
                              "the query's checkpointLocation, as a path, or None to find it")
        candidates = [str(checkpoint)]
    else:
        candidates = [c for c in (_session_root(query, spark), _jvm_root(query)) if c]
        if not candidates:
            raise StatekitError(
                f"cannot find the checkpoint of {describe_query(query)}: Spark does not tell a "
                f"Spark Connect client where a query keeps it; pass checkpoint=<the query's "
                f"checkpointLocation option> to attach")
    found = None
    for path in candidates:
        ck = Checkpoint(_local(path))
        if ck.metadata_path.is_file():
            found = ck
            if ck.query_id() == query.id:
                return ck
    if found is None:
        shown = ", ".join(repr(c) for c in candidates)
        Checkpoint(_local(candidates[-1])).require_checkpoint()  # names what is missing
        raise CheckpointError(f"{shown} has no metadata file yet: the query has not started "
                              f"writing its checkpoint there; is it {describe_query(query)}'s "
                              f"checkpointLocation?")
    raise CheckpointError(f"checkpoint {str(found)!r} belongs to query id {found.query_id()}, "
                          f"not to {describe_query(query)}: pass the checkpointLocation that "
                          f"query was started with")


def provider_of(checkpoint: Checkpoint, spark=None) -> str:
    """The state store provider class the query runs: from its latest offset log entry (what
    Spark itself uses on restart), else the session's setting."""
    batches = checkpoint.offset_batches()
    if batches:
        conf = checkpoint.offset_metadata(batches[-1]).get("conf") or {}
        if conf.get(PROVIDER_SETTING):
            return str(conf[PROVIDER_SETTING])
    try:
        return str(spark.conf.get(PROVIDER_SETTING)) if spark is not None else ""
    except Exception:
        return ""


def require_change_feed(checkpoint: Checkpoint, query, spark=None) -> None:
    """UnsupportedRead naming the setting when the query's state gives no change feed.

    Decided from the files once a batch has committed state (a RocksDB store without
    delta files), before that from the session's setting.
    """
    provider = provider_of(checkpoint, spark)
    if "RocksDB" not in provider:
        return  # the HDFS-backed provider writes a delta file per version
    stores = checkpoint.operator_ids()
    if stores and checkpoint.committed_batches():
        first = stores[0]
        partition = checkpoint.operator_dir(first) / "0"
        store_dirs = sorted(p.name for p in (partition.iterdir() if partition.is_dir() else ())
                            if p.is_dir() and not p.name.startswith(("_", "SSTs")))
        files = state_files(checkpoint.path, first, store_dirs[0] if store_dirs else "default")
        if len(files) == 0 or (files["kind"] == "delta").any():
            return
        enabled = False
    else:
        try:
            enabled = str(spark.conf.get(CHANGELOG_SETTING, "false")).lower() == "true"
        except Exception:
            enabled = True  # cannot tell yet: the state files will
    if not enabled:
        raise UnsupportedRead(
            f"the change feed of {describe_query(query)}",
            f"it keeps RocksDB state without changelog checkpointing, so Spark writes no delta "
            f"files to read changes from (only snapshots) in {str(checkpoint)!r}",
            f"start the query with {CHANGELOG_SETTING}=true (statekit.spark_session() sets "
            f"it; it takes effect when the query starts again on its checkpoint), or read its "
            f"snapshots with statekit.open_checkpoint({str(checkpoint)!r})")


def require_state(checkpoint: Checkpoint, query) -> None:
    """StatekitError when the query has committed batches but keeps no state (Spark makes
    the state folder with the first batch of any stateful operator)."""
    committed = checkpoint.committed_batches()
    if committed and not checkpoint.operator_ids():
        raise StatekitError(
            f"{describe_query(query)} keeps no state: after {len(committed)} committed "
            f"batch(es) its checkpoint {str(checkpoint)!r} has no state folder, so its plan "
            f"has no stateful operator. statekit follows the state of aggregations, "
            f"deduplication, stream-stream joins, applyInPandasWithState and "
            f"transformWithState")
