"""Stop a streaming query between two micro-batches, not in the middle of one.

``StreamingQuery.stop()`` interrupts a batch that is running: Spark aborts its write
("Data source write support MicroBatchWrite[...] is aborting") and logs errors and a
Java stack trace, although nothing is lost (the batch was not committed and runs
again on restart). ``stop_between_batches`` waits until no trigger is active — the
query is between batches, waiting for its next trigger or for data — and stops it
then; after ``timeout`` seconds it stops the query anyway.

It can only be as clean as the query leaves room: a query that has drained its
input rests between triggers, and so does one whose batches take less than its
trigger interval. One whose next batch starts the moment the last one ends (no
trigger interval, or batches longer than it) has no such moment, or one too short
to see: it is stopped once a batch has ended since the call, as its next one begins
(a stop never waits for more than the batch running when it was asked). Give a query
a trigger interval longer than its batches to stop it cleanly.

Example:
    >>> stop_between_batches(query.query)                       # doctest: +SKIP
    True
"""

from __future__ import annotations

import time

#: Seconds between two looks at the query's status (an idle moment lasts until the next
#: trigger).
POLL_S = 0.005
#: Looks between two reads of the last progress (a JSON document: read less often).
PROGRESS_EVERY = 10


def stop_between_batches(query, timeout: float = 30.0) -> bool:
    """Stop ``query`` (a PySpark ``StreamingQuery``) once no batch is running; True when it
    stopped between batches (or had stopped already), False when ``timeout`` ran out and it
    was stopped mid-batch."""
    deadline = time.monotonic() + timeout
    between, seen_active, looks = True, False, 0
    first = _last_batch(query)
    while query.isActive:
        status = query.status
        active = bool(status.get("isTriggerActive", False))
        # Best moment: a batch has just ended (the whole wait for the next trigger is ahead).
        # A query waiting for data may be stopped at once: its triggers find nothing to run.
        if not active and (seen_active or status.get("message") == "Waiting for data to arrive"):
            break
        seen_active = seen_active or active
        looks += 1
        # batches back to back: one ended since the call and the next has begun
        if active and looks % PROGRESS_EVERY == 0 and _last_batch(query) != first:
            between = False
            break
        if time.monotonic() > deadline:
            between = not active
            break
        time.sleep(POLL_S)
    if query.isActive:
        query.stop()
    return between


def _last_batch(query) -> int | None:
    """The id of the last batch ``query`` finished (None before the first, or a stand-in
    query without progress)."""
    progress = getattr(query, "lastProgress", None)
    return None if not progress else progress.get("batchId")
