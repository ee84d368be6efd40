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
    '3: each instance of a partitioned store '
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from statekit.errors import BadArgument
from statekit.workshop.answers import keyed, number, one_of
from statekit.workshop.choices import Choices
from statekit.workshop.registry import exercise, review
from statekit.workshop.verdict import Point

NOTEBOOK = "07_global_store"
ROLES = ("active", "standby", "global copy")
#: 07.1's tolerance: the measured mean ratio is exact (rows held per instance, averaged, is
#: (1 + standbys) / instances of them), so an answer only needs room for rounding (5/3 as 1.7).
TOLERANCE = 0.03


def near(value: float, target: float) -> bool:
    """``value`` within ``TOLERANCE`` of ``target`` (relative)."""
    return abs(value - target) <= TOLERANCE * abs(target)


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
    within = f"(accepted within {TOLERANCE:.0%} of the measured {measured:.3f}×: on average " \
             "over the instances the ratio is exact, so only rounding needs room)"
    if near(guess, measured):
        return [Point(True, f"{guess:g}: a partitioned instance holds (1 + standbys) / "
                            f"instances = {1 + standbys}/{instances} of the rows on average, a "
                            f"global copy all of them: {theory:.3f}× {within}")]
    known = [(instances, f"each instance of a partitioned store also holds standby copies: "
                         f"(1 + {standbys}) / {instances} of the rows, not 1/{instances}"),
             (instances / standbys if standbys else None,
              f"the active copy counts too: each partition is on 1 + {standbys} instances"),
             (1 + standbys, "that is how many instances hold each partition; the ratio also "
                            f"depends on how many instances share them ({instances})"),
             (1.0, "a global copy holds every row; a partitioned instance only its share")]
    for figure, why in known:  # the first that fits names the likely reasoning
        if figure is not None and near(guess, figure) and not near(figure, measured):
            return [Point(False, f"{guess:g}: {why}. Measured: {measured:.3f}× {within}")]
    return [Point(False, f"{guess:g} is off: measured {measured:.3f}× {within}. A partitioned "
                         f"instance holds its active partitions and its standby copies, "
                         f"(1 + standbys) / instances of the rows; a global copy holds them "
                         f"all")]


_WHICH = ("routed", "scatter-gather", "global")
# each read with answers.words; the exercise title's own words count too
_SPELLINGS = {"routed": "routed", "routed lookup": "routed", "scatter-gather": "scatter-gather",
              "global": "global", "global store": "global"}
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
    answers, unknown = keyed(answer, QUESTIONS)  # 'A' or 'a'
    points = []
    for letter, (question, right, why) in QUESTIONS.items():
        given = answers.get(letter)
        said = one_of(given, _SPELLINGS)
        if given is None:
            points.append(Point(False, f"{letter}) not answered: {question}"))
        elif said is None:
            points.append(Point(False, f"{letter}) {given!r} is not one of {', '.join(_WHICH)}"))
        else:
            points.append(Point(said == right, f"{letter}) {said}: " + (
                why if said == right else f"better {right} — {why}")))
    if unknown:
        points.append(Point(False, f"no question {', '.join(map(str, unknown))}: the questions are "
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
