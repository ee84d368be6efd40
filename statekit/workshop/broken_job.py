"""Exercises of notebook 13 (debugging a broken job), and the job's troubles: early flights
sent again late, and broken records.

Example:
    >>> from statekit import workshop
    >>> print(workshop.check("13.2", 4, late=4, malformed=2, records=1040))
    13.2 Why is JFK's count lower than its flights?: right
      ✓ right: 4 of JFK's records came after the watermark had passed their window, so Spark \
dropped them; explain() names each with the window's end and the watermark
"""

from __future__ import annotations

import json

import pandas as pd

from statekit.workshop.answers import whole
from statekit.workshop.choices import Choices
from statekit.workshop.registry import exercise, review
from statekit.workshop.verdict import Point

NOTEBOOK = "13_debugging_a_broken_job"


def send_late_and_broken(kafka, topic: str, data, late: int = 10) -> pd.DataFrame:
    """After ``data`` (a flights ``Dataset`` already replayed into ``topic``): its first
    ``late`` flights sent again (behind the watermark by now), then three broken records of
    the last flight's origin (a distance that is text, no time, not JSON). Returns what was
    sent: ``kind``, ``origin``, ``value``."""
    from confluent_kafka import Producer

    from statekit.model.connection import connect

    rows = [json.loads(v) for v in data.records["value"]]
    last = rows[-1]
    sent = [("late", r["origin"], json.dumps(r)) for r in rows[:late]]
    sent += [("broken", last["origin"], json.dumps(dict(last, distance="far"))),
             ("broken", last["origin"], json.dumps({k: v for k, v in last.items()
                                                    if k != "ts"})),
             ("broken", last["origin"], "not json")]
    producer = Producer(connect(kafka).client_config())
    for _, origin, value in sent:
        producer.produce(topic, key=origin.encode(), value=value.encode())
    producer.flush(30)
    return pd.DataFrame(sent, columns=["kind", "origin", "value"])


def retention_strikes(kafka, topic: str) -> None:
    """Delete, as time retention would, the older three quarters of the records of the
    busiest partition of changelog ``topic`` (Kafka's DeleteRecords: its log start moves
    on)."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    from statekit.kafka.offsets import offset_bounds
    from statekit.kafka.topics import partition_count
    from statekit.model.connection import connect

    conn = connect(kafka)
    bounds = offset_bounds(conn, topic, list(range(partition_count(conn, topic))),
                           committed=False)
    busiest = max(bounds, key=lambda p: bounds[p][1] - bounds[p][0])
    low, high = bounds[busiest]
    admin = AdminClient(conn.client_config())
    for future in admin.delete_records([TopicPartition(topic, busiest,
                                                       low + 3 * (high - low) // 4)]).values():
        future.result(30)


RESTART = Choices(
    {"a": "windows of 2 hours instead of 1",
     "b": "group by dest instead of origin",
     "c": "group by flight (a number) instead of origin",
     "d": "a watermark of 2 days instead of 1"},
    right="c",
    why={"a": "Spark accepts it: the state's key is still (window, a string), so the old "
              "one-hour windows are read as if they were two hours long; check_restart calls "
              "it 'meaning changes'",
         "b": "Spark accepts it: dest is a string like origin, and Spark compares types, not "
              "names, so the stored origins are read as destinations ('meaning changes')",
         "c": "right: the state's key holds a string where the new query puts a number, and "
              "Spark fails the restart with STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE; "
              "check_restart says so before anything runs",
         "d": "Spark accepts it: the watermark is not part of the state's schema; the next "
              "batches just evict later"})

review("13.1", "Which change does Spark refuse at restart?", NOTEBOOK, RESTART, kind="predict")


@exercise("13.2", "Why is JFK's count lower than its flights?", NOTEBOOK, "debug")
def late_records(given: object, late: int, malformed: int, records: int):
    """How many of the key's records did not count because they were late (``late``,
    ``malformed`` and ``records`` as ``explain()`` measured them)."""
    answer = whole(given)
    if answer is None:
        return [Point(False, f"{given!r} is not a whole number of records")]
    if answer == late:
        return [Point(True, f"right: {late} of JFK's records came after the watermark had "
                            f"passed their window, so Spark dropped them; explain() names "
                            f"each with the window's end and the watermark")]
    if answer == late + malformed:
        return [Point(False, f"{answer} is every record that did not count; {malformed} of "
                             f"them were malformed, not late (why_not says which)")]
    if answer == malformed:
        return [Point(False, f"{answer} records were malformed; the question asks for the late "
                             f"ones (why_not starts with 'late:')")]
    return [Point(False, f"{answer} is not what explain() found: of {records} records of JFK, "
                         f"count those whose why_not starts with 'late:'")]


@exercise("13.3", "Which partition's restore fails?", NOTEBOOK, "debug")
def failing_partition(given: object, failing: int, partitions: int):
    """The changelog partition whose restore ``restore_preflight`` says fails."""
    answer = whole(given)
    if answer is None:
        return [Point(False, f"{given!r} is not a partition number")]
    if answer == failing:
        return [Point(True, f"right: partition {failing}'s store was restored up to an offset "
                            f"the topic no longer holds, so restore_stores would refuse it; "
                            f"delete that store and restore it from the start")]
    if not 0 <= answer < partitions:
        return [Point(False, f"the changelog has partitions 0..{partitions - 1}")]
    return [Point(False, f"partition {answer}'s store restores fine; check.of('fails') names "
                         f"the one that does not")]


@exercise("13.4", "Predict, then run: windows that change", NOTEBOOK, "predict")
def windows_changed(given: object, changed: int, added: int, removed: int):
    """How many windows (origin and hour) hold another value when the cancelled flights are
    left out (``changed``, ``added``, ``removed`` as the diff counted them)."""
    answer = whole(given)
    if answer is None:
        return [Point(False, f"{given!r} is not a whole number of windows")]
    if answer == changed:
        return [Point(True, f"right: {changed} windows had a cancelled flight (a null "
                            f"dep_delay) among others; their count drops, their delay sums "
                            f"do not (a sum skips nulls)")]
    if answer == changed + removed:
        return [Point(False, f"{removed} of those windows had nothing but cancelled flights: "
                             f"they are removed, not changed")]
    if answer == changed + added + removed:
        return [Point(False, f"{answer} is every window that differs; count the changed ones "
                             f"only (d.counts)")]
    side = "more" if answer > changed else "fewer"
    return [Point(False, f"{answer} is {side} than the diff found: count the (origin, hour) "
                         f"windows still in state that had at least one cancelled flight")]
