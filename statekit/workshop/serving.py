"""Exercises of notebook 06 (interactive queries and routing).

06.1 builds the routing: a function ``owner(key) -> (partition, instance)`` checked
against Spark's own placement on every state row of a snapshot; each point on its
own (a wrong partition is said once; the instance is judged against the learner's
partition). 06.2 is the seeds' "debug this": a count that looks incomplete because
a dashboard counted from the stores of its own partitions only; the fix is judged
by the query's own report (every partition answered), not by a copied value. 06.3
asks why one player's windows are spread out; 06.4 compares a local get with a routed
REST get, as measured. ``wait_for_event`` and
``ask_until_served`` are the notebook's waits (a failover; a rebalance).

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

import time
from collections.abc import Callable, Iterable, Mapping, Sequence

import pandas as pd

from statekit.serve.hop_latency import LOCAL, REMOTE
from statekit.serve.routing.placement import state_partition
from statekit.workshop.answers import letter
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
    # The instance is judged against the learner's own partition: a wrong partition is one
    # mistake, said once above; routing it to that partition's owner is still right.
    owner_right = [g[1] == active.get(g[0]) for g in got]
    if all(owner_right):
        points.append(Point(True, "each key goes to the active instance of the partition you "
                                  "computed (cluster.assignment.active)"))
    else:
        i = owner_right.index(False)
        (partition, said), owner = got[i], active.get(got[i][0])
        held = (standbys or {}).get(partition, ())
        if owner is None:
            why = (f"partition {partition} does not exist (partitions: "
                   f"{sorted(active)}); pmod by the number of partitions")
        elif said in held:
            why = (f"{said!r} is a standby of partition {partition}: route to the active owner "
                   f"{owner!r}; a standby answers only when the owner is gone")
        else:
            why = f"partition {partition}'s active owner is {owner!r}, not {said!r}"
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


def window_players(snapshot: pd.DataFrame, window: object, key: str = "player") -> set[str]:
    """The players Spark's snapshot holds in the window starting at ``window``."""
    start = pd.Timestamp(window)
    if start.tzinfo is not None:
        start = start.tz_convert("UTC").tz_localize(None)
    return set(snapshot.loc[snapshot["window_start"] == start, key].astype(str))


@exercise("06.2", "Debug this: the incomplete count", NOTEBOOK, "debug")
def incomplete_count(answer: object, *, snapshot: pd.DataFrame, window: object,
                     local: object = None, partitions: int | None = None,
                     key: str = "player") -> list[Point]:
    """``answer``: the fixed query's result (a ``QueryResult`` from the routing client), so
    that the check sees which partitions answered: a list or a table of players proves
    nothing (it could be copied from the snapshot). ``snapshot``: Spark's snapshot (the
    players of ``window`` in it are the truth); ``local``: what the dashboard counted."""
    report = getattr(answer, "partitions", None)
    got = _players(answer, key) if report is not None else None
    if got is None:
        shown = type(answer).__name__
        return [Point(False, f"answer with what the fixed query returns — a QueryResult from "
                             f"the routing client (client.fetch_all(...)) — so the check can "
                             f"see which partitions answered; your {shown} could be copied "
                             f"from the snapshot, and says nothing about the fix")]
    want = window_players(snapshot, window, key)
    mine = _players(local, key) if local is not None else None
    points = []
    answered = sorted({a.partition for a in report})
    if partitions is not None:
        if answered == list(range(partitions)):
            by = sorted({a.instance for a in report})
            points.append(Point(True, f"every partition answered ({answered}, by "
                                      f"{', '.join(by)}): a scatter-gather"))
        else:
            absent = sorted(set(range(partitions)) - set(answered))
            points.append(Point(False, f"only partitions {answered} answered; {absent} did not: "
                                       f"the dashboard's own stores hold only its partitions — "
                                       f"ask every partition's owner"))
    if mine is not None and got == mine and mine != want:
        points.append(Point(False, f"this is still the dashboard's local answer ({len(mine)} "
                                   f"of {len(want)} players): ask every partition's owner — the "
                                   f"client's fetch_all scatters and gathers"))
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


