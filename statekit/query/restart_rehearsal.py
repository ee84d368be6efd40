"""Will this streaming DataFrame restart on that checkpoint? Asked of Spark itself, on a copy.

``check_restart`` answers a ``QuerySpec`` from the files alone (``restart_check``). Any other
query — a person's own streaming DataFrame, a processor — is answered by a rehearsal: the new
plan is started on a scratch copy of the checkpoint (``spark_state.rehearsal_copy``: logs and
schemas copied, state files linked) into Spark's ``noop`` sink, for one batch after the last
committed one that reads no row. Spark plans it as the restart's first batch, with every check
it makes at a restart (its operators against the operator metadata, each store's key and value
schema against the stored one, the number of input streams, transformWithState's variables and
settings), so its verdict is Spark's own. The cost is one empty batch (the state stores
loaded); the checkpoint is not written.

A failure in the batch's tasks (a state file Spark cannot load, say) is no verdict on the
change: the rehearsal says it could not tell, with Spark's words.

What it cannot see: a change Spark accepts without a word (a key column renamed to one of the
same type, a window's size) — ``check_restart`` of a ``QuerySpec`` names those from the spec
statekit recorded.

Example:
    >>> check = rehearse_restart(frame, "/tmp/ck", output_mode="update")  # doctest: +SKIP
    >>> check.compatible                                                 # doctest: +SKIP
    False
"""

from __future__ import annotations

import re
import shutil
import tempfile

import pandas as pd
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame

from statekit.errors import BadArgument, CheckpointError
from statekit.query.failures import failure_text
from statekit.query.restart_check import (
    FINDING_COLUMNS,
    NEW_CHECKPOINT,
    REFUSED,
    RestartCheck,
    conf_rows,
    session_settings,
)
from statekit.spark_state.checkpoint import Checkpoint
from statekit.spark_state.rehearsal_copy import rehearsal_copy

OUTPUT_MODES = ("append", "update", "complete")
#: Spark's error conditions that refuse a restart for its state, with what changed and what to
#: do, in the person's words
STATE_REFUSALS = {
    "STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE": (
        "the state's key (grouping, deduplication or join key columns, or a window)",
        f"{NEW_CHECKPOINT}; or keep the old key columns and their types"),
    "STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE": (
        "the state's value (aggregates, a state variable's fields)",
        f"{NEW_CHECKPOINT}; or keep the old aggregates and compute new ones in a second query"),
    "STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA": (
        "the stateful operators (one added, removed, reordered or of another kind)",
        f"{NEW_CHECKPOINT}; or keep the old operators in their order"),
    "STATE_STORE_INVALID_CONFIG_AFTER_RESTART": (
        "a stateful operator's setting (output mode, time mode, TTL)",
        f"{NEW_CHECKPOINT}; or keep the setting the checkpoint was written with"),
    "STATE_STORE_INVALID_VALUE_SCHEMA_EVOLUTION": (
        "a state variable's value schema", f"{NEW_CHECKPOINT}; or keep the old value fields"),
    "STATE_STORE_INVALID_VARIABLE_TYPE_CHANGE": (
        "a state variable's kind (value, list or map)",
        f"{NEW_CHECKPOINT}; or keep the variable's kind and give the new one another name"),
    "STATE_STORE_VALUE_SCHEMA_EVOLUTION_THRESHOLD_EXCEEDED": (
        "a state variable's value schema, evolved too often",
        f"{NEW_CHECKPOINT}; or raise spark.sql.streaming.stateStore.valueStateSchemaEvolution"
        "Threshold"),
    "STATE_STORE_SCHEMA_FILE_THRESHOLD_EXCEEDED": (
        "the state variables, changed too often",
        f"{NEW_CHECKPOINT}; or raise spark.sql.streaming.stateStore.stateSchemaFilesThreshold"),
}
_CONDITION = re.compile(r"\[([A-Z][A-Z0-9_]+)(?:\.[A-Z0-9_]+)?\]")
#: conditions that are about state in general, named by their prefix
_STATE_PREFIXES = ("STATE_STORE_", "STREAMING_STATEFUL_", "STATEFUL_PROCESSOR_",
                   "TRANSFORM_WITH_STATE_")


