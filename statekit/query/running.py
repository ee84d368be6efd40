"""A running query statekit started: its lifecycle, failures, waiting and progress.

``RunningQuery`` is the base of ``StatefulQuery`` and ``ProcessorQuery``: it stops the
query (``close()``), waits for batches or for the input to drain, turns Spark's failures
into statekit's errors, and reads the progress reports statekit's listener keeps beside the
checkpoint. ``new_run`` prepares a run's checkpoint, ``start_recorded`` starts a plan with
its reports kept.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import json
import os
import shutil
import tempfile
import threading
import time
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Self

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery, StreamingQueryListener

from statekit.changelog.writer import ChangelogWriter
from statekit.deprecation import deprecated
from statekit.errors import BadArgument, BrokerUnreachable, DiskFull, StatekitError
from statekit.model.query_options import RunOptions
from statekit.query.failures import BROKER_STALL, failure_text
from statekit.spark.stopping import stop_between_batches
from statekit.spark.workers import require_statekit_in_workers
from statekit.spark_state.checkpoint import Checkpoint
from statekit.spark_state.progress import (
    progress_frame,
    recovered_progress,
)
from statekit.spark_state.state_reader import StateReader
from statekit.validate import (
    batch_id,
    timeout_seconds,
    writable_directory,
)

if TYPE_CHECKING:
    from statekit.inspect.describe import Description


class _ProgressRecorder(StreamingQueryListener):
    """Keeps every progress report of statekit queries beside their checkpoint."""

    def __init__(self):
        self.checkpoints: dict[str, Checkpoint] = {}

    def onQueryStarted(self, event) -> None:
        pass

    def onQueryProgress(self, event) -> None:
        checkpoint = self.checkpoints.get(str(event.progress.id))
        if checkpoint is not None:
            # a full or read-only disk loses the report; progress() recovers the batch
            with contextlib.suppress(OSError):
                checkpoint.write_progress(event.progress.batchId, event.progress.json)

    def onQueryIdle(self, event) -> None:
        pass

    def onQueryTerminated(self, event) -> None:
        pass


_RECORDERS: dict[int, _ProgressRecorder] = {}


def _recorder(spark: SparkSession) -> _ProgressRecorder:
    key = id(spark)
    if key not in _RECORDERS:
        _RECORDERS[key] = _ProgressRecorder()
        spark.streams.addListener(_RECORDERS[key])
        # The JVM would go on calling a Python listener after Python has gone: unhook it.
        atexit.register(_remove_listener, spark, _RECORDERS[key])
    return _RECORDERS[key]


def _remove_listener(spark: SparkSession, listener: StreamingQueryListener) -> None:
    with contextlib.suppress(Exception):
        for query in spark.streams.active:
            query.stop()
        spark.streams.removeListener(listener)


@dataclass(frozen=True)
class Started:
    """What starting a query in Spark gave: the ``StreamingQuery``, its side stream of
    malformed events (None: not parsed here), the first batch this run commits, and whether
    it ends by itself once drained (the ``available-now`` trigger)."""

    query: StreamingQuery
    malformed_stream: DataFrame | None = None
    first_batch: int = 0
    available_now: bool = False


class RunningQuery:
    """A query statekit started: wait on it, read its progress, close it.

    The base of ``StatefulQuery`` and ``ProcessorQuery``, which add how their state is read
    (``statekit.model.query_handle.QueryHandle``: the verbs every handle shares).
    """

    def __init__(self, spark: SparkSession, checkpoint: Checkpoint, started: Started,
                 reader: StateReader, changelog: ChangelogWriter | None = None):
        self.spark = spark
        #: the checkpoint folder (``Checkpoint``: Spark's logs and statekit's files beside them)
        self.checkpoint = Checkpoint(checkpoint)
        self.query = started.query
        #: the reader of the query's state (``StateReader``): counts of recovered batches
        self.reader = reader
        self._first_batch = started.first_batch  # the first batch this run commits
        self._counted: dict[int, dict] = {}  # Spark's state counts of recovered batches
        #: ships each committed batch's state changes to the changelog topic (None: logging off)
        self.changelog = changelog
        self._available_now = started.available_now  # such a query ends by itself when drained
        self._stopped_here = False

    # --- lifecycle ------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.query.name

    @property
    def is_active(self) -> bool:
        return self.query.isActive

    def close(self) -> None:
        """Stop the query between two batches (and ship its last committed batches); the
        checkpoint stays. Idempotent; a ``with`` block calls it.

        Raises:
            DiskFull: after stopping, when the changelog's ledger could not be written (the
                folder is named; the query and its checkpoint are fine).
        """
        self._stopped_here = True
        if self.changelog is not None:
            # no changelog round (a Spark job reading the change feed) may be in flight while
            # Spark stops the query: one such read was seen to hang for good in Spark's
            # collect (its serving thread ended without an answer). The rounds left are
            # shipped below, once the query has stopped.
            self._stop_shipping()
        stop_between_batches(self.query)
        with contextlib.suppress(OSError, StatekitError):  # kept only for Connect's late events
            self.keep_reports()
        if self.changelog is not None:
            try:
                self.changelog.stop()
            except DiskFull:
                raise
            except OSError as exc:
                if exc.errno not in (errno.ENOSPC, errno.EROFS, errno.EDQUOT):
                    raise
                folder = str(self.checkpoint.ledger_path(self.changelog.topic).parent)
                raise self._disk_full(f"the changelog's ledger could not be written ({exc})",
                                      folder) from None

    def stop(self) -> None:
        """Deprecated alias of ``close()`` (every handle ends with ``close()``)."""
        deprecated("stop()", "close()")
        self.close()

    def _stop_shipping(self) -> None:
        """Stop the changelog's background thread; its error waits for ``stop()``'s ship."""
        with contextlib.suppress(Exception):
            self.changelog.stop_background()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _raise_if_failed(self) -> None:
        q = self.query
        if not q.isActive and q.exception() is not None:
            raise self._failure(q.exception()) from None

    def _failure(self, exc: BaseException) -> StatekitError:
        """The error to raise for the query's failure ``exc``: what happened and what to do, in
        a few lines; Spark's full text (plan, traces) goes to ``spark_log()`` and stays on the
        error as ``spark_error``."""
        from statekit.spark.session import log_failure, spark_log

        log_failure(f"query {self.name!r} failed", exc)
        text = failure_text(exc)
        if "No space left on device" in text:
            err: StatekitError = self._disk_full(text)
        elif (stall := BROKER_STALL.search(text)) is not None:
            err = BrokerUnreachable(stall["servers"], f"query {self.name!r} stopped after batch "
                                                      f"{self.last_batch}: {text}")
        else:
            err = StatekitError(f"query {self.name!r} failed: {text} (Spark's full error: "
                                f"{str(spark_log())!r})")
        err.spark_error = exc
        return err

    def _disk_full(self, detail: str, folder: str | None = None) -> DiskFull:
        """DiskFull naming the fuller of the checkpoint's and Spark's local folder (or
        ``folder``), with what the last batch wrote to the checkpoint as the space needed."""
        if folder is None:
            places = [str(self.checkpoint), tempfile.gettempdir()]
            folder = min(places, key=_free_bytes)
        ck, last = self.checkpoint, self.last_batch
        paths = [ck.offsets_dir / str(last + 1), ck.commits_dir / str(last),
                 ck.progress_path(last)]
        for operator_id in ck.operator_ids():
            paths += ck.operator_dir(operator_id).glob(f"*/{last + 1}[._]*")
        needed = sum(p.stat().st_size for p in paths if p.is_file())
        return DiskFull(folder, needed or None, f"query {self.name!r} stopped after batch "
                        f"{last}: {detail}. Free some space there, then start the query again "
                        f"with the same checkpoint: it resumes from its last commit",
                        free=_free_bytes(folder))

    def _raise_if_stopped(self, doing: str) -> None:
        """Raise when the query is no longer running and nobody here asked it to stop: its
        failure, or why Spark stopped it without one."""
        self._raise_if_failed()
        if self.query.isActive or self._stopped_here or self._available_now:
            return
        raise StatekitError(f"query {self.name!r} stopped without an error {doing}: "
                            f"{self._stop_reason()}")

    def _stop_reason(self) -> str:
        q = self.query
        for other in self.spark.streams.active:
            if other.id == q.id and other.runId != q.runId:
                return (f"another run of it (query {other.name!r}, run id {other.runId}) was "
                        f"started on the same checkpoint {str(self.checkpoint)!r} in this Spark "
                        f"session, and Spark stops the older run when a new one starts "
                        f"(spark.sql.streaming.stopActiveRunOnRestart). Use the new run's "
                        f"handle, or give each query a checkpoint of its own")
        return (f"it was stopped outside this handle (StreamingQuery.stop(), "
                f"spark.streams, another run on checkpoint {str(self.checkpoint)!r} that has "
                f"ended since, or the Spark session stopping); start it again with the same "
                f"checkpoint to resume")

    def wait_for_batches(self, n: int, timeout: float = 120.0) -> int:
        """Block until this run has committed ``n`` batches; returns the last batch id."""
        n = batch_id(n, "number of batches")
        timeout = timeout_seconds(timeout)
        deadline = time.monotonic() + timeout
        while self.last_batch - self._first_batch + 1 < n:
            self._raise_if_stopped(f"before {n} batches")
            if not self.query.isActive:
                raise StatekitError(f"query {self.name!r} stopped before {n} batches")
            if time.monotonic() > deadline:
                status = self.query.status  # e.g. "Waiting for data to arrive": no new input
                raise TimeoutError(f"query {self.name!r} did not complete {n} batches "
                                   f"in {timeout:.0f} s (Spark's status: "
                                   f"{status.get('message')!r})")
            time.sleep(0.1)
        self._await_report(self.last_batch)
        return self.last_batch

    @property
    def _runs_batches_without_input(self) -> bool:
        """True when Spark runs a batch on every trigger, new input or not (a TTL'd running
        aggregate expires state so), which ``processAllAvailable`` would wait on forever."""
        return False

    def wait_until_drained(self, timeout: float = 300.0) -> int:
        """Block until everything in the input so far is processed; returns the last batch id.

        A TTL'd running aggregate runs a batch on every trigger even without new input
        (to expire state), so Spark's ``processAllAvailable`` would never return for it:
        there, drained means a committed batch whose sources had read all they saw.
        """
        timeout = timeout_seconds(timeout)
        q, errors = self.query, []

        def drain():
            try:
                if self._runs_batches_without_input:
                    self._poll_caught_up(timeout)
                else:
                    q.processAllAvailable()
            except BaseException as exc:  # surfaced in the caller's thread
                errors.append(exc)

        worker = threading.Thread(target=drain, daemon=True)
        worker.start()
        worker.join(timeout)
        if worker.is_alive():
            raise TimeoutError(f"query {q.name!r} did not drain its input in {timeout:.0f} s")
        if errors:
            if isinstance(errors[0], TimeoutError):
                raise errors[0]
            raise self._failure(errors[0]) from None
        self._raise_if_stopped("before it drained its input")
        self._await_report(self.last_batch)
        if self.changelog is not None:
            self.changelog.wait_shipped(self.last_batch, timeout)
        return self.last_batch

    def _poll_caught_up(self, timeout: float) -> None:
        """Wait for a batch that read nothing new after its sources caught up; a batch
        triggered before this call does not count (it may predate input written since)."""
        deadline = time.monotonic() + timeout
        called = pd.Timestamp.now(tz="UTC")
        seen = -1
        while time.monotonic() < deadline:
            self._raise_if_failed()
            progress = self.query.lastProgress
            if progress and progress["batchId"] > seen and \
                    pd.Timestamp(progress["timestamp"]) >= called:
                seen = progress["batchId"]
                sources = progress.get("sources") or []
                caught_up = all(src.get("latestOffset") is not None and
                                src.get("endOffset") == src.get("latestOffset")
                                for src in sources)
                if caught_up and progress.get("numInputRows", 0) == 0:
                    return
            time.sleep(0.1)
        raise TimeoutError(f"query {self.name!r} did not drain its input in {timeout:.0f} s")

    def _await_report(self, batch: int, timeout: float = 10.0) -> None:
        """Progress reports arrive asynchronously; give the last one a moment to land."""
        path = self.checkpoint.progress_path(batch) if batch >= 0 else None
        deadline = time.monotonic() + timeout
        while path is not None and not path.exists() and time.monotonic() < deadline:
            time.sleep(0.05)

    # --- progress -------------------------------------------------------------------
    def progress(self) -> pd.DataFrame:
        """One row per batch (all runs of this checkpoint): rows in, state rows, timings.

        Reports come from statekit's listener, kept beside the checkpoint, and from the
        query's ``recentProgress`` (a report the listener has not delivered yet: listener
        events reach a Spark Connect client late). A committed batch with neither (its
        report was lost: the process was killed before it was kept, or the disk was full)
        is recovered from the checkpoint (``statekit.spark_state.progress.recovered_progress``)
        and from Spark's state (rows, puts and deletes: ``StateReader.batch_counts``);
        ``recovered`` is True there and what cannot be recovered is NA. Reads only: works on
        a full or read-only disk.
        """
        last = self.checkpoint.last_batch  # only batches whose commit is in the log
        reports = {r.get("batchId"): r for r in self.progress_reports(last=last)}
        frame = progress_frame(reports.values())
        pending = self.query.isActive and last >= self._first_batch  # its report is on its way
        missing = [b for b in range(last + 1) if b not in reports and not
                   (pending and b == last)]
        if not missing:
            return frame
        recovered = recovered_progress(self.checkpoint, missing).set_index("batch")
        counts = self._state_counts(missing)
        if len(counts):
            recovered.update(counts.set_index("batch").astype("Int64"))
        out = frame.set_index("batch").reindex(sorted({*frame["batch"], *recovered.index}))
        whole = [c for c in out.columns if c in frame and pd.api.types.is_integer_dtype(frame[c])]
        out = out.astype({**dict.fromkeys(whole, "Int64"), "recovered": bool})
        for column in recovered.columns:
            if recovered[column].notna().any():
                out.loc[recovered.index, column] = recovered[column]
        return out.reset_index()

    def progress_reports(self, kept: Iterable[dict] | None = None, last: int | None = None
                         ) -> list[dict]:
        """The progress reports of committed batches, as Spark's JSON objects: those
        statekit's listener kept beside the checkpoint, then, for a batch of this run whose
        report the listener has not delivered yet (its events are asynchronous, and late under
        load or on Spark Connect), the query's ``recentProgress``. Nothing is recovered here
        (``progress()`` does that).

        ``kept``: the listener's reports when the caller has read them already (a
        ``statekit.monitor.ProgressTail`` reads each file once); default: read them now.
        ``last``: the last committed batch, when the caller has read it already.
        """
        reports = {r.get("batchId"): r for r in
                   (self.checkpoint.progress_reports() if kept is None else kept)}
        last = self.checkpoint.last_batch if last is None else last
        if any(b not in reports for b in range(max(self._first_batch, 0), last + 1)):
            for report in self._recent_reports():   # only then: a JVM call per report
                if 0 <= report["batchId"] <= last:
                    reports.setdefault(report["batchId"], report)
        return list(reports.values())

    def _recent_reports(self) -> list[dict]:
        try:
            return [json.loads(report.json) for report in self.query.recentProgress]
        except Exception:  # a stopped Connect query may no longer answer
            return []

    def _state_counts(self, batches: list[int]) -> pd.DataFrame:
        """``StateReader.batch_counts`` of ``batches``, each batch read once per handle (a
        committed batch's state does not change); empty, with a warning, when the state
        cannot be read."""
        todo = [b for b in batches if b not in self._counted]
        if todo:
            try:
                counts = self.reader.batch_counts(todo)
            except StatekitError as exc:
                warnings.warn(f"progress(): the state rows of recovered batches are NA: {exc}",
                              stacklevel=3)
                counts = pd.DataFrame(columns=["batch"])
            for row in counts.to_dict("records"):
                self._counted[int(row["batch"])] = row
        rows = [self._counted[b] for b in batches if b in self._counted]
        return pd.DataFrame(rows)

    def keep_reports(self) -> int:
        """Keep beside the checkpoint the reports of ``recentProgress`` the listener has not
        kept (listener events reach a Spark Connect client late); returns how many.

        Raises:
            DiskFull: the progress folder's disk has no space left (named, with the size).
        """
        kept, last = 0, self.checkpoint.last_batch
        for report in self._recent_reports():
            batch = report["batchId"]
            if 0 <= batch <= last and not self.checkpoint.progress_path(batch).exists():
                self.checkpoint.write_progress(batch, json.dumps(report))
                kept += 1
        return kept

    @property
    def last_batch(self) -> int:
        """Id of the last committed batch (-1 before the first)."""
        return self.checkpoint.last_batch

    def describe(self, **options: Any) -> Description:
        """What the checkpoint holds and what looks wrong (``CheckpointView.describe``:
        ``options`` are its thresholds), with this query's progress, so that commits
        dominating their batches are flagged too.

        Example:
            >>> query.describe().flag_names                              # doctest: +SKIP
        """
        from statekit.inspect.view import CheckpointView

        return CheckpointView(self.checkpoint, self.spark).describe(progress=self.progress(),
                                                                    **options)

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
    recorder = _recorder(spark)
    query = (frame.writeStream.queryName(run.name).outputMode(run.output_mode)
             .format(run.sink).option("checkpointLocation", str(checkpoint))
             .trigger(**run.trigger_kwargs()).start())
    recorder.checkpoints[str(query.id)] = checkpoint
    return query


def _free_bytes(folder: str) -> int:
    """Bytes free on the device of ``folder`` (its nearest existing parent)."""
    path = os.path.abspath(folder)
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return 0