# --- what notebook 06 does between its questions --------------------------------------------
def wait_for_event(cluster, event: str, timeout: float = 60.0) -> pd.DataFrame:
    """Wait until ``cluster.timeline()`` has an ``event`` (e.g. ``"standby ready"``); the
    timeline. ``TimeoutError`` naming the event and the events seen, after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        timeline = cluster.timeline()
        if event in set(timeline["event"]):
            return timeline
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {event!r} in the cluster's timeline after {timeout:.0f} s; "
                               f"events so far: {list(timeline['event'])}")
        time.sleep(0.2)


def ask_until_served(ask: Callable, *args, timeout: float = 60.0, **kwargs):
    """``ask(*args, **kwargs)`` until it answers, waiting as long as each
    ``PartitionUnavailable`` says (its ``retry_after``: the REST service's ``Retry-After``).

    Returns ``(answer, attempts)``: ``attempts`` has one row per try — ``seconds`` since the
    first, ``outcome`` (``"answered"`` or the error's name) and ``detail``. ``TimeoutError``
    after ``timeout`` seconds of refusals.
    """
    from statekit.errors import PartitionUnavailable

    started, attempts = time.monotonic(), []
    while True:
        at = time.monotonic() - started
        try:
            answer = ask(*args, **kwargs)
        except PartitionUnavailable as exc:
            attempts.append({"seconds": round(at, 3), "outcome": type(exc).__name__,
                             "detail": str(exc)})
            if time.monotonic() - started > timeout:
                raise TimeoutError(f"still unavailable after {timeout:.0f} s: {exc}") from exc
            time.sleep(min(max(exc.retry_after, 0.1), 5.0))
            continue
        report = getattr(answer, "partitions", [])
        who = ", ".join(f"p{a.partition} by {a.instance} ({a.role}, batch {a.batch})"
                        for a in report)
        attempts.append({"seconds": round(at, 3), "outcome": "answered", "detail": who})
        return answer, pd.DataFrame(attempts, columns=["seconds", "outcome", "detail"])


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


#: Exercise 06.4's options: how the routed REST get compares with the local get (medians).
HOP_OPTIONS = {
    "a": "about the same (under 3 times): on loopback a hop is nearly free",
    "b": "the REST get is 3 to 30 times slower",
    "c": "the REST get is 30 times slower or more: a local read is a RocksDB lookup in this "
         "process, a remote one is an HTTP request, a JSON answer and two context switches",
    "d": "the local get is slower: RocksDB reads from disk"}


def hop_option(local_s: float, remote_s: float) -> str:
    """The option of ``HOP_OPTIONS`` that the measured medians make right."""
    ratio = remote_s / local_s if local_s > 0 else float("inf")
    return "d" if ratio < 1 else "a" if ratio < 3 else "b" if ratio < 30 else "c"


@exercise("06.4", "Predict, then run: a local get against a routed REST get", NOTEBOOK,
          "predict")
def local_against_remote(answer: object, *, latencies: pd.DataFrame):
    """``latencies``: ``point_read_latencies``' frame (``kind``, ``seconds``)."""
    said = letter(answer)
    if said not in HOP_OPTIONS:
        return [Point(False, f"{answer!r}: answer with one of {', '.join(HOP_OPTIONS)}")]
    medians = latencies.groupby("kind")["seconds"].median()
    local, remote = float(medians[LOCAL]), float(medians[REMOTE])
    right = hop_option(local, remote)
    fact = (f"median {local * 1e6:,.1f} µs local, {remote * 1e3:,.2f} ms over REST: "
            f"{remote / local:,.0f} times")
    if said == right:
        return [Point(True, f"{said}) {fact}. This is why Kafka Streams answers from the "
                            f"local store when it can, and why a scatter-gather costs a hop "
                            f"per instance")]
    return [Point(False, f"not {said}) here: {fact}, so {right})")]
