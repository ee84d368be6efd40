"""A live handle on a streaming query that a person started with their own PySpark code.

``attach(query)`` finds the query's checkpoint (``statekit.live.locate``), checks it can be
followed and returns an ``AttachedQuery``: the shape of ``StatefulQuery`` for any query,
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

import contextlib
import dataclasses
import io
import json
import os
import threading
import time
import warnings

import pandas as pd
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQueryListener

from statekit.changelog.sources import PartChanges
from statekit.changelog.writer import ChangelogWriter
from statekit.deprecation import deprecated
from statekit.errors import (
    AlreadyAttached,
    BadArgument,
    NotShippedYet,
    StatekitError,
    UnsupportedRead,
)
from statekit.inspect.describe import Description
from statekit.inspect.lists import join_side_stores
from statekit.inspect.operators import Part
from statekit.inspect.part_names import find_part, part_id
from statekit.inspect.part_views import StateView
from statekit.inspect.plan_names import PartNames, plan_names
from statekit.inspect.view import CheckpointView
from statekit.live.changelogs import app_name, ledger_folder, part_topic
from statekit.live.health import Health, growing_operators, operator_frame, watermark_lag
from statekit.live.locate import (
    describe_query,
    locate,
    require_active,
    require_change_feed,
    require_query,
    require_state,
)
from statekit.model.connection import Kafka, connect
from statekit.model.query_handle import choose_part
from statekit.model.store_schema import PartShape
from statekit.spark.connect import is_connect
from statekit.spark_state.checkpoint import Checkpoint
from statekit.spark_state.progress import progress_frame
from statekit.spark_state.times import iso_times
from statekit.validate import (
    batch_id,
    batch_span,
    optional_batch_id,
    timeout_seconds,
    whole_number,
)


class _Reports(StreamingQueryListener):
    """Keeps, in memory, the progress reports of the attached queries of one session, for
    the handles that follow them (a query's reports go when its last handle does)."""

    def __init__(self):
        self.kept: dict[str, dict[int, dict]] = {}
        self.handles: dict[int, AttachedQuery] = {}
        self._lock = threading.Lock()

    def follow(self, handle: AttachedQuery) -> None:
        with self._lock:
            self.handles[id(handle)] = handle
            self.kept.setdefault(handle.id, {})

    def forget(self, handle: AttachedQuery) -> None:
        with self._lock:
            self.handles.pop(id(handle), None)
            if not any(h.id == handle.id for h in self.handles.values()):
                self.kept.pop(handle.id, None)

    def needed(self) -> bool:
        """True while a handle follows a running query (a handle never detached, on a query
        that stopped, needs no more reports)."""
        with self._lock:
            handles = list(self.handles.values())
        return any(h.is_active for h in handles)

    def reports(self, query_id: str) -> dict[int, dict]:
        with self._lock:
            return dict(self.kept.get(query_id, {}))

    def add(self, query_id: str, report: dict) -> None:
        with self._lock:
            if query_id in self.kept:
                self.kept[query_id][int(report["batchId"])] = report

    def onQueryStarted(self, event) -> None:
        pass

    def onQueryProgress(self, event) -> None:
        progress = event.progress
        if str(progress.id) in self.kept:
            self.add(str(progress.id), json.loads(progress.json))

    def onQueryIdle(self, event) -> None:
        pass

    def onQueryTerminated(self, event) -> None:
        pass


_LISTENERS: dict[int, _Reports] = {}
_LISTENERS_LOCK = threading.Lock()


def _reports(spark: SparkSession, handle: AttachedQuery) -> _Reports:
    """The session's keeper of reports, following ``handle``'s query. On Spark Connect it
    listens to nothing (registering a client listener there again, after another was
    removed, was seen to block for good): the handle keeps what ``recentProgress`` gives at
    each call instead."""
    with _LISTENERS_LOCK:
        key = id(spark)
        if key not in _LISTENERS:
            _LISTENERS[key] = _Reports()
            if not is_connect(spark):
                spark.streams.addListener(_LISTENERS[key])
        _LISTENERS[key].follow(handle)
        return _LISTENERS[key]


def _release(spark: SparkSession, handle: AttachedQuery) -> None:
    """``handle`` follows its query no more; the session's listener is removed from the
    session once no handle of a running query needs it."""
    with _LISTENERS_LOCK:
        listener = _LISTENERS.get(id(spark))
        if listener is None:
            return
        listener.forget(handle)
        if not listener.needed():
            del _LISTENERS[id(spark)]
            if not is_connect(spark):
                spark.streams.removeListener(listener)


#: the handle shipping changelogs for each query id, in this process (one at a time: two
#: writers of one topic fence each other)
_SHIPPING: dict[str, AttachedQuery] = {}
_SHIPPING_LOCK = threading.Lock()


def _claim_shipping(query, handle: AttachedQuery | None = None) -> None:
    """Make ``handle`` the one that ships ``query``'s changelogs (None: only check that it
    could). AlreadyAttached names the handle that ships them already while its query runs;
    one left attached to a query that stopped since (and was started again: the same id)
    is detached first."""
    with _SHIPPING_LOCK:
        other = _SHIPPING.get(str(query.id))
        if other is None or other is handle or other._detached:
            if handle is not None:
                _SHIPPING[handle.id] = handle
            return
    if other.is_active:
        topics = ", ".join(sorted(other.changelog_topics().values())) or "(starting)"
        raise AlreadyAttached(
            f"{describe_query(query)} is already attached with kafka= by another handle, "
            f"which ships its parts to the changelog topics {topics}: a second one would "
            f"fence the first's writers. Use that handle (it is this error's .handle), or "
            f"call its close() first and attach again", other)
    other.close()
    _claim_shipping(query, handle)


def _unclaim_shipping(handle: AttachedQuery) -> None:
    """``handle`` ships its query's changelogs no more."""
    with _SHIPPING_LOCK:
        if _SHIPPING.get(handle.id) is handle:
            del _SHIPPING[handle.id]


#: What ``names=`` takes: the names of the person's query (its plan's), or Spark's own.
NAMES = ("own", "spark")


def _names(names: object) -> str:
    if names not in NAMES:
        raise BadArgument("names", names, "'own' (the names your query gives the columns: "
                                          "join keys, aggregates' aliases) or 'spark' "
                                          "(the names Spark's state store keeps)")
    return str(names)


def query_plan(query) -> str:
    """The text ``query.explain(extended=True)`` prints (PySpark prints it from Python, the
    classic client and Spark Connect's alike: it is captured here); "" when the query does
    not give it. Before the query has run a batch since it started, Spark prints "No
    physical plan. Waiting for data." instead."""
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            query.explain(extended=True)
    except Exception:  # a query that cannot explain itself keeps Spark's names
        return ""
    return printed.getvalue()


#: Seconds ``ship_changelogs`` waits for the query's plan (it has one once it ran a batch
#: since it started) before shipping under Spark's names.
PLAN_WAIT = 10.0


#: How far below the query an attached query's shipping threads run (``bench.attach``: about
#: half the overhead on the query's batches of shipping at the same priority).
SHIP_NICE = 15


class AttachedQuery:
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
        self._listener = _reports(spark, self)

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
        names = _names(names)
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
        if from_batch is None:
            from_batch = self.last_batch if to_batch is None else to_batch
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

    # --- progress ------------------------------------------------------------------------
    def _report_dicts(self) -> dict[int, dict]:
        kept = self._listener.reports(self.id)
        with contextlib.suppress(Exception):  # a stopped Connect query may no longer answer
            for report in self.query.recentProgress:
                data = json.loads(report.json) if hasattr(report, "json") else dict(report)
                kept.setdefault(int(data["batchId"]), data)
                self._listener.add(self.id, data)
        return kept

    def _reports_in_order(self) -> list[dict]:
        """Every report kept, by batch (Spark's ``recentProgress`` read once)."""
        kept = self._report_dicts()
        return [kept[b] for b in sorted(kept)]

    def progress(self) -> pd.DataFrame:
        """One row per batch Spark reported since this session saw the query (its
        ``recentProgress``, and every report since attaching): rows in, state rows over all
        operators, durations, watermark (``statekit.spark_state.progress`` columns)."""
        self._require_attached()
        return progress_frame(self._reports_in_order())

    def operator_progress(self) -> pd.DataFrame:
        return self._operator_frame(self._reports_in_order())

    def _operator_frame(self, reports: list[dict]) -> pd.DataFrame:
        """One row per batch and stateful operator, from Spark's reports
        (``statekit.live.health.operator_frame``): ``batch``, ``operator_id``, ``position``,
        ``operator`` (Spark's name), ``rows``, ``rows_updated``, ``rows_removed`` (evicted or
        expired), ``dropped_by_watermark``, ``memory_bytes``, ``commit_ms``.

        Spark lists a batch's operators in plan order, which is the order of their ids; the
        ids come from the state metadata where the names agree (NA otherwise)."""
        self._require_attached()
        frame = operator_frame(reports)
        names = {}
        if self.checkpoint.committed_batches() and self.checkpoint.operator_ids():
            names = {p.operator_id: p.operator for p in self._part_list()}
        same = all(names.get(pos) == name for pos, name in
                   zip(frame["position"], frame["operator"], strict=True))
        ids = frame["position"] if same and names else pd.array([pd.NA] * len(frame),
                                                                dtype="Int64")
        frame.insert(1, "operator_id", pd.array(ids, dtype="Int64"))
        return frame

    def growing_operators(self, batches: int = 3) -> pd.DataFrame:
        """The operators whose state only grew over the last ``batches`` batches (rows never
        down, up overall, none removed): ``operator_id``, ``operator``, ``rows`` now. Such
        state has no watermark or TTL to bound it, or keys without end."""
        return _growing(self.operator_progress(), batch_id(batches, "batches"))

    def watermark_lag(self) -> pd.DataFrame:
        """Per batch, how far the watermark trails the latest event time Spark saw
        (``statekit.live.health.watermark_lag``)."""
        self._require_attached()
        return watermark_lag(self._reports_in_order())

    def changelog_lag(self) -> pd.DataFrame:
        """Per shipped part: ``part``, ``topic``, ``committed`` (the query's last batch),
        ``shipped`` (the changelog's), ``batches_behind``."""
        committed = self.last_batch
        rows = [(part, w.topic, committed, w.shipped_batch, committed - w.shipped_batch)
                for part, w in self.changelogs.items()]
        return pd.DataFrame(rows, columns=["part", "topic", "committed", "shipped",
                                           "batches_behind"])

    def health(self, batches: int = 3) -> Health:
        """Progress, operators, growth flags, watermark lag and changelog lag, read at once
        from the same reports (what the live dashboard draws; ``Health.summary()`` says it
        in a line)."""
        self._require_attached()
        batches = batch_id(batches, "batches")
        active, last = self.is_active, self.last_batch
        reports = self._reports_in_order()
        operators = self._operator_frame(reports)
        return Health(last, active, progress_frame(reports), operators,
                      _growing(operators, batches), watermark_lag(reports),
                      self.changelog_lag())

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

    # --- changelogs --------------------------------------------------------------------
    def ship_changelogs(self, kafka: Kafka, app: str | None = None,
                        ledger_dir: str | os.PathLike | None = None,
                        nice: int = SHIP_NICE) -> dict[str, str]:
        """Ship every part to a changelog topic of its own, in the background, after each
        committed batch (``statekit.live.changelogs``; what a record holds for each kind of
        part: ``statekit.changelog.sources``); returns
        part → topic. Needs a committed batch (the parts are known from it). The shipping
        threads run ``nice`` steps below the query (``changelog.background.lower_priority``)."""
        self._require_state()
        _claim_shipping(self.query, self)
        self._await_plan(PLAN_WAIT)
        conn = connect(kafka)
        app = app_name(self.name, self.id) if app is None else app
        folder = ledger_folder(self.id, ledger_dir)
        try:
            parts = self._part_list()
            for part in parts:
                if part_id(part) in self.changelogs:
                    continue
                try:  # PartChanges owns which parts can be shipped
                    source = PartChanges(self._part_view(part), app, folder,
                                         self._join_side_stores(parts, part))
                except UnsupportedRead:
                    continue
                topic = part_topic(app, part.operator_id, part.name)
                self.changelogs[part_id(part)] = ChangelogWriter(source, conn, topic,
                                                                 nice=nice).start()
        finally:
            if not self.changelogs:
                _unclaim_shipping(self)
        return self.changelog_topics()

    def _await_plan(self, timeout: float) -> None:
        """Wait up to ``timeout`` s for the query's plan (a query started again on its
        checkpoint has none until it runs a batch), so that the changelogs ship under the
        query's names; without it they ship under Spark's, and a warning says so."""
        deadline = time.monotonic() + timeout
        while True:
            self.plan_names()  # kept once read
            if self._plan_names is not None:
                return
            if not self.is_active or time.monotonic() > deadline:
                warnings.warn(
                    f"{describe_query(self.query)} has run no batch since it started, so its "
                    f"plan does not tell the names of its columns yet: its parts' changelogs "
                    f"ship under Spark's names (field0 for a join key, an aggregate's buffer "
                    f"fields). Attach once it has run a batch to ship them under yours",
                    stacklevel=3)
                return
            time.sleep(0.2)

    def _part_view(self, part: Part) -> StateView:
        return StateView(self.checkpoint, part, self.spark, None, self._own_names(part))

    def _join_side_stores(self, parts: list[Part], part: Part) -> list[StateView]:
        """For a join side, the views of its two stores (their change feeds say which join
        keys a batch touched: ``statekit.inspect.lists``); else none."""
        if part.what != "join side":
            return []
        stores = join_side_stores(part.name)
        return [self._part_view(p) for p in parts if p.operator_id == part.operator_id
                and p.what == "store" and p.store in stores]

    def changelog_topics(self) -> dict[str, str]:
        """Part → its changelog topic, for the parts shipped."""
        return {part: writer.topic for part, writer in self.changelogs.items()}

    def _writer(self, part: str | None) -> ChangelogWriter:
        full = part_id(self._find(part))
        if full not in self.changelogs:
            shipped = ", ".join(self.changelogs) or "none: attach with kafka= to ship them"
            raise StatekitError(f"part {full!r} has no changelog here; parts shipped: {shipped}")
        writer = self.changelogs[full]
        writer.raise_if_failed()
        return writer

    def serve(self, part: str | None = None, *, instances: int = 2, standbys: int | None = None,
              workdir: str | os.PathLike | None = None, timeout: float = 120.0):
        """Serve one shipped part by key: ``instances`` serving processes (``standbys`` each)
        that tail its changelog, routed as Spark places the part's keys
        (``statekit.serve.part_keys``). Returns the started ``ServingCluster``; its
        ``client()`` answers ``get(key)`` (every key column; times as ISO text, ms or
        datetimes), ``range``, ``all`` and ``top_k``. Stop it with ``stop()`` (or a
        ``with`` block).

        Example:
            >>> with live.serve("0/default") as cluster:                   # doctest: +SKIP
            ...     cluster.client().get({"player": "p07", "minute": "2026-01-05T10:00Z"})
        """
        from statekit.serve.cluster import serve

        writer = self._writer(part)
        return serve(writer.kafka, writer.topic, instances=instances, standbys=standbys,
                     workdir=workdir, timeout=timeout)

    def part_shape(self, part: str | None = None) -> PartShape:
        """What the part's changelog holds (for ``restore_stores`` and standbys)."""
        return self._writer(part).source.shape

    def read_changelog(self, part: str | None = None, from_batch: int | None = None,
                       to_batch: int | None = None, *, progress: bool | None = None):
        """The part's changelog records shipped so far (a ``Changelog``), its time columns
        as timestamps, as in the part's snapshots; its ``last_batch`` is the last batch
        shipped (a batch that changed nothing in the part leaves no record). ``progress``:
        a bar while it reads (None: only for a long read)."""
        from statekit.changelog.reader import read_changelog

        part = part_id(self._find(part))
        writer = self._writer(part)
        from_batch = optional_batch_id(from_batch, "from_batch")
        if from_batch is not None:
            from_batch, to_batch = batch_span(from_batch, to_batch)
        to_batch = optional_batch_id(to_batch, "to_batch")
        shipped = writer.shipped_batch
        if to_batch is not None and to_batch > shipped:
            raise StatekitError(f"batch {to_batch} of part {part!r} is not in its changelog "
                                f"yet: it is shipped through batch {shipped}; "
                                f"wait_shipped({to_batch}) waits for it")
        # a batch that changed nothing in the part leaves no record, yet is shipped: read
        # the whole topic and cut it here, where the shipped batch is known
        log = read_changelog(writer.kafka, writer.topic, progress=progress)
        records = log.records
        if from_batch is not None or to_batch is not None:
            low = -1 if from_batch is None else from_batch
            high = shipped if to_batch is None else to_batch
            records = records[records["batch"].between(low, high)]
        # JSON keeps times as ISO text: back to the part's own timestamps
        schema = self.state(part).schema()
        records = records.copy()
        for column in schema.loc[schema["type"].str.startswith("timestamp"), "column"]:
            if column in records.columns and records[column].dtype == object:
                records[column] = iso_times(records[column])
        return dataclasses.replace(log.with_records(records),
                                   last_batch=max(log.last_batch, shipped))

    def replay(self, part: str | None = None, batch: int | None = None, timeout: float = 120.0
               ) -> pd.DataFrame:
        """The part's state rebuilt from its changelog topic alone, through ``batch`` (the
        last shipped when None), in the rows of its snapshot: a join side's or a list
        state's lists spread back to one row per element. What a restore from the topic
        would hold.

        Right after ``attach(kafka=)`` nothing is shipped yet: it then waits (up to
        ``timeout`` seconds) for the batch last committed when called, and raises
        ``NotShippedYet`` (naming the part, its topic and the batches) if that passes.

        Example:
            >>> same_rows(live.replay("1/right"), live.snapshot("1/right", last))  # doctest: +SKIP
            True
        """
        from statekit.inspect.lists import list_rows

        part = part_id(self._find(part))
        writer = self._writer(part)
        timeout = timeout_seconds(timeout)
        if batch is None and writer.shipped_batch < 0 and self.last_batch >= 0:
            try:
                writer.wait_shipped(self.last_batch, timeout)
            except TimeoutError as exc:
                raise NotShippedYet(
                    f"nothing of part {part!r} was shipped to its changelog topic "
                    f"{writer.topic!r} in {timeout:g} s: {exc}. replay() needs a shipped "
                    f"batch: give it a longer timeout=, or call wait_shipped() first"
                ) from None
        shape = writer.source.shape
        table = self.read_changelog(part, to_batch=batch, progress=False).materialize()
        if table.empty:  # a topic with no record yet knows none of the part's columns
            table = pd.DataFrame(columns=[*shape.key_columns, *shape.value_columns,
                                          "partition"])
        if shape.lists:
            return list_rows(table, shape.key_columns, shape.list_columns)
        return table

    def wait_shipped(self, batch: int | None = None, timeout: float = 120.0) -> int:
        """Block until every part's changelog holds ``batch`` (the last committed when
        None); returns that batch."""
        batch = self.last_batch if batch is None else batch_id(batch)
        timeout = timeout_seconds(timeout)
        deadline = time.monotonic() + timeout
        for writer in self.changelogs.values():
            writer.wait_shipped(batch, max(0.1, deadline - time.monotonic()))
        return batch

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
            _release(self.spark, self)
            _unclaim_shipping(self)
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


def _growing(operators: pd.DataFrame, batches: int) -> pd.DataFrame:
    """``growing_operators`` of an operator frame, as rows: ``operator_id``, ``operator``,
    ``rows`` at the last batch."""
    flagged = growing_operators(operators, batches)
    last = operators[operators["position"].isin(flagged)].groupby("position").tail(1)
    return last[["operator_id", "operator", "rows"]].reset_index(drop=True)


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
        _claim_shipping(query)  # refused before waiting for a batch
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
