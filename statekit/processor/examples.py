"""Three processors that ship with statekit, each with the same logic in plain pandas.

- ``SessionTracker``: the reading material's session exercise. Per player, sessions with
  a 30-minute inactivity gap in a session store: start, end (the last activity: a Kafka
  Streams session ends at its last event), events and total score. The store keeps the
  sessions that can still grow (retention = the gap), so a snapshot is the active sessions.
- ``Deduplicate``: drop an event seen before, remembering ids in a key-value store with a
  TTL (processing time: an id is forgotten a TTL after it was first seen).
- ``ThreeGamesRule``: a per-player rule with a key-value store: flag a player seen in three
  different games within the same five minutes; a punctuation on event time forgets old
  buckets.

The references (``sessions_reference``, ``dedup_reference``, ``rule_reference``) compute
what each should give from all the input, in pandas; the tests compare them.

Example:
    >>> import pandas as pd
    >>> events = pd.DataFrame({"player": ["a", "a", "a"], "score": [1, 2, 3],
    ...     "ts": pd.to_datetime(["2026-01-05 10:00", "2026-01-05 10:20", "2026-01-05 11:30"])})
    >>> sessions_reference(events, gap="30 minutes")[["session_start", "session_end", "events"]]
            session_start         session_end  events
    0 2026-01-05 10:00:00 2026-01-05 10:20:00       2
    1 2026-01-05 11:30:00 2026-01-05 11:30:00       1
"""

from __future__ import annotations

import pandas as pd

from statekit.durations import to_millis
from statekit.model.session_key import Session
from statekit.processor.layout import key_value_store, session_store
from statekit.processor.processor import Processor, schedule
from statekit.reference.sessions import session_reference

GAME_COLUMNS = ["player", "game", "score", "ts"]


class SessionTracker(Processor):
    """Sessions per player with an inactivity ``gap``, in the session store ``sessions``.

    Each batch's events of a player are grouped into runs no more than ``gap`` apart; each
    run is merged with the stored sessions it touches (``find_sessions(None, start - gap,
    end + gap)``), which are removed, and the merged session is put. Output: the sessions
    a batch changed. On event time: the store drops a session once the watermark is more
    than ``retention`` (default: the gap) past its end, and does not keep one that ends
    before ``retained_from`` (possible when the watermark moved more than the retention in
    one batch: Spark still hands the batch rows down to the previous watermark).
    """

    time = "event"
    output = ("player string, session_start timestamp, session_end timestamp, "
              "events bigint, total_score bigint")

    def __init__(self, gap: str = "30 minutes", retention: str | None = None):
        self.gap_ms = to_millis(gap, "session gap")
        self.gap, self.retention = gap, retention or gap

    def stores(self):
        return [session_store("sessions", value="events bigint, total_score bigint",
                              retention=self.retention)]

    def init(self, stores):
        self.sessions = stores["sessions"]

    def process(self, player, rows):
        gap = pd.Timedelta(milliseconds=self.gap_ms)
        rows = rows.sort_values("ts", kind="stable")
        run = (rows["ts"].diff() > gap).cumsum()
        changed = []
        for _, events in rows.groupby(run, sort=True):
            start, end = events["ts"].iloc[0], events["ts"].iloc[-1]
            count, total = len(events), int(events["score"].fillna(0).sum())
            for session, value in self.sessions.find_sessions(None, start - gap, end + gap):
                self.sessions.remove(session)
                start, end = min(start, session.start), max(end, session.end)
                count, total = count + value["events"], total + value["total_score"]
            if end >= self.sessions.retained_from:  # else: already past retention, not kept
                self.sessions.put(Session(None, start, end), (count, total))
            changed.append((player, start, end, count, total))
        return pd.DataFrame(changed, columns=["player", "session_start", "session_end",
                                              "events", "total_score"])


def sessions_reference(events: pd.DataFrame, gap: str = "30 minutes",
                       watermark: pd.Timestamp | None = None,
                       retention: str | None = None) -> pd.DataFrame:
    """``SessionTracker``'s store from all of ``events`` (player, score, ts), in pandas:
    ``player``, ``session_start``, ``session_end`` (the last event), ``events``,
    ``total_score``; with ``watermark``, only the sessions the store still keeps there
    (``session_end + retention`` not behind it)."""
    gap_td = pd.Timedelta(milliseconds=to_millis(gap, "session gap"))
    spark_like = session_reference(events, ["player"], gap)  # window_end = last event + gap
    frame = events.assign(ts=pd.to_datetime(events["ts"]))
    totals = []
    for row in spark_like.itertuples(index=False):
        mine = frame[(frame["player"] == row.player) & (frame["ts"] >= row.window_start)
                     & (frame["ts"] <= row.window_end - gap_td)]
        totals.append(int(mine["score"].fillna(0).sum()))
    out = pd.DataFrame({"player": spark_like["player"],
                        "session_start": spark_like["window_start"],
                        "session_end": spark_like["window_end"] - gap_td,
                        "events": spark_like["count"], "total_score": totals})
    if watermark is not None:
        keep = pd.Timedelta(milliseconds=to_millis(retention or gap, "retention"))
        out = out[out["session_end"] + keep >= pd.Timestamp(watermark)]
    return out.sort_values(["player", "session_start"], ignore_index=True)


