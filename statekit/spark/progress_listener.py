"""One progress listener per Spark session, handing each query's progress reports to the
parts of statekit that follow that query.

statekit follows reports in two places: its own queries keep them beside their checkpoint
(``statekit.query.running``), a handle on anyone's query keeps them in memory
(``statekit.live.handle``). Both follow through ``follow(spark, query_id, hear)``, which
returns a ``Following`` to ``stop()``. ``hear`` gets each ``StreamingQueryProgress`` of
that query, on Spark's listener thread.

The listener joins the session with its first follower and leaves with its last (a
listener left on a session is called at every batch of every query, for nobody). On Spark
Connect it joins once and stays: adding a client listener again after one was removed was
seen to block for good. A query's followers are dropped when Spark reports it terminated.

Example:
    >>> heard = []                                                  # doctest: +SKIP
    >>> following = follow(spark, str(query.id), heard.append)      # doctest: +SKIP
    >>> query.processAllAvailable(); following.stop()               # doctest: +SKIP
    >>> heard[-1].batchId                                           # doctest: +SKIP
    3
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQueryListener

from statekit.spark.connect import is_connect

log = logging.getLogger(__name__)

#: what a follower is handed: one ``StreamingQueryProgress``
Hear = Callable[[Any], None]


class _SessionListener(StreamingQueryListener):
    """The one listener statekit adds to a session: reports go to their query's followers."""

    def __init__(self) -> None:
        self.followers: dict[str, dict[int, Hear]] = {}
        self.lock = threading.Lock()

    def onQueryStarted(self, event) -> None:
        pass

    def onQueryProgress(self, event) -> None:
        progress = event.progress
        with self.lock:
            hearers = list(self.followers.get(str(progress.id), {}).values())
        for hear in hearers:  # one follower's failure never silences the others
            try:
                hear(progress)
            except Exception:
                log.exception("a follower of query %s failed on batch %s", progress.id,
                              progress.batchId)

    def onQueryIdle(self, event) -> None:
        pass

    def onQueryTerminated(self, event) -> None:
        with self.lock:  # no more reports will come; the session listener leaves at stop()
            self.followers.pop(str(event.id), None)


@dataclass
class _Joined:
    listener: _SessionListener
    connect: bool
    added: bool = False
    #: a follower's query was started by statekit: at exit the session's queries stop first
    owns_queries: bool = False


_SESSIONS: dict[int, _Joined] = {}
_LOCK = threading.Lock()
_TOKENS = itertools.count()


@dataclass(frozen=True)
class Following:
    """One follower of one query's reports; ``stop()`` ends it (idempotent)."""

    spark: SparkSession
    query_id: str
    token: int

    def stop(self) -> None:
        _drop(self.spark, self.query_id, self.token)


def follow(spark: SparkSession, query_id: str, hear: Hear, *, owned: bool = False
           ) -> Following:
    """Hand every later progress report of query ``query_id`` to ``hear``. ``owned``: statekit
    started that query (at interpreter exit the session's active queries are stopped between
    batches before the listener goes; a person's attached query is left alone)."""
    with _LOCK:
        joined = _SESSIONS.get(id(spark))
        if joined is None:
            joined = _SESSIONS[id(spark)] = _Joined(_SessionListener(), is_connect(spark))
            # The JVM would go on calling a Python listener after Python has gone.
            atexit.register(_unhook, spark, joined)
        joined.owns_queries = joined.owns_queries or owned
        token = next(_TOKENS)
        with joined.listener.lock:
            joined.listener.followers.setdefault(str(query_id), {})[token] = hear
        if not joined.added:
            spark.streams.addListener(joined.listener)
            joined.added = True
    return Following(spark, str(query_id), token)


def unfollow(spark: SparkSession, query_id: str) -> None:
    """Every follower of ``query_id`` stops (its handle closed); idempotent."""
    _drop(spark, str(query_id), None)


def _drop(spark: SparkSession, query_id: str, token: int | None) -> None:
    """Drop one follower (``token``) or all of ``query_id``; the listener leaves the session
    with its last follower (never on Connect: see the module's docstring)."""
    with _LOCK:
        joined = _SESSIONS.get(id(spark))
        if joined is None:
            return
        with joined.listener.lock:
            mine = joined.listener.followers.get(query_id, {})
            if token is not None:
                mine.pop(token, None)
            if token is None or not mine:
                joined.listener.followers.pop(query_id, None)
            nobody = not joined.listener.followers
        if nobody and joined.added and not joined.connect:
            joined.added = False
            with contextlib.suppress(Exception):  # a stopped session has no listeners left
                spark.streams.removeListener(joined.listener)


def followed(spark: SparkSession) -> set[str]:
    """The ids of the queries someone in statekit follows on ``spark``."""
    joined = _SESSIONS.get(id(spark))
    if joined is None:
        return set()
    with joined.listener.lock:
        return set(joined.listener.followers)


def listening(spark: SparkSession) -> bool:
    """True while statekit's listener is on ``spark`` (it leaves with its last follower)."""
    joined = _SESSIONS.get(id(spark))
    return joined is not None and joined.added


def _unhook(spark: SparkSession, joined: _Joined) -> None:
    """At exit: stop the session's running queries between batches when statekit started
    one of them, then take the listener off, so the JVM calls no Python that has gone."""
    with contextlib.suppress(Exception):
        if joined.added:
            if joined.owns_queries:
                for query in spark.streams.active:
                    query.stop()
            spark.streams.removeListener(joined.listener)
