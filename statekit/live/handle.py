"""A live handle on a streaming query that a person started with their own PySpark code.

``attach(query)`` finds the query's checkpoint (``statekit.live.locate``), checks it can be
followed and returns an ``AttachedQuery``: a ``QueryHandle`` as every handle, for any query,
with every stateful operator's parts named ``"<operator_id>/<name>"``
(``statekit.inspect.part_names``). It reads with Spark's state readers and the query's progress
reports, which it keeps in memory; it never writes into the checkpoint, never changes the
plan, and ``close()`` leaves the query running.

Example:
    >>> q = (events.dropDuplicatesWithinWatermark(["event_id"])        # doctest: +SKIP
    ...      .groupBy("player").count().writeStream.outputMode("update")
    ...      .option("checkpointLocation", "/tmp/ck").format("memory").queryName("own").start())
    >>> live = sk.attach(q)                                              # doctest: +SKIP
    >>> live.states()[["part", "kind", "what", "change_feed"]]           # doctest: +SKIP
            part           kind   what  change_feed
    0  0/default    aggregation  store         True
    1  1/default  deduplication  store         True
    >>> live.wait_for_batches(3); live.snapshot("0/default")             # doctest: +SKIP
    >>> live.changes("1/default", from_batch=0); live.close()            # doctest: +SKIP
"""

from __future__ import annotations

import os
import threading
import time

import pandas as pd
from pyspark.sql import SparkSession

from statekit.changelog.writer import ChangelogWriter
from statekit.deprecation import deprecated
from statekit.errors import (
    StatekitError,
)
from statekit.inspect.describe import Description
from statekit.inspect.operators import Part
from statekit.inspect.part_names import find_part, part_id
from statekit.inspect.part_views import StateView
from statekit.inspect.plan_names import PartNames, plan_names
from statekit.inspect.view import CheckpointView
from statekit.live.followed_progress import FollowedProgress
from statekit.live.locate import (
    describe_query,
    locate,
    require_active,
    require_change_feed,
    require_query,
    require_state,
)
from statekit.live.own_names import names_choice, query_plan
from statekit.live.shipped_parts import SHIP_NICE, ShippedParts
from statekit.live.shipping_claims import claim_shipping, unclaim_shipping
from statekit.model.connection import Kafka
from statekit.model.query_handle import choose_part, first_batch
from statekit.spark.progress_listener import follow
from statekit.spark_state.checkpoint import Checkpoint
from statekit.validate import (
    batch_id,
    timeout_seconds,
    whole_number,
)


