"""Exercises of notebook 00 (setup and the map of the workshop), and the map itself.

``series()`` is the workshop's map: each idea of the reading material (Kafka
Streams state stores), the notebook that teaches it on Spark, and that
notebook's exercises (read from the registry, so the map never lists an
exercise that does not exist).

Example:
    >>> SERIES["04_restore"][:60]
    'restore: rebuilding a store from its changelog or checkpoint'
    >>> from statekit import workshop
    >>> verdict = workshop.check("00.2", "4")
    >>> verdict.right, verdict.points[0].text[:38]
    (True, '04_restore: restore: rebuilding a stor')
"""

from __future__ import annotations

import re

import pandas as pd

from statekit.workshop.answers import one_of, whole, words
from statekit.workshop.choices import Choices
from statekit.workshop.registry import exercise, exercises, review
from statekit.workshop.verdict import Point

#: Each notebook of the series and the idea it teaches (in the reading material's words).
SERIES: dict[str, str] = {
    "00_index": "setup check and the map of the workshop",
    "01_state_store_basics": "what a state store is: snapshots and the change feed; what an "
                             "open iterator holds",
    "02_windows_sessions_and_watermarks": "window and session stores, watermark and eviction, "
                                          "the session store API",
    "03_changelog_and_compaction": "changelog topics and compaction; Spark's state files; "
                                   "exactly once, replication, when to switch logging off",
    "04_restore": "restore: rebuilding a store from its changelog or checkpoint, its time, "
                  "moving a store without downtime",
    "05_standby_and_failover": "standby replicas and failover; rack-aware standby placement",
    "06_interactive_queries": "interactive queries and query routing; local against remote "
                              "latency",
    "07_global_store": "global store vs scatter-gather",
    "08_monitoring_growth_and_ttl": "monitoring, state growth and TTL; the broker's cleaner "
                                    "on a changelog; tombstones in the source topic; an "
                                    "external clean-up job against a TTL",
    "09_rocksdb_tuning": "RocksDB tuning and memory sizing; compression; where the state "
                         "lives on disk",
    "10_debug_a_checkpoint": "debugging an existing job from its checkpoint",
    "11_write_a_stateful_processor": "the Processor API: your own processor with key-value, "
                                     "window and session stores, punctuation and TTL; when "
                                     "not to keep state locally (an external store's cost "
                                     "per lookup); a store of your own shape",
    "12_your_own_job_live": "your own PySpark job, live: a deduplication, a stream-stream "
                            "join and an aggregation attached while they run; a changelog "
                            "per part, a join side served by key, the dashboard",
    "13_debugging_a_broken_job": "debugging a broken job: a changed query caught before "
                                 "restart, a count explained record by record, a restore "
                                 "that would fail, two checkpoints diffed",
    "14_kafka_streams_and_spark": "Kafka Streams itself beside Spark: one topic, both "
                                  "engines' stores compared; a store's retention and record "
                                  "cache against watermark eviction; the record cache and the "
                                  "changelog; murmur2 against murmur3 routing; a standby "
                                  "taking over; the same state restored three ways; a window "
                                  "store's segments on disk",
}


def series() -> pd.DataFrame:
    """The map: one row per notebook — ``notebook``, ``idea``, ``exercises`` (ids, titles).

    Example:
        >>> series().loc[0, ["notebook", "idea"]].tolist()
        ['00_index', 'setup check and the map of the workshop']
    """
    listed = exercises()
    rows = []
    for stem, idea in SERIES.items():
        mine = listed[listed["notebook"] == stem]
        rows.append({"notebook": stem, "idea": idea,
                     "exercises": "; ".join(f"{r.id} {r.title} ({r.kind})"
                                            for r in mine.itertuples())})
    return pd.DataFrame(rows, columns=["notebook", "idea", "exercises"])


