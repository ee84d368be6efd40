"""Exercises of notebook 07 (a global store against a partitioned store with scatter-gather).

07.1 predicts how many more rows each instance holds when the whole aggregate is a
global store; 07.2 picks global store, routed lookup or scatter-gather for four
questions; 07.3 asks where a global store restores from.

``held_per_instance`` is the table behind the notebook's chart: rows each instance
holds as active owner, as standby and as a global copy.

Example:
    >>> [p.ok for p in more_rows_held(1.5, measured=1.5, instances=3, standbys=1)]
    [True]
    >>> more_rows_held(3, measured=1.5, instances=3, standbys=1)[0].text[:40]
    'each instance of a partitioned store als'
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from statekit.errors import BadArgument
from statekit.workshop.answers import number
from statekit.workshop.choices import Choices
from statekit.workshop.registry import exercise, review
from statekit.workshop.verdict import Point

NOTEBOOK = "07_global_store"
ROLES = ("active", "standby", "global copy")


def held_per_instance(assignment: pd.DataFrame, entries: Mapping[int, int],
                      global_entries: Mapping[str, int]) -> pd.DataFrame:
    """Rows held per instance, by role: one row per (instance, role, store).

    ``assignment``: ``Assignment.to_frame()`` (partition, instance, role);
    ``entries``: rows per partition of the partitioned store; ``global_entries``: rows
    each instance's global copy holds.

    Example:
        >>> plan = pd.DataFrame({"partition": [0, 0, 1, 1], "instance": ["i0", "i1", "i1", "i0"],
        ...                      "role": ["active", "standby", "active", "standby"]})
        >>> held_per_instance(plan, {0: 10, 1: 20}, {"i0": 30, "i1": 30})
          instance         role        store  rows
        0       i0       active  partitioned    10
        1       i0      standby  partitioned    20
        2       i0  global copy       global    30
        3       i1       active  partitioned    20
        4       i1      standby  partitioned    10
        5       i1  global copy       global    30
    """
    for column in ("partition", "instance", "role"):
        if column not in assignment.columns:
            raise BadArgument("assignment frame", list(assignment.columns),
                              "Assignment.to_frame(): partition, instance, role")
    unknown = sorted(set(assignment["partition"]) - set(entries))
    if unknown:
        raise BadArgument("entries", dict(entries), f"rows for every partition (none for "
                                                   f"{unknown})")
    frame = assignment.assign(rows=assignment["partition"].map(entries).astype("int64"))
    parts = frame.groupby(["instance", "role"], as_index=False)["rows"].sum()
    parts["store"] = "partitioned"
    copies = pd.DataFrame({"instance": list(global_entries), "role": "global copy",
                           "store": "global",
                           "rows": [int(v) for v in global_entries.values()]})
    out = pd.concat([parts, copies], ignore_index=True)
    out["order"] = out["role"].map({r: i for i, r in enumerate(ROLES)})
    out = out.sort_values(["instance", "order"], ignore_index=True)
    return out[["instance", "role", "store", "rows"]]


@exercise("07.1", "Predict, then run: how many more rows does a global copy hold?", NOTEBOOK,
          "predict")
def more_rows_held(answer: object, *, measured: float, instances: int, standbys: int
                   ) -> list[Point]:
    """``answer``: rows one instance holds as a global copy ÷ rows it holds of the
    partitioned store (active + standby), on average. ``measured``: that ratio as run."""
    guess = number(answer)
    if guess is None or guess <= 0:
        return [Point(False, f"answer with one number > 0 (a ratio, e.g. 2.0); got {answer!r}")]
    theory = instances / (1 + standbys)
    close = abs(guess - measured) <= 0.15 * measured
    if close:
        return [Point(True, f"{guess:g} against {measured:.2f} measured: a partitioned "
                            f"instance holds (1 + standbys) / instances = {1 + standbys}/"
                            f"{instances} of the rows, a global copy all of them — "
                            f"{theory:.2f}×, give or take how evenly Spark's hash spreads "
                            f"the rows")]
    if abs(guess - instances) <= 0.15 * instances and standbys:
        return [Point(False, f"each instance of a partitioned store also holds standby copies: "
                             f"(1 + {standbys}) / {instances} of the rows, so a global copy is "
                             f"about {theory:.2f}× (measured {measured:.2f}×), not "
                             f"{instances}×")]
    return [Point(False, f"{guess:g} is off: measured {measured:.2f}×. A partitioned "
                         f"instance holds its active partitions and its standby copies, "
                         f"(1 + standbys) / instances of the rows; a global copy holds them "
                         f"all")]


_WHICH = ("routed", "scatter-gather", "global")
QUESTIONS = {
    "a": ("one player's score in the current window, asked on every game end by 100,000 "
          "players", "routed",
          "a point lookup by key: go to the partition's owner (one hop); a global copy of the "
          "whole aggregate on every instance would multiply memory and restore time by the "
          "number of instances"),
    "b": ("the airline's name beside every answer (16 rows that rarely change)", "global",
          "a small reference table read everywhere: hold it whole on every instance and "
          "look it up locally (statekit's enrich= does this)"),
    "c": ("the top 10 players of the current window, a few times a second", "scatter-gather",
          "a question over all keys of a large, fast-changing aggregate: each partition "
          "answers its top 10, the client merges them"),
    "d": ("total score per team once an hour, over 50 GB of state", "scatter-gather",
          "rare and over all keys: scatter-gather costs a round trip per instance; a global "
          "copy would put 50 GB on every instance for one query an hour"),
}


@exercise("07.2", "Global store, routed lookup or scatter-gather?", NOTEBOOK, "review")
def which_way(answer: object) -> list[Point]:
    """``answer``: a dict question letter → "routed", "scatter-gather" or "global"."""
    if not isinstance(answer, Mapping):
        return [Point(False, f"answer with a dict, e.g. {{'a': 'routed', 'b': ...}}, one of "
                             f"{', '.join(_WHICH)} per question")]
    points = []
    for letter, (question, right, why) in QUESTIONS.items():
        said = answer.get(letter)
        said = said.strip().lower() if isinstance(said, str) else said
        if said is None:
            points.append(Point(False, f"{letter}) not answered: {question}"))
        elif said not in _WHICH:
            points.append(Point(False, f"{letter}) {said!r} is not one of {', '.join(_WHICH)}"))
        else:
            points.append(Point(said == right, f"{letter}) {said}: " + (
                why if said == right else f"better {right} — {why}")))
    unknown = sorted(set(map(str, answer)) - set(QUESTIONS))
    if unknown:
        points.append(Point(False, f"no question {', '.join(unknown)}: the questions are "
                                   f"{', '.join(QUESTIONS)}"))
    return points


RESTORES_FROM = Choices(
    {"a": "from a changelog topic that statekit writes for it",
     "b": "from the topic it holds: a global store has no changelog, its source topic is "
          "its changelog",
     "c": "from Spark's checkpoint, like the partitioned store",
     "d": "from another instance's copy, over REST"},
    right="b",
    why={"a": "a global store writes nothing: it only reads its topic (so what it holds must "
              "already be in a topic — here statekit's changelog of the aggregate, the seeds' "
              "'transformed topic')",
         "b": "right: every instance reads every partition of the topic from its checkpointed "
              "offsets (all of it the first time), so the topic must be compacted and keep "
              "what the store needs",
         "c": "Spark's checkpoint holds the aggregation's state for Spark; the serving layer "
              "never reads it, and a global store of a reference topic has no Spark state",
         "d": "instances never copy stores between them; each restores from Kafka"})


review("07.3", "Where does a global store restore from?", NOTEBOOK, RESTORES_FROM)
