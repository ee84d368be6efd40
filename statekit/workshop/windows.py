"""Exercises of notebook 02 (window and session stores, the watermark and eviction)."""

from __future__ import annotations

import pandas as pd

from statekit.durations import to_millis
from statekit.errors import BadArgument
from statekit.query.session_reference import session_reference
from statekit.workshop._frames import compare_rows
from statekit.workshop.answers import count
from statekit.workshop.choices import Choices
from statekit.workshop.registry import exercise, review
from statekit.workshop.verdict import Point

NOTEBOOK = "02_windows_sessions_and_watermarks"
GAP_MS = 30 * 60 * 1000
SESSION_KEYS = ("carrier",)


@exercise("02.1", "How many windows survive the watermark?", NOTEBOOK, "predict")
def windows_left(answer: object, *, rows: int | None = None, keys: int | None = None,
                 windows_made: int | None = None, watermark: object = None):
    guess = count(answer)
    if guess is None:
        return [Point(False, f"{answer!r}: answer with a whole number of state rows")]
    if rows is None or keys is None or windows_made is None:
        raise BadArgument("measured", "rows/keys/windows_made",
                          "rows=len(snapshot), keys=number of origins, windows_made=every "
                          "(window, origin) the query aggregated")
    why = (f"the watermark ended at {watermark} (the latest event time minus the delay); "
           f"only windows ending after it stay: {rows} rows ({rows // max(keys, 1)} hourly "
           f"windows for each of the {keys} origins)")
    if guess == rows:
        return [Point(True, why)]
    hint = {windows_made: f"{windows_made} is every window the query ever aggregated; the "
                          "watermark evicted all but the last few",
            rows // max(keys, 1): "that is the count for one origin; the store holds every "
                                  "origin's windows",
            0: "the watermark trails the latest event by its delay, so the last windows "
               "are still open"}.get(guess)
    points = [Point(False, f"{guess} is not it: {why}")]
    if hint:
        points.append(Point(False, hint))
    return points


def _spec_points(spec) -> list[Point]:
    points = []
    if spec.kind != "session":
        points.append(Point(False, f"the window is {spec.kind}; a session store needs "
                                   "window=sk.session('30 minutes')"))
        return points
    gap = to_millis(spec.window.size)
    points.append(Point(gap == GAP_MS, "the inactivity gap is 30 minutes" if gap == GAP_MS else
                        f"the gap is {spec.window.size}; the exercise asks for 30 minutes"))
    keyed = tuple(spec.keys) == SESSION_KEYS
    points.append(Point(keyed, "sessions are kept per carrier" if keyed else
                        f"sessions are keyed by {list(spec.keys)}; the exercise keys them by "
                        "['carrier']"))
    counted = "count" in [a.name for a in spec.aggregates]
    points.append(Point(counted, "each session counts its flights" if counted else
                        "add the aggregate 'count' (flights per session)"))
    return points


@exercise("02.2", "A session store with a 30-minute gap", NOTEBOOK, "build")
def session_store(answer: object, *, events: pd.DataFrame | None = None):
    spec = getattr(answer, "spec", None)
    if spec is None or not hasattr(answer, "snapshot") or not hasattr(answer, "progress"):
        return [Point(False, f"your answer is a {type(answer).__name__}; the query that "
                             "sk.start_query(...) returned is expected")]
    if not isinstance(events, pd.DataFrame):
        raise BadArgument("events", type(events).__name__,
                          "the flights as a pandas frame (one row per event, with ts)")
    points = _spec_points(spec)
    if not all(p.ok for p in points):
        return points
    progress = answer.progress()
    watermark = progress["watermark"].iloc[-1] if len(progress) else None
    expected = session_reference(events, spec.keys, spec.window.size, spec.event_time,
                                 watermark=watermark)
    store = answer.snapshot()
    compared = compare_rows(store, expected, ["window_start", *spec.keys],
                            ["window_end", "count"], "the pandas reference's open sessions")
    if not all(p.ok for p in compared):
        compared.append(Point(False, "did the query drain (answer.wait_until_drained()) "
                                     "before the check?"))
    else:
        compared.append(Point(True, f"sessions that ended before the watermark ({watermark}) "
                                    "were closed and evicted; the store holds the open ones"))
    return points + compared


LATE = Choices(
    {"a": "reopens the evicted window and updates it, so the result is exact",
     "b": "drops the event before it reaches the state, and counts it as dropped by the "
          "watermark",
     "c": "keeps the event aside with the malformed ones, to be replayed later"},
    right="b",
    why={"a": "an evicted window is gone from the state (its final result may already be "
              "out); the watermark is the promise that it will not change again",
         "b": "right: rows older than the watermark are dropped by the stateful operator "
              "and counted (numRowsDroppedByWatermark; statekit's late_events())",
         "c": "malformed events are statekit's: unparseable input kept aside; a late event "
              "is well-formed, and Spark drops it (counting it)"})


review("02.3", "An event behind the watermark", NOTEBOOK, LATE)


PLACEMENT = Choices(
    {"a": "the partition of the input topic that carried JFK's flights",
     "b": "pmod(hash(window, origin), shuffle partitions): each of JFK's windows may sit on "
          "a different partition",
     "c": "the same partition for every window of JFK, chosen by hashing 'JFK'"},
    right="b",
    why={"a": "that is Kafka Streams (a task per input partition); Spark shuffles the input "
              "by the grouping expressions, so the state's partitions are not the topic's",
         "b": "right: Spark groups a windowed aggregation by (window, keys) and hashes all "
              "of them with Murmur3; a session store is grouped by the keys only",
         "c": "that would hold for a session or running aggregate (grouped by the keys); a "
              "time window is part of the grouping, so it changes the hash"})


review("02.4", "Where does JFK's 10:00 window live?", NOTEBOOK, PLACEMENT)
