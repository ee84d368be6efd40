"""Exercises of notebook 11 (write a stateful processor: stores, punctuation, TTL)."""

from __future__ import annotations

import pandas as pd

from statekit.errors import BadArgument
from statekit.workshop._frames import compare_rows
from statekit.workshop.answers import number
from statekit.workshop.choices import Choices
from statekit.workshop.registry import exercise, review
from statekit.workshop.verdict import Point

NOTEBOOK = "11_write_a_stateful_processor"
GAP = "30 minutes"

SCOPE = Choices(
    {"a": "every game of every player the processor has seen, as in Kafka Streams",
     "b": "p07's games only: the store is scoped to the grouping key being processed",
     "c": "the games of every player whose events came from p07's Kafka partition"},
    right="b",
    why={"a": "that is Kafka Streams: a store belongs to a task and all() scans every key of "
              "the task's partition. A transformWithState map state reaches only the entries "
              "under the current grouping key",
         "b": "right: Spark sets the grouping key (the player) before it calls the processor, "
              "and every state variable, so every statekit store, is scoped to it; all() scans "
              "p07's entries. No Spark state API reaches another player's entries",
         "c": "Spark does not keep state by input partition: it shuffles the events by the "
              "grouping key, and the state is per grouping key within a state partition"})

review("11.1", "What does all() see inside process(key='p07')?", NOTEBOOK, SCOPE)


def _session_plan_points(plan) -> tuple[list[Point], object]:
    sessions = [s for s in plan.stores if s.kind == "session"]
    if not sessions:
        return [Point(False, "declare a session store: session_store('sessions', value=..., "
                             "retention=...)")], None
    store = sessions[0]
    points = [Point(True, f"the session store {store.name!r} is declared")]
    if plan.grouping_keys != ("player",):
        points.append(Point(False, f"the processor is grouped by {list(plan.grouping_keys)}; "
                                   "the exercise keeps sessions per player (keys='player')"))
    if plan.time != "event":
        points.append(Point(False, f"time is {plan.time!r}: sessions follow event time "
                                   "(time = 'event', with a watermark)"))
    if "events" not in [f.name for f in store.value]:
        points.append(Point(False, f"the store's value has {[f.name for f in store.value]}; "
                                   "it needs an 'events' field (the session's event count)"))
    return points, store


@exercise("11.2", "The session exercise as a processor", NOTEBOOK, "build")
def session_processor(answer: object, *, events: pd.DataFrame | None = None):
    """``answer``: the drained ``ProcessorQuery`` running the learner's processor;
    ``events``: the game events in pandas (player, score, ts)."""
    plan = getattr(answer, "plan", None)
    if plan is None or not hasattr(answer, "snapshot"):
        return [Point(False, f"your answer is a {type(answer).__name__}; the query that "
                             "start_processor(...) returned is expected")]
    if not isinstance(events, pd.DataFrame):
        raise BadArgument("events", type(events).__name__,
                          "the game events as a pandas frame (player, score, ts)")
    points, store = _session_plan_points(plan)
    if not all(p.ok for p in points):
        return points
    from statekit.inspect.logs import batches
    from statekit.processor.examples import sessions_reference

    last = answer.last_batch
    if last < 0:
        return points + [Point(False, "the query has committed no batch: run "
                                      "answer.wait_until_drained() first")]
    watermark = batches(answer.checkpoint).set_index("batch").loc[last, "watermark"]
    retention = f"{store.retention_ms} ms"
    expected = sessions_reference(events, GAP, watermark=watermark, retention=retention)
    got = answer.snapshot(store.name, batch=last)
    compared = compare_rows(got, expected, ["player", "session_start", "session_end"],
                            ["events"], f"the pandas sessions the retention ({retention}) "
                                        f"keeps at the watermark {watermark}")
    if all(p.ok for p in compared):
        compared.append(Point(True, "each session ends at its last event (Kafka Streams' "
                                    "convention), and the store keeps those the retention "
                                    "has not passed: the active ones"))
    else:
        compared.append(Point(False, "merge every stored session that find_sessions(None, "
                                     "start - gap, end + gap) returns, remove them, put the "
                                     "merged one; did the query drain before the check?"))
    return points + compared


RETENTION = Choices(
    {"a": "10:20: a window store refuses a put whose window_start + retention is behind the "
          "clock",
     "b": "none: Spark keeps every window until the query stops",
     "c": "10:40 and 10:20: both windows have started before the watermark"},
    right="a",
    why={"a": "right: 10:20 + 30 minutes = 10:50, before 11:00; statekit raises a "
              "ProcessorError that names the window start and the "
              "earliest one accepted (10:30). Kafka Streams drops such a record from its "
              "window store silently (a log line and a dropped-records metric)",
         "b": "statekit's window store removes a window with a timer once window_start + "
              "retention is behind the clock (the watermark), and refuses to write one that is",
         "c": "10:40 + 30 minutes = 11:10 is still ahead of the clock; only the window start "
              "plus the retention counts, not the start alone"})

