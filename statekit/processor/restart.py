"""``statekit.check_restart``: will this query start on that checkpoint? For every kind of new
query: a ``QuerySpec``, a streaming DataFrame, or a ``Processor`` with ``start_processor``'s
arguments.

A spec is answered from the checkpoint's files, a DataFrame or a processor by a rehearsal on a
scratch copy (``statekit.query.restart_check`` and ``restart_rehearsal`` say how). This module
only adds the processor: it builds the frame ``start_processor`` would start and rehearses it.

Example:
    >>> check = check_restart(SessionTracker(gap="45 minutes"), "/tmp/ck",  # doctest: +SKIP
    ...                       source="games", keys=["player"], event_time="ts",
    ...                       watermark="10 minutes", event_schema=games.schema, kafka=broker)
    >>> check.compatible                                                  # doctest: +SKIP
    False
"""

from __future__ import annotations

import os
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from statekit.errors import BadArgument
from statekit.model.query_spec import QuerySpec
from statekit.processor.frame import processor_frame
from statekit.processor.processor import Processor
from statekit.query import restart_check
from statekit.query.restart_check import RestartCheck
from statekit.query.restart_rehearsal import rehearse_restart
from statekit.spark_state.checkpoint import Checkpoint


def check_restart(new: QuerySpec | DataFrame | Processor,
                  checkpoint: str | os.PathLike | Checkpoint, *,
                  event_schema: str | StructType | None = None,
                  spark: SparkSession | None = None, output_mode: str | None = None,
                  timeout: float = 300.0, source: str | DataFrame | None = None,
                  **processor_arguments: Any) -> RestartCheck:
    """What Spark will do when ``new`` starts on ``checkpoint``, answered before it starts.

    Args:
        new: a ``QuerySpec`` (as ``start_query`` takes), a streaming DataFrame (your own
            query; ``output_mode`` as you will start it), or a ``Processor`` (with
            ``source=`` and ``start_processor``'s other arguments: ``keys``, ``event_time``,
            ``watermark``, ``event_schema``, ``kafka``, ``output_mode``...).
        checkpoint: where it would restart; a folder without committed batches is a fresh
            start (no findings).
        event_schema: a spec's or a processor's events' schema (Spark DDL), for a topic.
        spark: the session (None: the active one; a DataFrame runs in its own).
        output_mode: a DataFrame's or a processor's output mode.
        timeout: seconds a rehearsal's batch may take.

    Returns a ``RestartCheck``: ``compatible``, and ``findings`` naming each change, what
    Spark says or does, and what to do.
    """
    if isinstance(new, Processor):
        if source is None:
            raise BadArgument("source", None, "the processor's source (a topic or a streaming "
                              "DataFrame), as start_processor takes it")
        extra = {k: v for k, v in (("event_schema", event_schema),
                                   ("output_mode", output_mode)) if v is not None}
        frame = processor_frame(source, new, spark=spark, **extra, **processor_arguments)
        return rehearse_restart(frame.frame, checkpoint, output_mode=frame.run.output_mode,
                                timeout=timeout)
    given = sorted([*processor_arguments, *(["source"] if source is not None else [])])
    if given:
        raise BadArgument("arguments", ", ".join(given),
                          "start_processor's arguments only with a Processor")
    return restart_check.check_restart(new, checkpoint, event_schema=event_schema, spark=spark,
                                       output_mode=output_mode, timeout=timeout)
