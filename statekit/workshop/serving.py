"""Exercises of notebook 06 (interactive queries and routing).

06.1 builds the routing: a function ``owner(key) -> (partition, instance)`` checked
against Spark's own placement on every state row of a snapshot. 06.2 is the seeds'
"debug this": a count that looks incomplete because one instance answered from
its own partitions only. 06.3 asks why one player's windows are spread out.

Example:
    >>> import pandas as pd
    >>> start = pd.Timestamp("2026-01-05 10:00")
    >>> rows = pd.DataFrame({"window_start": [start], "window_end": [start + pd.Timedelta("10min")],
    ...                      "player": ["p07"], "partition": [2]})
    >>> owners = {0: "i0", 1: "i1", 2: "i2"}
    >>> [p.ok for p in route_a_key(lambda key: (2, "i2"), rows=rows, active=owners)]
    [True, True]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

import pandas as pd

from statekit.serve.placement import state_partition
from statekit.workshop.choices import Choices
from statekit.workshop.registry import exercise, review
from statekit.workshop.verdict import Point

NOTEBOOK = "06_interactive_queries"
MAX_ROWS = 2000  # rows 06.1 tries the learner's function on (the check stays well under 1 s)
_SHOWN = 5  # players named in a message


def _key(row: Mapping, keys: Sequence[str]) -> dict:
    return {"window_start": row["window_start"], "window_end": row["window_end"],
            **{k: row[k] for k in keys}}


def _names(values: Iterable[object]) -> str:
    values = sorted(map(str, values))
    more = f" and {len(values) - _SHOWN} more" if len(values) > _SHOWN else ""
    return ", ".join(values[:_SHOWN]) + more


def _pairs(answer: Callable, keys: list[dict]) -> tuple[list[tuple[int, str]], Point | None]:
    """The learner's (partition, instance) for each key, or the Point saying what went wrong."""
    out = []
    for key in keys:
        try:
            got = answer(dict(key))
        except Exception as exc:  # the learner's code: say what it raised, on which key
            return [], Point(False, f"owner({key}) raised {type(exc).__name__}: {exc}")
        if not isinstance(got, tuple | list) or len(got) != 2:
            return [], Point(False, f"owner({key}) returned {got!r}; return a pair "
                                    f"(partition, instance), e.g. (2, 'i1')")
        partition, instance = got
        try:
            partition = int(partition)
        except (TypeError, ValueError):
            return [], Point(False, f"owner({key}) returned partition {got[0]!r}; "
                                    f"a partition is a whole number")
        out.append((partition, str(instance)))
    return out, None


@exercise("06.1", "Route a key to the instance that owns it", NOTEBOOK, "build")
def route_a_key(answer: object, *, rows: pd.DataFrame, active: Mapping[int, str],
                keys: Sequence[str] = ("player",),
                standbys: Mapping[int, Sequence[str]] | None = None) -> list[Point]:
    """``answer``: a function of a key (``window_start``, ``window_end`` and the group keys)
    returning ``(partition, instance)``. ``rows``: state rows with the ``partition`` Spark
    keeps each in (``query.snapshot()``); ``active``: partition → active instance."""
    if not callable(answer):
        return [Point(False, "answer with a function: def owner(key): ... return partition, "
                             "instance — then answer = owner")]
    keys = list(keys)
    sample = rows.head(MAX_ROWS)
    if sample.empty:
        return [Point(False, "no state rows to check against: run the snapshot cell first")]
    records = sample.to_dict("records")
    wanted = [_key(r, keys) for r in records]
    got, failed = _pairs(answer, wanted)
    if failed is not None:
        return [failed]
    spark = [int(r["partition"]) for r in records]
    n = len(spark)
    same = sum(g[0] == s for g, s in zip(got, spark, strict=True))
    points = []
    if same == n:
        points.append(Point(True, f"the partition agrees with Spark's placement for all {n} "
                                  f"state rows: Murmur3 of (window start, window end, "
                                  f"{', '.join(keys)}), modulo {len(active)}"))
    else:
        partitions = max(len(active), max(spark) + 1)
        alone = [state_partition(k, keys, windowed=False, partitions=partitions) for k in wanted]
        if all(g[0] == a for g, a in zip(got, alone, strict=True)):
            points.append(Point(False, f"your partitions are those of the {', '.join(keys)} "
                                       f"alone (right for {same} of {n} rows, by chance): that "
                                       f"is how Kafka Streams places a key, and how Spark "
                                       f"places session windows; for a time window Spark "
                                       f"hashes the window struct (start, end) first, then "
                                       f"the group keys"))
        else:
            i = next(i for i, (g, s) in enumerate(zip(got, spark, strict=True)) if g[0] != s)
            points.append(Point(False, f"the partition agrees with Spark for {same} of {n} "
                                       f"rows; e.g. {wanted[i]}: yours {got[i][0]}, Spark keeps "
                                       f"it in {spark[i]} (hash window_start, window_end, then "
                                       f"the keys, as Spark types them: timestamp, timestamp, "
                                       f"string; then pmod by the partitions)"))
    owner_right = [g[1] == active.get(s) for g, s in zip(got, spark, strict=True)]
    if all(owner_right):
        points.append(Point(True, "each key goes to the active instance of its partition"))
    else:
        i = owner_right.index(False)
        said, owner = got[i][1], active.get(spark[i])
        held = (standbys or {}).get(spark[i], ())
        why = (f"{said!r} is a standby of partition {spark[i]}: route to the active owner "
               f"{owner!r}; a standby answers only when the owner is gone") if said in held \
            else f"partition {spark[i]}'s active owner is {owner!r}, not {said!r}"
        points.append(Point(False, f"instance wrong for {owner_right.count(False)} of {n} "
                                   f"rows; e.g. {wanted[i]}: {why}"))
    return points


