"""The reading material's first leaderboard: every game end a row in a database, every look at
the leaderboard a query over it.

``DatabaseLeaderboard`` is that baseline on SQLite (the standard library's, one
file, write-ahead log): ``insert`` adds game events, ``top(window, k)`` adds up
each player's score in the window *at read time* (``GROUP BY`` over the window's
events) and ranks them, and ``keep_writing`` is the game: new events committed one
by one, as games end, for as long as a load test runs. Served state answers the
same question from rows Spark aggregated once, as the events arrived
(``ServingClient.top_k``); notebook 06 times both under the same concurrent
readers.

Example:
    >>> import tempfile
    >>> events = pd.DataFrame({"player": ["p1", "p2", "p1"], "score": [10, 30, 25],
    ...                        "ts": pd.to_datetime(["2026-01-05 10:01", "2026-01-05 10:02",
    ...                                              "2026-01-05 10:05"])})
    >>> db = DatabaseLeaderboard(tempfile.mkdtemp() + "/games.db", "10 minutes")
    >>> db.insert(events)
    3
    >>> db.top("2026-01-05 10:00", 2)
    [{'player': 'p1', 'count': 2, 'sum_score': 35}, {'player': 'p2', 'count': 1, 'sum_score': 30}]
    >>> db.close()
"""

from __future__ import annotations

import os
import sqlite3
import threading
from itertools import cycle

import pandas as pd

from statekit.durations import to_millis
from statekit.validate import require_columns, whole_number

_SCHEMA = ("CREATE TABLE IF NOT EXISTS events (player TEXT NOT NULL, ts INTEGER NOT NULL, "
           "score INTEGER)", "CREATE INDEX IF NOT EXISTS events_ts ON events (ts)")
_TOP = ("SELECT player, COUNT(*) AS count, SUM(score) AS sum_score FROM events "
        "WHERE ts >= ? AND ts < ? GROUP BY player ORDER BY sum_score DESC, player LIMIT ?")


def _ms(when: object) -> int:
    stamp = pd.Timestamp(when)
    if stamp.tzinfo is not None:
        stamp = stamp.tz_convert("UTC").tz_localize(None)
    return int(stamp.value // 1_000_000)


class DatabaseLeaderboard:
    """Game events in a SQLite table; the leaderboard computed by a query on every read.

    Args:
        path: the database file (created).
        window: the leaderboard's window size (``"10 minutes"``).
    """

    def __init__(self, path: str | os.PathLike, window: str = "10 minutes"):
        self.path, self.window_ms = str(path), to_millis(window, "window")
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        db = self._db()
        db.execute("PRAGMA journal_mode=WAL")
        for statement in _SCHEMA:
            db.execute(statement)
        db.commit()

    def _db(self) -> sqlite3.Connection:
        """This thread's connection (SQLite connections are not shared between threads)."""
        db = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.path, timeout=30, check_same_thread=False)
            db.execute("PRAGMA synchronous=NORMAL")
            self._local.db = db
            with self._lock:
                self._all.append(db)
        return db

    @staticmethod
    def _rows(events: pd.DataFrame) -> list[tuple]:
        require_columns(events, ("player", "ts", "score"), "events frame",
                        "one row per game event: player, ts, score")
        ts = pd.to_datetime(events["ts"])
        if ts.dt.tz is not None:
            ts = ts.dt.tz_convert("UTC").dt.tz_localize(None)
        ms = (ts - pd.Timestamp(0)) // pd.Timedelta(milliseconds=1)
        scores = events["score"].astype(object).where(events["score"].notna(), None)
        return [(str(p), int(t), None if s is None else int(s))
                for p, t, s in zip(events["player"], ms, scores, strict=True)]

    def insert(self, events: pd.DataFrame) -> int:
        """Add game events (``player``, ``ts``, ``score``) in one transaction; how many."""
        rows = self._rows(events)
        db = self._db()
        db.executemany("INSERT INTO events VALUES (?, ?, ?)", rows)
        db.commit()
        return len(rows)

    def keep_writing(self, events: pd.DataFrame, stop: threading.Event) -> int:
        """The game: insert ``events`` one by one, each its own transaction (a game end),
        over and over, until ``stop`` is set; how many were written."""
        written, db = 0, self._db()
        for row in cycle(self._rows(events)):
            if stop.is_set():
                break
            db.execute("INSERT INTO events VALUES (?, ?, ?)", row)
            db.commit()
            written += 1
        return written

    def top(self, window_start: object, k: int = 10) -> list[dict]:
        """The ``k`` best players of the window starting at ``window_start``: count and
        sum of score, added up now from the events."""
        k = whole_number(k, "k", minimum=1)
        start = _ms(window_start)
        cursor = self._db().execute(_TOP, (start, start + self.window_ms, k))
        return [{"player": p, "count": int(n), "sum_score": None if s is None else int(s)}
                for p, n, s in cursor.fetchall()]

    def close(self) -> None:
        """Close every thread's connection."""
        with self._lock:
            for db in self._all:
                db.close()
            self._all.clear()
        self._local = threading.local()