review("11.3", "Which put is refused?", NOTEBOOK, RETENTION)


PUNCTUATION = Choices(
    {"a": "once every 10 minutes of event time for the whole processor, like a Kafka Streams "
          "punctuator, and it sees every player's entries",
     "b": "once per player holding state, when the watermark passes the next multiple of 10 "
          "minutes, and it sees that player's entries only",
     "c": "every 10 minutes of wall-clock time, for every player ever seen"},
    right="b",
    why={"a": "that is Kafka Streams: one punctuator per task per interval, scanning the "
              "task's store. Spark has no per-task callback in transformWithState: timers "
              "belong to a grouping key",
         "b": "right: statekit keeps one timer per player at the next multiple of the "
              "interval, as long as the player holds state in some store; the timer fires once "
              "the watermark passes it (once, however many intervals passed)",
         "c": "the processor runs on event time (time = 'event'): its timers follow the "
              "watermark, not the wall clock; and a player with no state left gets no timer"})

review("11.4", "How often does forget_stale_games run?", NOTEBOOK, PUNCTUATION)


TTL = Choices(
    {"a": "add ttl=\"1 hour\" to the best store of the event-time processor",
     "b": "give it a store of its own in a processor on processing time (time = "
          "\"processing\"): Spark allows state TTLs only in ProcessingTime mode, one time mode "
          "per operator",
     "c": "TTLs are not possible in Spark; use a punctuation"},
    right="b",
    why={"a": "statekit refuses it before the query starts: Spark gives a transformWithState "
              "operator one time mode, and a TTL needs ProcessingTime",
         "b": "right: the TTL counts processing time from the entry's last write (renewed on "
              "every write); an event-time processor forgets by punctuation or retention "
              "instead",
         "c": "Spark has TTLs on state variables (processing time); Kafka Streams is the one "
              "whose key-value stores have none (a punctuator deletes old entries)"})

review("11.5", "Forget ids an hour after they were seen", NOTEBOOK, TTL)


@exercise("11.6", "Predict: a batch's lookups in a remote service", NOTEBOOK, "predict")
def remote_lookup_seconds(answer: object, *, remote_us: float, local_us: float,
                          records: int):
    """``remote_us`` and ``local_us``: the measured microseconds per lookup in the service and
    in local RocksDB; ``records``: the batch's records, one lookup each. The answer: seconds."""
    value = number(answer)
    if value is None:
        return [Point(False, f"{answer!r} is not a number of seconds")]
    right = remote_us * records / 1e6
    if abs(value - right) <= 0.15 * right:
        return [Point(True, f"about {right:,.2f} s: {records:,} round trips of "
                            f"{remote_us:,.0f} µs, against {local_us * records / 1e6:,.4f} s "
                            f"from local RocksDB; on a real network each round trip is "
                            f"longer still")]
    local = local_us * records / 1e6
    if abs(value - local) <= 0.15 * local:
        return [Point(False, f"{value:g} s is what local RocksDB takes; the question is the "
                             f"service's cost ({remote_us:,.0f} µs a lookup)")]
    for scale, unit in ((1e3, "milliseconds"), (1e6, "microseconds")):
        if abs(value - right * scale) <= 0.15 * right * scale:
            return [Point(False, f"{value:g} looks like {unit}; the answer is in seconds")]
    return [Point(False, f"{value:g} s is off: one lookup per record, {records:,} records, "
                         f"{remote_us:,.0f} µs each")]


CUSTOM_STORE = Choices(
    {"a": "set spark.sql.streaming.stateStore.providerClass to a Python class with get and "
          "put, for this operator's state",
     "b": "Spark: a JVM class implementing StateStoreProvider, set for the whole query (every "
          "stateful operator uses it); in statekit's processor: a class of your own over a "
          "key-value, window or session store, as TopK is",
     "c": "pass kind='top_k' to key_value_store: statekit registers new store kinds",
     "d": "it is not possible in Spark at all"},
    right="b",
    why={"a": "the provider class is loaded by the JVM (executors included), one per query, "
              "not per operator; a Python class cannot be one",
         "b": "right: Kafka Streams takes a StateStore/StoreBuilder per store; Spark takes one "
              "provider per query (HDFS-backed, RocksDB, or your JVM class); statekit's "
              "processor has three kinds over map state, and a shape of your own is built on "
              "one of them, checkpointed and readable like any store",
         "c": "key_value_store has no kind argument; plan_of refuses a store that is not "
              "key_value_store, window_store or session_store",
         "d": "the provider class is pluggable; it is JVM code, and it serves every operator "
              "of the query"})

review("11.7", "Review: a store of your own in Spark", NOTEBOOK, CUSTOM_STORE)