def _players(value: object, key: str) -> set[str] | None:
    """The players in an answer: a QueryResult's rows, a frame's column, or a collection."""
    rows = getattr(value, "rows", None)
    if rows is not None:
        return {str(r[key]) for r in rows if key in r}
    if isinstance(value, pd.DataFrame):
        return set(value[key].astype(str)) if key in value.columns else None
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        return None
    return {str(v) for v in value}


@exercise("06.2", "Debug this: the incomplete count", NOTEBOOK, "debug")
def incomplete_count(answer: object, *, expected: Iterable[object], local: object = None,
                     partitions: int | None = None, key: str = "player") -> list[Point]:
    """``answer``: the fixed answer (a ``QueryResult`` from the client, a frame with a
    ``player`` column, or the players). ``expected``: the players of the window in Spark's
    snapshot; ``local``: the one-instance answer that looked incomplete."""
    got = _players(answer, key)
    if got is None:
        return [Point(False, f"answer with the fixed query's result (client.fetch_all(...)), "
                             f"a DataFrame with a {key!r} column, or the list of players; "
                             f"got {type(answer).__name__}")]
    want = {str(v) for v in expected}
    mine = _players(local, key) if local is not None else None
    points = []
    report = getattr(answer, "partitions", None)
    if report is not None and partitions is not None:
        answered = sorted({a.partition for a in report})
        if answered == list(range(partitions)):
            by = sorted({a.instance for a in report})
            points.append(Point(True, f"every partition answered ({answered}, by "
                                      f"{', '.join(by)}): a scatter-gather"))
        else:
            absent = sorted(set(range(partitions)) - set(answered))
            points.append(Point(False, f"only partitions {answered} answered; {absent} did not: "
                                       f"one instance answers only for the partitions it owns"))
    if mine is not None and got == mine and mine != want:
        points.append(Point(False, f"this is still the one instance's local answer "
                                   f"({len(mine)} of {len(want)} players): ask every partition's "
                                   f"owner — the client's fetch_all scatters and gathers"))
        return points
    missing, extra = want - got, got - want
    if not missing and not extra:
        points.append(Point(True, f"all {len(want)} players of the window, as in Spark's "
                                  f"snapshot"))
    if missing:
        points.append(Point(False, f"{len(missing)} of {len(want)} players missing "
                                   f"({_names(missing)}): their rows live on partitions this "
                                   f"answer did not ask"))
    if extra:
        points.append(Point(False, f"{len(extra)} players not in this window in Spark's "
                                   f"snapshot ({_names(extra)}): ask for one window only "
                                   f"(time_from = time_to = its start)"))
    return points


WHY_SPREAD = Choices(
    {"a": "statekit spreads a player's windows over the instances to balance the load",
     "b": "Spark places aggregation state by the hash of all grouping values, and a time "
          "window is one of them: (window, player) decides the partition",
     "c": "the state follows the input topic's partition the player's events arrived in",
     "d": "the serving instances move windows between them when they rebalance"},
    right="b",
    why={"a": "statekit does not choose where a row lives: Spark does, and the serving "
              "instances follow Spark's partitions one to one",
         "b": "right: a windowed aggregation groups by (window, player), so both are hashed "
              "(Murmur3, seed 42, pmod the shuffle partitions); a session window is placed by "
              "the keys alone, and Kafka Streams keeps all of a key's windows in the key's "
              "partition",
         "c": "Spark shuffles by the grouping values before the state: its state partitions "
              "are the shuffle partitions, not the input topic's (4 here against 3)",
         "d": "a rebalance moves whole partitions between instances; which partition holds "
              "a row never changes for a given checkpoint"})


review("06.3", "Why are one player's windows on several partitions?", NOTEBOOK, WHY_SPREAD)
