"""Kill a Spark query with SIGKILL, restart it here, and time how Spark restores its state.

The query first runs in a worker process of its own (``statekit.drills.worker``)
over the first ``batches × max_offsets_per_trigger`` records of the topic (it then
waits, so input is left for the restarted query to run a batch on), with the given
snapshot interval: Spark's RocksDB state store uploads a full
snapshot every ``min_deltas_for_snapshot`` versions (checked every
``maintenance_interval``) and writes a small delta file (``N.changelog``) every version.
After ``batches`` committed batches the worker is killed. The query is then
restarted in this process on the same checkpoint; each state partition loads
the newest snapshot and replays the delta files after it. The restore is
read from this process's state store log (``restart_timeline``).

Example:
    >>> drill = spark_restart_drill("games", broker, "/tmp/ck", spark=spark,  # doctest: +SKIP
    ...                             spec=GAME_SPEC, event_schema=GAME_EVENT_SCHEMA,
    ...                             plan=DrillPlan(min_deltas_for_snapshot=2))
    >>> drill.summary    # per partition: snapshot loaded, delta files replayed  # doctest: +SKIP
    >>> drill.query.close()                                                # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
import signal
import time
from dataclasses import dataclass, replace
from typing import Any

import pandas as pd
from pyspark.sql import SparkSession

from statekit.drills.worker import query_config, start_worker, wait_for_line
from statekit.durations import to_millis
from statekit.errors import BadArgument, StatekitError
from statekit.model.connection import Kafka, connect
from statekit.model.query_spec import QuerySpec
from statekit.options.base import Options, route, settle
from statekit.options.query import RunOptions, SourceOptions
from statekit.query.start import start_query
from statekit.query.stateful import StatefulQuery
from statekit.spark.session import state_store_log
from statekit.spark_state.checkpoint import Checkpoint
from statekit.spark_state.restart import restart_summary, restart_timeline
from statekit.spark_state.spark_files import state_files
from statekit.validate import whole_number

MIN_DELTAS = "spark.sql.streaming.stateStore.minDeltasForSnapshot"
MAINTENANCE = "spark.sql.streaming.stateStore.maintenanceInterval"
#: ``spark_restart_drill``'s keyword shortcuts: each a field of its ``DrillPlan``
_PLAN_SHORTCUTS = dict.fromkeys(("batches", "min_deltas_for_snapshot", "maintenance_interval",
                                 "max_offsets_per_trigger", "settle_seconds", "timeout"), "plan")


@dataclass
class SparkRestartDrill:
    """The restarted query (still running), its restore timeline, summary and state files."""

    query: StatefulQuery
    timeline: pd.DataFrame
    summary: pd.DataFrame
    files: pd.DataFrame
    killed_after_batch: int
    min_deltas_for_snapshot: int


@dataclass(frozen=True)
class DrillPlan(Options):
    """How a restart drill runs: ``batches`` of ``max_offsets_per_trigger`` records in the
    worker, Spark's snapshot cadence (a snapshot every ``min_deltas_for_snapshot`` versions,
    uploaded by maintenance every ``maintenance_interval``), ``settle_seconds`` before the
    kill, ``timeout`` for each wait. An internal job spec of the drill (its fields are
    ``spark_restart_drill``'s keyword arguments), not a user option (those are all in
    ``statekit.options``)."""

    batches: int = 6
    min_deltas_for_snapshot: int = 10
    maintenance_interval: str = "1 second"
    max_offsets_per_trigger: int = 250
    settle_seconds: float = 2.0
    timeout: float = 300.0

    def __post_init__(self):
        whole_number(self.batches, "batches", minimum=1)
        whole_number(self.min_deltas_for_snapshot, "min_deltas_for_snapshot", minimum=1)
        to_millis(self.maintenance_interval, "maintenance interval")
        whole_number(self.max_offsets_per_trigger, "max_offsets_per_trigger", minimum=1)


def spark_restart_drill(
    topic: str,
    kafka: Kafka,
    checkpoint: str | os.PathLike,
    *,
    spark: SparkSession,
    spec: QuerySpec,
    event_schema: str | None = None,
    name: str = "restarted",
    plan: DrillPlan | None = None,
    **shortcuts: Any,
) -> SparkRestartDrill:
    """Run the query in a worker for ``batches`` batches, kill -9 it, restart it here.

    Args:
        kafka: the cluster (a ``KafkaConnection``, ``"host:port"`` or an ``EmbeddedBroker``).
        spark: this process's session (a ``statekit.spark_session``: its state store log
            is where the restore is read from).
        spec, event_schema: what the query computes over which events (see ``start_query``).
        plan: how the drill runs (``DrillPlan``); or its fields as keyword arguments, not
            both: ``batches`` (6), ``min_deltas_for_snapshot`` (versions between Spark's
            state snapshots, Spark's default 10), ``maintenance_interval`` (how often
            Spark's maintenance uploads snapshots, "1 second"), ``max_offsets_per_trigger``
            (250), ``settle_seconds`` (wait after the kill target is reached, letting
            maintenance upload: 2.0), ``timeout`` (300.0).
    """
    plan = settle(plan, DrillPlan, route(shortcuts, _PLAN_SHORTCUTS, "spark_restart_drill")
                  .get("plan", {}), "plan")
    batches, min_deltas_for_snapshot = plan.batches, plan.min_deltas_for_snapshot
    timeout, per_batch = plan.timeout, plan.max_offsets_per_trigger
    interval = f"{to_millis(plan.maintenance_interval, 'maintenance interval')}ms"
    conn = connect(kafka)
    checkpoint = Checkpoint(checkpoint)
    if checkpoint.committed_batches():
        raise BadArgument("checkpoint", str(checkpoint),
                          "a new or empty folder: the drill runs its query from the topic's "
                          "first record")
    ending = _worker_ends(conn, topic, batches * per_batch)
    conf = {MIN_DELTAS: str(min_deltas_for_snapshot), MAINTENANCE: interval}
    source = SourceOptions(kafka=conn, event_schema=event_schema,
                           max_offsets_per_trigger=per_batch)
    run = RunOptions(name=name, checkpoint=str(checkpoint))
    worker = start_worker("query", query_config(
        topic, spec, replace(source, ending_offsets=json.dumps(ending)),
        replace(run, trigger="200 milliseconds"), conf=conf,
        shuffle_partitions=int(spark.conf.get("spark.sql.shuffle.partitions"))))
    try:
        wait_for_line(worker, "running", timeout)
        deadline = time.monotonic() + timeout
        while len(checkpoint.committed_batches()) < batches:
            if worker.poll() is not None:
                raise StatekitError(f"the query worker exited with {worker.returncode}: "
                                    f"{worker.stdout.read()[-2000:]}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"the worker did not commit {batches} batches in "
                                   f"{timeout:.0f} s")
            time.sleep(0.05)
        time.sleep(plan.settle_seconds)
    finally:
        worker.send_signal(signal.SIGKILL)
        worker.wait(30)
    killed_after = checkpoint.last_batch
    files = state_files(checkpoint)
    log = state_store_log()
    since = log.stat().st_size if log.exists() else 0
    old = spark.conf.get(MIN_DELTAS, None)
    spark.conf.set(MIN_DELTAS, str(min_deltas_for_snapshot))
    try:
        query = start_query(topic, spec, source_options=source, run=run, spark=spark)
    finally:
        if old is None:
            spark.conf.unset(MIN_DELTAS)
        else:
            spark.conf.set(MIN_DELTAS, old)
    query.wait_for_batches(1, timeout)
    timeline = _timeline_when_logged(str(checkpoint), log, since, str(query.query.runId))
    return SparkRestartDrill(query, timeline, restart_summary(timeline), files, killed_after,
                             min_deltas_for_snapshot)


def _worker_ends(kafka: Kafka, topic: str, budget: int) -> dict:
    """Where the worker stops reading: ``budget`` records shared across the partitions,
    so that the restarted query still has input (Spark runs no batch, and restores no
    state, without new input)."""
    from statekit.kafka.topics import watermarks
    from statekit.spark.kafka_source import cap_offsets

    marks = watermarks(kafka, topic)
    records = int((marks["high"] - marks["low"]).sum())
    if records <= budget:
        raise BadArgument("batches × max_offsets_per_trigger", budget,
                          f"fewer than the {records:,} records of topic {topic!r}: the worker "
                          "must leave input for the restarted query, which restores its state "
                          "only when it runs a batch")
    by_partition = marks.set_index(marks["partition"].astype(str))
    start = {topic: by_partition["low"].astype(int).to_dict()}
    end = {topic: by_partition["high"].astype(int).to_dict()}
    return cap_offsets(start, end, budget)


def _timeline_when_logged(checkpoint: str, log, since: int, run_id: str,
                          timeout: float = 10.0) -> pd.DataFrame:
    """The restart timeline, once the log and the first progress report have landed."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return restart_timeline(checkpoint, log, since=since, run_id=run_id)
        except StatekitError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