class Deduplicate(Processor):
    """Pass each event once: an event whose ``id`` fields the store ``seen`` holds is dropped.

    ``seen`` maps the id to when it was first seen (the batch's processing time), with a
    TTL: Spark forgets the id a ``ttl`` of processing time after that write, so a copy
    arriving later passes again. (Spark's ``dropDuplicatesWithinWatermark`` forgets by
    event time instead.)

    Args:
        id: the id fields (DDL) within a player: by default ``"game string, ts timestamp"``
            (a player does not play one game twice at the same instant).
        output: the DDL of the rows passed on (the event's columns).
    """

    time = "processing"

    def __init__(self, id: str = "game string, ts timestamp",
                 ttl: str = "1 hour",
                 output: str = "player string, game string, score bigint, ts timestamp"):
        self.id, self.ttl, self.output = id, ttl, output
        self.id_columns = [part.split()[0] for part in id.split(",")]

    def stores(self):
        return [key_value_store("seen", key=self.id, value="first_seen timestamp",
                                ttl=self.ttl)]

    def init(self, stores):
        self.seen = stores["seen"]

    def process(self, player, rows):
        rows = rows.drop_duplicates(self.id_columns)
        fresh = []
        for i, event_id in enumerate(rows[self.id_columns].itertuples(index=False, name=None)):
            if self.seen.get(event_id) is None:
                self.seen.put(event_id, self.now)
                fresh.append(i)
        return rows.iloc[fresh]


def dedup_reference(events: pd.DataFrame, id_columns=("game", "ts")) -> pd.DataFrame:
    """``Deduplicate``'s output from all of ``events``, when nothing expired: the first of
    each (player, id) in order."""
    return events.drop_duplicates(["player", *id_columns]).reset_index(drop=True)


class ThreeGamesRule(Processor):
    """Flag a player seen in ``games`` different games within the same ``within`` bucket.

    The key-value store ``games`` maps (bucket start, game) to the player's events there;
    a flag (player, bucket) is returned once, when a bucket's ``prefix_scan`` reaches
    ``games`` different games. A punctuation on event time, every ``within``,
    deletes the buckets that ended before the watermark (``range`` up to that bucket).
    """

    time = "event"
    output = "player string, bucket timestamp"

    def __init__(self, games: int = 3, within: str = "5 minutes"):
        self.games, self.within_ms = games, to_millis(within, "rule window")

    def stores(self):
        return [key_value_store("games", key="bucket timestamp, game string",
                                value="events bigint")]

    def init(self, stores):
        self.store = stores["games"]

    def process(self, player, rows):
        buckets = rows["ts"].dt.floor(f"{self.within_ms}ms")
        flags = []
        for bucket, events in rows.groupby(buckets, sort=True):
            before = len(self.store.prefix_scan((bucket,)))
            for game, n in events.groupby("game").size().items():
                self.store.put((bucket, game), (self.store.get((bucket, game)) or 0) + int(n))
            after = len(self.store.prefix_scan((bucket,)))
            if before < self.games <= after:
                flags.append((player, bucket))
        return pd.DataFrame(flags, columns=["player", "bucket"])

    @schedule("5 minutes")
    def forget_old_buckets(self, player, timestamp):
        cutoff = timestamp - pd.Timedelta(milliseconds=self.within_ms)
        for key, _ in self.store.range(None, (cutoff,)):
            self.store.delete(key)


def rule_reference(events: pd.DataFrame, games: int = 3, within: str = "5 minutes"
                   ) -> pd.DataFrame:
    """``ThreeGamesRule``'s flags from all of ``events``: (player, bucket) for every bucket
    where the player played at least ``games`` different games."""
    ms = to_millis(within, "rule window")
    frame = events.assign(bucket=pd.to_datetime(events["ts"]).dt.floor(f"{ms}ms"))
    per = frame.groupby(["player", "bucket"])["game"].nunique().reset_index(name="distinct")
    flagged = per[per["distinct"] >= games]
    return flagged[["player", "bucket"]].sort_values(["player", "bucket"], ignore_index=True)


def rule_store_reference(events: pd.DataFrame, within: str = "5 minutes") -> pd.DataFrame:
    """``ThreeGamesRule``'s store from all of ``events`` before any bucket is forgotten:
    ``player``, ``bucket``, ``game``, ``events``."""
    ms = to_millis(within, "rule window")
    frame = events.assign(bucket=pd.to_datetime(events["ts"]).dt.floor(f"{ms}ms"))
    return (frame.groupby(["player", "bucket", "game"]).size().reset_index(name="events")
            .sort_values(["player", "bucket", "game"], ignore_index=True))
