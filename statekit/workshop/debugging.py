"""Exercises of notebook 10 (debug an existing job from its checkpoint)."""

from __future__ import annotations

from statekit.workshop.answers import count, words
from statekit.workshop.choices import Choices
from statekit.workshop.registry import exercise, review
from statekit.workshop.verdict import Point

NOTEBOOK = "10_debug_a_checkpoint"

#: What each flag of ``describe()`` says about the broken job, as a cause or as a symptom.
FLAG_ROLES = {
    "stalled_watermark": "right: the watermark has not moved while data kept coming, so no "
                         "window can close; that is the cause, the growth follows from it",
    "growing_state": "that is the symptom: state grows because nothing is evicted; ask why "
                     "nothing is evicted (which flag says what stopped moving?)",
    "skewed_partition": "skew is about where state sits, not how much of it there is; and "
                        "describe() did not raise it here",
    "slow_commit": "commit times need progress reports, which this description did not get; "
                   "and a slow commit does not make state grow",
}


@exercise("10.1", "Which flag names the cause?", NOTEBOOK, "debug")
def flag_of_the_cause(answer: object, flags: list[str] | None = None):
    """The flag (its name, as ``Description.flag_names`` lists it) that names the cause."""
    name = (words(str(answer)) or "").replace(" ", "_")
    if name not in FLAG_ROLES:
        return [Point(False, f"{answer!r} is not a flag of describe(): "
                             f"{', '.join(FLAG_ROLES)}")]
    points = [Point(name == "stalled_watermark", FLAG_ROLES[name])]
    if flags is not None and name not in flags:
        points.append(Point(False, f"describe() did not raise {name} on this checkpoint: it "
                                   f"raised {', '.join(flags) or 'nothing'}"))
    return points


THE_FIX = Choices(
    {"a": "a longer watermark delay (\"10 minutes\" instead of \"30 seconds\")",
     "b": "take the event time from event_time, the time each click happened",
     "c": "drop the watermark: Spark keeps the state without it anyway",
     "d": "more shuffle partitions, so each partition holds less state"},
    right="b",
    why={"a": "a longer delay only keeps windows open longer; with session_start the "
              "watermark still never moves, so nothing is ever evicted",
         "b": "right: session_start is the same for every event of a session, so the "
              "maximum event time, and the watermark after it, stop moving; event_time "
              "moves with the stream and lets windows close",
         "c": "without a watermark Spark never evicts a window of a windowed aggregation: "
              "in update mode the state grows just the same, and append mode is refused "
              "when the query starts",
         "d": "more partitions split the same unbounded state into more pieces; the total "
              "still grows batch after batch"})


review("10.2", "Fix the job", NOTEBOOK, THE_FIX, kind="debug")


@exercise("10.3", "Predict, then run: state rows after the fix", NOTEBOOK, "predict")
def rows_after_the_fix(given: object, rows: int, users: int, batches: int):
    """State rows after the fixed job's last batch (``rows`` as measured)."""
    answer = count(given)
    if answer is None:
        return [Point(False, f"{given!r} is not a whole number of rows")]
    if answer == rows:
        return [Point(True, f"right: {rows} rows, the users of the windows the watermark has "
                            f"not passed: after the last file Spark ran one more batch, with no "
                            f"data, to move the watermark on and evict the windows behind it")]
    if answer == users * batches:
        return [Point(False, f"{answer} is what the broken job holds: every user of every "
                             f"batch. After the fix, windows behind the watermark are evicted")]
    if answer == 2 * users and rows == users:
        return [Point(False, f"{answer} is the state after the last file's batch, which ran "
                             f"with the watermark of the batch before; Spark then ran a batch "
                             f"with no data (see fixed.watermarks) that evicted one more "
                             f"window: {rows} rows remain")]
    side = "more" if answer > rows else "fewer"
    return [Point(False, f"{answer} is {side} than the {rows} rows measured: only the windows "
                         f"the watermark has not passed stay in state")]