def rehearse_restart(frame: DataFrame, checkpoint: str | Checkpoint, *, output_mode: str,
                     timeout: float = 300.0) -> RestartCheck:
    """Start ``frame`` on a scratch copy of ``checkpoint`` into the noop sink for one empty
    batch after its last, and say what Spark made of it.

    A checkpoint without a committed batch is a fresh start (no findings). A failure in the
    batch's tasks is a CheckpointError naming it: the rehearsal could not tell.
    """
    if not isinstance(frame, DataFrame) or not frame.isStreaming:
        raise BadArgument("new", frame, "a QuerySpec or a streaming DataFrame "
                          "(spark.readStream...)")
    if output_mode not in OUTPUT_MODES:
        raise BadArgument("output_mode", output_mode, OUTPUT_MODES)
    checkpoint = Checkpoint(checkpoint)
    check = RestartCheck(str(checkpoint.path))
    batches = checkpoint.committed_batches()
    if not batches:
        return check
    spark = frame.sparkSession
    scratch = tempfile.mkdtemp(prefix="statekit-rehearsal-")
    try:
        copy = rehearsal_copy(checkpoint, scratch)
        error = _run_once(frame, str(copy.path), output_mode, timeout)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    rows = []
    if error is not None:
        rows.append(_refusal(error, checkpoint, copy.batch))
    rows += conf_rows(checkpoint, batches[-1], session_settings(spark))
    if rows:
        check.findings = pd.DataFrame(rows, columns=FINDING_COLUMNS)
    return check


def _run_once(frame: DataFrame, checkpoint: str, output_mode: str,
              timeout: float) -> BaseException | None:
    """Run ``frame`` on ``checkpoint`` for its one pending batch; Spark's error, or None."""
    query = None
    try:
        query = (frame.writeStream.format("noop").outputMode(output_mode)
                 .option("checkpointLocation", checkpoint).trigger(once=True).start())
        if not query.awaitTermination(timeout):
            raise CheckpointError(f"the restart rehearsal did not finish its batch in "
                                  f"{timeout:g} s (an empty batch after the last committed "
                                  f"one, on a scratch copy of the checkpoint); give it longer "
                                  f"(timeout=)")
        return None
    except PySparkException as exc:
        return exc
    finally:
        if query is not None:
            query.stop()


def _refusal(error: BaseException, checkpoint: Checkpoint, batch: int) -> dict:
    """The finding for Spark's ``error``: a refusal for the state (named by its condition) or
    for the plan; an error in the batch's tasks is no verdict (a CheckpointError saying
    so)."""
    text = failure_text(error)
    conditions = _CONDITION.findall(str(error))
    known = next((c for c in conditions if c in STATE_REFUSALS), None) or next(
        (c for c in conditions if c.startswith(_STATE_PREFIXES)), None)
    if known is None and _IN_TASKS.search(str(error)):
        raise CheckpointError(
            f"the restart could not be rehearsed on {str(checkpoint)!r}: running an empty "
            f"batch ({batch}) on a scratch copy, the new query's tasks failed, for a reason "
            f"that is not a change of its state: {text}")
    what, remedy = STATE_REFUSALS.get(known, (
        "the state" if known else "the query's plan (its inputs, output mode, operators)",
        NEW_CHECKPOINT if known else f"change the query as Spark's message says; or "
        f"{NEW_CHECKPOINT}"))
    stored, new = _schemas(str(error))
    return dict(zip(FINDING_COLUMNS, (REFUSED, what, stored, new,
                                      f"{known}: {text}" if known else text, remedy),
                    strict=True))


#: Spark's words for a failure in a batch's tasks
_IN_TASKS = re.compile(r"Job aborted due to stage failure|PYTHON_EXCEPTION|FAILED_EXECUTE_UDF|"
                      r"PythonException|Task \d+ in stage|CANNOT_LOAD_STATE_STORE")


_EXISTING = re.compile(r"[Ee]xisting (?:key|value)[ _]schema\s*=?\s*(\S.*?)(?:,\s*[Nn]ew|$)",
                       re.DOTALL)
_NEW = re.compile(r"[Nn]ew (?:key|value)[ _]schema\s*=?\s*(\S.*?)(?:\.\s|$)", re.DOTALL)


def _schemas(message: str) -> tuple[str, str]:
    """The stored and the new schema Spark's message names (``-`` where it names none)."""
    old, new = _EXISTING.search(message), _NEW.search(message)
    return (old.group(1).strip() if old else "-", new.group(1).strip() if new else "-")
