"""Starting a run of a query statekit owns: its checkpoint made ready (``new_run``), its
plan started in Spark with every progress report kept beside the checkpoint
(``start_recorded``), and what starting gave (``Started``), which ``RunningQuery`` holds.

Example:
    >>> checkpoint = new_run(spark, "board", None)     # a temporary folder # doctest: +SKIP
    >>> query = start_recorded(plan, spark, checkpoint, RunOptions(name="board"))  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import functools
import os
import tempfile
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from statekit.errors import BadArgument
from statekit.options.query import RunOptions
from statekit.spark.progress_listener import follow
from statekit.spark.workers import require_statekit_in_workers
from statekit.spark_state.checkpoint import Checkpoint
from statekit.validate import writable_directory


@dataclass(frozen=True)
class Started:
    """What starting a query in Spark gave: the ``StreamingQuery``, its side stream of
    malformed events (None: not parsed here), the first batch this run commits, and whether
    it ends by itself once drained (the ``available-now`` trigger)."""

    query: StreamingQuery
    malformed_stream: DataFrame | None = None
    first_batch: int = 0
    available_now: bool = False



def new_run(spark: SparkSession, name: str,
            checkpoint: str | os.PathLike | Checkpoint | None) -> Checkpoint:
    """The checkpoint of a new run named ``name``, ready to write (a temporary folder when
    None), once the session's Python workers import statekit (``WorkersLackStatekit``) and
    no active query of ``spark`` holds that name: BadArgument naming it (Spark
    refuses a second active query of one name), or naming the checkpoint when it is not a
    folder Spark can make or write (``validate.writable_directory``)."""
    require_statekit_in_workers(spark)
    active = sorted(q.name for q in spark.streams.active if q.name)
    if name in active:
        raise BadArgument("query name", name,
                          f"a name no active query of this Spark session has (active: "
                          f"{', '.join(active)}); stop the running one first, or name this one "
                          f"differently (name=)")
    if checkpoint is None:
        return Checkpoint(tempfile.mkdtemp(prefix=f"statekit-{name}-"))
    checkpoint = Checkpoint(checkpoint)
    checkpoint.require_local("a statekit query (start_query, a processor's start)")
    writable_directory(str(checkpoint), "checkpoint")
    return checkpoint


def start_recorded(frame: DataFrame, spark: SparkSession, checkpoint: Checkpoint,
                   run: RunOptions) -> StreamingQuery:
    """Start ``frame`` into ``run.sink`` (named ``run.name``, in ``run.output_mode``, on
    ``run.trigger``) with its progress reports kept beside ``checkpoint``."""
    query = (frame.writeStream.queryName(run.name).outputMode(run.output_mode)
             .format(run.sink).option("checkpointLocation", str(checkpoint))
             .trigger(**run.trigger_kwargs()).start())
    follow(spark, str(query.id), functools.partial(_keep_report, checkpoint), owned=True)
    return query


def _keep_report(checkpoint: Checkpoint, progress) -> None:
    """Write one progress report beside the checkpoint (a full or read-only disk loses the
    report; ``progress()`` recovers the batch from Spark's logs)."""
    with contextlib.suppress(OSError):
        checkpoint.write_progress(progress.batchId, progress.json)