WHERE_STATE_LIVES = Choices(
    {"a": "in a Kafka changelog topic that Spark writes after each batch",
     "b": "in state files of its checkpoint directory, per operator, partition and version",
     "c": "in the executors' memory only: a restart starts from empty state"},
    right="b",
    why={"a": "Spark writes no changelog topic: statekit ships one from Spark's change feed "
              "after each commit, for the Kafka Streams ideas (restore, standbys, serving)",
         "b": "right: Spark's durability is its checkpoint (RocksDB or HDFS-backed state "
              "files, snapshots and deltas per partition and version)",
         "c": "executors keep state in RocksDB (or memory) between batches, but every "
              "commit also reaches the checkpoint, and a restart reloads it from there"})


review("00.1", "Where does Spark keep its state?", "00_index", WHERE_STATE_LIVES)


def _notebook(answer: object) -> str | None:
    """The series' stem ``answer`` names: a stem, its number ("4", "04"), a prefix of it, or
    the start of its name ("restore")."""
    number = whole(answer)
    text = str(answer if number is None else number).strip().removesuffix(".ipynb").lower()
    if re.fullmatch(r"\d{1,2}", text):
        text = f"{int(text):02d}_"
    found = [stem for stem in SERIES if stem.startswith(text)] if text else []
    if not found and text:  # its name without the number: "restore", "Global store"
        name = words(text)
        found = [stem for stem in SERIES if words(stem[3:]).startswith(name)]
    return found[0] if len(found) == 1 else None


@exercise("00.2", "Which notebook answers it?", "00_index", "review")
def which_notebook(answer: object):
    """A teammate asks: *after a crash, how long until our state is back?* — which notebook?

    Example:
        >>> [p.ok for p in which_notebook("06")]
        [False]
        >>> which_notebook("x")[0].text
        "'x' names no notebook of the series: give its number (e.g. 3) or its name"
    """
    stem = _notebook(answer)
    if stem is None:
        return [Point(False, f"{answer!r} names no notebook of the series: give its number "
                             "(e.g. 3) or its name")]
    if stem == "04_restore":
        return [Point(True, f"{stem}: {SERIES[stem]}")]
    hint = {"05_standby_and_failover": "standbys make the wait shorter, but how long a "
                                       "restore takes (and why) is measured first in 04",
            "03_changelog_and_compaction": "compaction bounds what a restore reads; the "
                                           "restore itself, timed, is in 04"}
    return [Point(False, f"{stem} teaches {SERIES[stem]}; "
                         + hint.get(stem, "look for the notebook about rebuilding a store"))]


# each read with answers.words; "fewer" is the prompt's own word
_SIZES = {"smaller": "smaller", "fewer": "smaller", "less": "smaller", "equal": "equal",
          "the same": "equal", "same": "equal", "larger": "larger", "more": "larger",
          "bigger": "larger"}


@exercise("00.3", "Predict, then run: state rows vs events", "00_index", "predict")
def state_rows_vs_events(answer: object, events: int | None = None,
                         state_rows: int | None = None):
    """Is the store smaller, equal or larger than the events that went in?

    ``events``: records the query read; ``state_rows``: rows of its last snapshot.

    Example:
        >>> [p.ok for p in state_rows_vs_events("smaller", events=300, state_rows=41)]
        [True]
        >>> print(state_rows_vs_events("larger", events=300, state_rows=41)[0].text)
        ... # doctest: +NORMALIZE_WHITESPACE
        the store holds 41 rows for 300 events: one row per (window, player) sums all of
        that player's events in the window, so it is smaller
    """
    said = one_of(answer, _SIZES)
    if said is None:
        return [Point(False, f"{answer!r} is not one of: smaller, equal, larger")]
    if events is None or state_rows is None:
        return [Point(False, "run the tiny query first and pass events=... and "
                             "state_rows=... (the cell does it)")]
    actual = ("smaller" if state_rows < events else "equal" if state_rows == events
              else "larger")
    why = (f"the store holds {state_rows} rows for {events} events: one row per "
           f"(window, player) sums all of that player's events in the window, so it is {actual}")
    return [Point(said == actual, why)]
