"""The progress reports of attached queries, kept in memory by one listener per Spark
session for the handles that follow them (``keeper_for``, ``release``).

Statekit's own queries keep theirs beside their checkpoint instead
(``statekit.query.running``): a handle on anyone's query writes nothing into its checkpoint.
On Spark Connect no listener is registered (registering one again after another was
removed was seen to block for good): a handle keeps what ``recentProgress`` gives.
"""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQueryListener

from statekit.spark.connect import is_connect

if TYPE_CHECKING:
    from statekit.live.handle import AttachedQuery


class ReportKeeper(StreamingQueryListener):
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


_LISTENERS: dict[int, ReportKeeper] = {}
_LISTENERS_LOCK = threading.Lock()


def keeper_for(spark: SparkSession, handle: AttachedQuery) -> ReportKeeper:
    """The session's keeper of reports, following ``handle``'s query. On Spark Connect it
    listens to nothing (registering a client listener there again, after another was
    removed, was seen to block for good): the handle keeps what ``recentProgress`` gives at
    each call instead."""
    with _LISTENERS_LOCK:
        key = id(spark)
        if key not in _LISTENERS:
            _LISTENERS[key] = ReportKeeper()
            if not is_connect(spark):
                spark.streams.addListener(_LISTENERS[key])
        _LISTENERS[key].follow(handle)
        return _LISTENERS[key]


def release(spark: SparkSession, handle: AttachedQuery) -> None:
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
