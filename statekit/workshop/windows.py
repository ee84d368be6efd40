"""Exercises of notebook 02 (window and session stores, the watermark and eviction)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import pandas as pd

from statekit.durations import to_millis
from statekit.errors import BadArgument
from statekit.model.session_key import Session
from statekit.reference.sessions import session_reference
from statekit.workshop._frames import compare_rows
from statekit.workshop.answers import count, instant, instants
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
    names = [a.name for a in spec.aggregates]
    counted = "count" in names
    points.append(Point(counted, "each session counts its flights" if counted else
                        "add the aggregate 'count' (flights per session)"))
    last = f"max_{spec.event_time}" in names
    points.append(Point(last, f"each session keeps its last activity (max({spec.event_time}))"
                        if last else f"keep each session's last activity too: the aggregate "
                        f"'max({spec.event_time})' (the latest event time in the session)"))
    return points


def with_last_activity(sessions: pd.DataFrame, gap: str, event_time: str = "ts"
                       ) -> pd.DataFrame:
    """``sessions`` (``session_reference``) with ``max_<event_time>``: the session's last
    event, which is its end minus the gap (Spark closes a session ``gap`` after it)."""
    span = pd.Timedelta(milliseconds=to_millis(gap, "session gap"))
    return sessions.assign(**{f"max_{event_time}": sessions["window_end"] - span})


@exercise("02.2", "A session store with a 30-minute gap and the last activity", NOTEBOOK,
          "build")
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
    expected = with_last_activity(
        session_reference(events, spec.keys, spec.window.size, spec.event_time,
                          watermark=watermark), spec.window.size, spec.event_time)
    store = answer.snapshot()
    compared = compare_rows(store, expected, ["window_start", *spec.keys],
                            ["window_end", "count", f"max_{spec.event_time}"],
                            "the pandas reference's open sessions")
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
         "b": "right: the stateful operator drops rows behind the watermark; Spark counts "
              "the rows it dropped (numRowsDroppedByWatermark: groups after partial "
              "aggregation), statekit's late_events() counts the events",
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


def _session_rows(found: object, keys: Sequence[str]) -> set[tuple] | None:
    """(keys…, window_start) of each session in an answer: a frame with those columns, or an
    iterable of rows (dicts, or ``(Session, value)`` pairs from ``find_sessions``)."""
    if isinstance(found, pd.DataFrame):
        if not {*keys, "window_start"} <= set(found.columns):
            return None
        starts = instants(found["window_start"])  # a zone, epoch numbers: read as UTC
        return {(*(str(found[k].iloc[i]) for k in keys), starts.iloc[i])
                for i in range(len(found))}
    if isinstance(found, str | bytes) or not isinstance(found, Iterable):
        return None
    out = set()
    for item in found:
        if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], Session):
            key, start = item[0].key, pd.Timestamp(item[0].start, unit="ms")
        elif isinstance(item, Mapping) and "window_start" in item:
            key, start = item, instant(item["window_start"])
        else:
            return None
        out.add((*(str(key[k]) for k in keys), start))
    return out


@exercise("02.5", "Build: a query API for active sessions", NOTEBOOK, "build")
def active_sessions(answer: object, *, events: pd.DataFrame, keys: Sequence[str], gap: str,
                    times: Sequence[object], event_time: str = "ts") -> list[Point]:
    """``answer``: a function of a time returning the sessions active then — a frame with the
    key columns and ``window_start``, or ``find_sessions``' ``(Session, value)`` pairs.
    Tried at each of ``times`` (all after the last watermark: the store still holds every
    session open then); compared with the sessions pandas finds that cover that time."""
    if not callable(answer):
        return [Point(False, "answer with a function: def active_at(when): ... return the "
                             "sessions — then answer = active_at")]
    keys = list(keys)
    sessions = session_reference(events, keys, gap, event_time)
    points = []
    for when in times:
        when = pd.Timestamp(when)
        try:
            found = answer(when)
        except Exception as exc:  # the learner's code: say what it raised, and when
            return [Point(False, f"active_at({when}) raised {type(exc).__name__}: {exc}")]
        got = _session_rows(found, keys)
        if got is None:
            return [Point(False, f"active_at({when}) returned a {type(found).__name__}; return "
                                 f"a DataFrame with {keys + ['window_start']} or the pairs "
                                 f"find_sessions gives")]
        live = sessions[(sessions["window_start"] <= when) & (sessions["window_end"] > when)]
        want = {(*(str(v) for v in row[:-1]), pd.Timestamp(row[-1]))
                for row in live[[*keys, "window_start"]].itertuples(index=False)}
        missing, extra = want - got, got - want
        if not missing and not extra:
            points.append(Point(True, f"at {when}: the {len(want)} session(s) active then "
                                      f"({', '.join(sorted(str(w[0]) for w in want)) or 'none'})"))
            continue
        if missing:
            points.append(Point(False, f"at {when}: {len(missing)} active session(s) missing, "
                                       f"e.g. {sorted(missing)[0]}: a session is active from "
                                       f"its first event until {gap} after its last"))
        if extra:
            points.append(Point(False, f"at {when}: {len(extra)} session(s) not active then, "
                                       f"e.g. {sorted(extra)[0]}: ask find_sessions(key, t, t) "
                                       f"— sessions that end at or after t and start at or "
                                       f"before it"))
    return points