class AttachedQuery(FollowedProgress, ShippedParts):
    """A running query of anyone's, followed live: its operators, their state, its progress.

    Made by ``attach``. Parts are named ``"<operator_id>/<name>"`` (``states()["part"]``);
    a name alone works where only one operator has it. Reads take the last committed batch
    unless told otherwise, so they see the query's later batches as it runs.

    **Names.** Columns carry the names of the person's query wherever its plan tells them
    (``plan_names``; what is renamed, exactly: ``statekit.inspect.plan_names``): a join
    side's key columns are the join's columns (``origin``, where Spark keeps ``field0``), an
    aggregation's buffer fields are named after the aggregates' aliases (``count(*) AS n``
    → ``n``; ``avg(delay) AS avg_delay`` is kept by Spark as its buffer, ``avg_delay_sum``
    and ``avg_delay_count``, and statekit derives ``avg_delay`` = sum / count beside them).
    Those are the names the changelogs ship and serving looks keys up by. ``names="spark"``
    (``state``, ``snapshot``, ``changes``) gives Spark's own names instead, as
    ``open_checkpoint`` does: a checkpoint alone has no plan to read them from.
    """

    def __init__(self, query, checkpoint: Checkpoint, spark: SparkSession):
        self.query, self.checkpoint, self.spark = query, checkpoint, spark
        #: the changelog writer of each shipped part, by full part name
        #: (empty unless attached with ``kafka=``)
        self.changelogs: dict[str, ChangelogWriter] = {}
        #: the first batch committed after attaching (``wait_for_batches`` counts from it)
        self.first_batch = checkpoint.last_batch + 1
        self._parts: list[Part] | None = None
        self._plan_names: dict[int, dict[str, PartNames]] | None = None
        self._checked = False
        self._detached = False
        self._reports: dict[int, dict] = {}  # Spark's progress reports, by batch
        self._reports_lock = threading.Lock()
        self._following = follow(spark, self.id, self._hear)

    # --- what it is --------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.query.name

    @property
    def id(self) -> str:
        return str(self.query.id)

    @property
    def is_active(self) -> bool:
        return self.query.isActive

    @property
    def last_batch(self) -> int:
        """Id of the last committed batch (-1 before the first)."""
        return self.checkpoint.last_batch

    def __repr__(self) -> str:
        state = "detached" if self._detached else ("active" if self.is_active else "stopped")
        return (f"AttachedQuery({describe_query(self.query)}, {state}, "
                f"checkpoint={str(self.checkpoint)!r}, last_batch={self.last_batch})")

    def _require_attached(self) -> None:
        if self._detached:
            raise StatekitError(f"this handle on {describe_query(self.query)} was detached; "
                                f"attach again with statekit.attach(query)")

    def _view(self) -> CheckpointView:
        return CheckpointView(self.checkpoint, self.spark)

    def _require_state(self) -> None:
        """The checks that need a committed batch, once one is there."""
        self._require_attached()
        if self._checked:
            return
        require_state(self.checkpoint, self.query)
        self.checkpoint.require_state()  # names the folder when nothing is committed yet
        require_change_feed(self.checkpoint, self.query, self.spark)
        self._checked = True

    # --- operators and parts -----------------------------------------------------------
    def operators(self) -> pd.DataFrame:
        """One row per stateful operator and store, as Spark's state metadata says now
        (``CheckpointView.operators``)."""
        self._require_state()
        return self._view().operators()

    def parts(self) -> list[str]:
        """Every readable part of every operator, named ``"<operator_id>/<name>"`` (what
        ``snapshot`` and the others take; ``states()`` says what each is)."""
        return [part_id(p) for p in self._part_list()]

    def _part_list(self) -> list[Part]:
        """The parts themselves (they are fixed by the plan: read once)."""
        if self._parts is None:
            self._require_state()
            self._parts = self._view().parts()
        return list(self._parts)

    def _find(self, part: str | None) -> Part:
        """The part named ``part`` (``"0/default"``, or a name only one operator has);
        None: the only part, when there is one."""
        self._require_state()
        name = choose_part(part, self.parts(), describe_query(self.query))
        return find_part(self._part_list(), name)

    def states(self) -> pd.DataFrame:
        """Every readable part: ``part`` (what ``snapshot``/``changes`` take), then
        ``CheckpointView.states``'s columns."""
        self._require_state()
        frame = self._view().states()
        frame.insert(0, "part", [f"{o}/{n}" for o, n in zip(frame["operator_id"],
                                                              frame["name"], strict=True)])
        return frame

    def plan_names(self) -> dict[int, dict[str, PartNames]]:
        """The person's names of the parts' fields, from the query's plan
        (``query.explain(extended=True)``, read once it has run a batch; the plan is fixed for
        the query's run): operator id → part name → ``PartNames``. Empty while the query
        gives no plan yet (nothing is named then: Spark's names)."""
        if self._plan_names is None:
            found = plan_names(query_plan(self.query))
            if found is None:
                return {}
            self._plan_names = found
        return self._plan_names

    def _own_names(self, part: Part) -> PartNames | None:
        return self.plan_names().get(part.operator_id, {}).get(part.name)

    def state(self, part: str | None = None, *, names: str = "own") -> StateView:
        """The reader of one part, over the batches committed so far (``part`` may be left
        out when the query has one); ``names="spark"`` reads it under Spark's names (see
        the class's note on names)."""
        names = names_choice(names)
        found = self._find(part)
        return StateView(self.checkpoint, found, self.spark, None,
                         self._own_names(found) if names == "own" else None)

    def snapshot(self, part: str | None = None, batch: int | None = None,
                 sort: bool = False, *, names: str = "own") -> pd.DataFrame:
        """The part's state after ``batch`` (the last committed when None), with
        ``partition``; ``attrs["part"]`` names it. ``names="spark"``: Spark's names."""
        view = self.state(part, names=names)
        frame = view.snapshot(batch, sort=sort)
        frame.attrs["part"] = part_id(view.part)
        return frame

    def changes(self, part: str | None = None, from_batch: int | None = None,
                to_batch: int | None = None, *, names: str = "own") -> pd.DataFrame:
        """Every change batches ``from_batch..to_batch`` made to the part (Spark's change
        feed; the last batch's when both are None); a join side and timers have none
        (``UnsupportedRead`` names what works). ``names="spark"``: Spark's names."""
        view = self.state(part, names=names)
        from_batch = first_batch(from_batch, to_batch, self.last_batch)
        frame = view.changes(from_batch, to_batch)
        frame.attrs["part"] = part_id(view.part)
        return frame

    def state_partitions(self, part: str, rows: pd.DataFrame):
        """The state partition Spark keeps each of ``rows`` in (a NumPy array), computed
        from the part's key columns as Spark hashes them (``statekit.live.part_routing``);
        ``rows`` needs the part's placement columns (a snapshot has them, under either
        ``names``)."""
        from statekit.inspect.hashed_columns import placement_columns
        from statekit.live.part_routing import part_partitions

        view = self.state(part)
        hashed, _ = placement_columns(view.schema(), view.part.store)
        if not set(hashed) <= set(rows.columns):
            view = self.state(part, names="spark")
        return part_partitions(rows, view.schema(), view.part.store,
                               self.checkpoint.shuffle_partitions())

    def describe(self, **options) -> Description:
        """``CheckpointView.describe`` of the live checkpoint, with this handle's progress
        (so the slow-commit flag is checked too)."""
        self._require_state()
        return self._view().describe(progress=self.progress(), **options)

    def wait_for_batches(self, n: int, timeout: float = 120.0) -> int:
        """Block until ``n`` batches have committed since attaching; returns the last id.

        Raises TimeoutError (with Spark's status) after ``timeout`` seconds, and
        StatekitError when the query stops first.
        """
        self._require_attached()
        n = batch_id(n, "number of batches")
        timeout = timeout_seconds(timeout)
        deadline = time.monotonic() + timeout
        while self.last_batch - self.first_batch + 1 < n:
            if not self.query.isActive:
                require_active(self.query)
            if time.monotonic() > deadline:
                status = self.query.status
                raise TimeoutError(f"{describe_query(self.query)} did not commit {n} batches in "
                                   f"{timeout:.0f} s after attaching (Spark's status: "
                                   f"{status.get('message')!r})")
            time.sleep(0.1)
        return self.last_batch

    # --- the end -------------------------------------------------------------------------
    def detach(self) -> None:
        """Deprecated alias of ``close()`` (every handle ends with ``close()``)."""
        deprecated("AttachedQuery.detach()", "close()")
        self.close()

    def close(self) -> None:
        """Stop following the query, after shipping every committed batch to the
        changelogs; the query itself keeps running. Idempotent; a ``with`` block calls it."""
        if not self._detached:
            self._detached = True
            self._following.stop()
            unclaim_shipping(self)
            writers, self.changelogs = self.changelogs, {}
            errors = []
            for writer in writers.values():
                try:
                    writer.stop()
                except Exception as exc:  # every writer stops; the first error is raised
                    errors.append(exc)
            if errors:
                raise errors[0]

    def __enter__(self) -> AttachedQuery:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def attach(query, *, checkpoint: str | os.PathLike | None = None,
           spark: SparkSession | None = None, kafka: Kafka | None = None,
           app: str | None = None, ledger_dir: str | os.PathLike | None = None,
           timeout: float = 120.0, ship_nice: int = SHIP_NICE) -> AttachedQuery:
    """Follow a running streaming query live (any source, sink and stateful operators).

    Args:
        query: the ``StreamingQuery`` that ``DataStreamWriter.start()`` returned.
        checkpoint: its ``checkpointLocation``; None finds it (needed on Spark Connect).
        spark: the session to read state with; None uses the active one.
        kafka: where to ship a changelog topic per part (``ship_changelogs``); None ships
            none. With it, attach waits (up to ``timeout`` s) for the first committed batch.
        app: the first word of the topics' names (default: the query's name).
        ledger_dir: where the changelogs' ledgers live (default: statekit's state folder,
            ``statekit.live.changelogs.ledger_folder``; never inside the checkpoint).
        ship_nice: how far below the query the shipping threads' CPU priority is, on
            Linux (0 to 19; 0: the same): the query's batches take the cores first.

    Raises:
        BadArgument: ``query`` is not a streaming query.
        StatekitError: the query is not active, keeps no state, or its checkpoint cannot
            be found (each named, with what works).
        CheckpointError: ``checkpoint`` is not this query's.
        AlreadyAttached: with ``kafka``, another handle ships the query's changelogs
            already (named, with its topics).
        UnsupportedRead: its state gives no change feed (the setting that enables it named).
    """
    require_query(query)
    whole_number(ship_nice, "ship_nice", minimum=0, maximum=19,
                 accepted="a niceness from 0 (as the query) to 19 (only what it leaves)")
    timeout = timeout_seconds(timeout)
    require_active(query)
    if kafka is not None:
        claim_shipping(query)  # refused before waiting for a batch
    if spark is None:
        spark = SparkSession.getActiveSession()
        if spark is None:
            raise StatekitError("no active SparkSession to read the query's state with: pass "
                                "spark=<the session that runs the query>")
    found = locate(query, checkpoint, spark)
    handle = AttachedQuery(query, found, spark)
    try:
        if kafka is not None and not found.committed_batches():
            handle.wait_for_batches(1, timeout)
        if found.committed_batches():
            handle._require_state()
        if kafka is not None:
            handle.ship_changelogs(kafka, app, ledger_dir, ship_nice)
    except BaseException:
        handle.close()
        raise
    return handle
