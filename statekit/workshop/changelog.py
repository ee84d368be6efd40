"""Exercises of notebook 03 (the changelog, log compaction, migrating a store's format, when
to switch logging off, replication, exactly once)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping

from statekit.changelog.log import Changelog
from statekit.errors import BadArgument
from statekit.kafka.replication import WRITES, outcome, survives_losing
from statekit.stores.migration import live_values
from statekit.workshop.answers import count, keyed, one_of
from statekit.workshop.choices import Choices
from statekit.workshop.registry import exercise, review
from statekit.workshop.verdict import Point

NOTEBOOK = "03_changelog_and_compaction"
#: The new value format of the migration exercise: the old columns plus ``avg_score``.
OLD_COLUMNS = ("count", "sum_score", "max_score")
NEW_COLUMNS = (*OLD_COLUMNS, "avg_score")


@exercise("03.1", "What does compaction keep?", NOTEBOOK, "predict")
def compacted_size(answer: object, *, compacted: int | None = None, raw: int | None = None,
                   store_rows: int | None = None, tombstones: int | None = None):
    guess = count(answer)
    if guess is None:
        return [Point(False, f"{answer!r}: answer with a whole number of records")]
    if None in (compacted, raw, store_rows, tombstones):
        raise BadArgument("measured", "compacted/raw/store_rows/tombstones",
                          "the counts the notebook measured")
    why = (f"compaction keeps the latest record per key: {compacted} records, one put per "
           f"row the store holds ({store_rows}); with delete.retention.ms=0 the "
           "tombstones of evicted windows are cleaned too")
    if guess == compacted:
        return [Point(True, why)]
    hint = {raw: f"{raw} is the raw log: compaction drops every record a later one of the "
                 "same key supersedes",
            store_rows + tombstones: "that counts all tombstones; with delete.retention.ms=0 "
                                     "they are cleaned at once, keys and all"}.get(guess)
    return [Point(False, f"{guess} is not it: {why}"), *([Point(False, hint)] if hint else [])]


def upgraded_ok(old: Mapping, new: object) -> str | None:
    """What is wrong with ``new`` as the upgrade of ``old`` (None when it is right)."""
    if not isinstance(new, Mapping):
        return f"upgrade returned a {type(new).__name__}, not a dict"
    if set(new) != set(NEW_COLUMNS):
        return f"the new value has the fields {sorted(new)}; the new format has {list(NEW_COLUMNS)}"
    for column in OLD_COLUMNS:
        if new[column] != old[column]:
            return f"{column} changed from {old[column]} to {new[column]}"
    count, total = old["count"], old["sum_score"]
    want = None if total is None or not count else total / count
    got = new["avg_score"]
    if want is None:
        return None if got is None else f"avg_score is {got}; with no score it is None"
    if not isinstance(got, (int, float)) or not math.isclose(got, want):
        return f"avg_score is {got}; sum_score / count is {want}"
    return None


@exercise("03.2", "Migrate a store to a new value format", NOTEBOOK, "build")
def migrate(answer: object, *, log: Changelog | None = None, stores: Mapping | None = None):
    if not callable(answer):
        return [Point(False, f"your answer is a {type(answer).__name__}; the upgrade function "
                             "(old value dict → new value dict) is expected")]
    if not isinstance(log, Changelog) or not isinstance(stores, Mapping):
        raise BadArgument("measured", "log/stores",
                          "log=the old changelog, stores=the migrated stores by partition")
    live = live_values(log)
    points = []
    sample = live["value"].iloc[0] if len(live) else dict.fromkeys(OLD_COLUMNS, 1)
    try:
        once = answer(dict(sample))
        twice = answer(dict(once))
    except Exception as error:  # the learner's code: say what it raised
        return [Point(False, f"upgrade raised {type(error).__name__}: {error}")]
    problem = upgraded_ok(sample, once)
    points.append(Point(problem is None, problem or "an old value gets avg_score = "
                                                    "sum_score / count, the rest unchanged"))
    same = twice == once
    points.append(Point(same, "a value already in the new format passes unchanged" if same else
                        f"a new-format value changes again ({once} → {twice}): during a "
                        "migration both formats are read, so upgrade must accept both"))
    missing, wrong, example = 0, 0, None
    for partition, key, value in zip(live["partition"], live["key"], live["value"],
                                     strict=True):
        store = stores.get(int(partition))
        raw = None if store is None else store.get_raw(key.encode())
        if raw is None:
            missing += 1
            example = example or f"{key} (partition {partition})"
            continue
        problem = upgraded_ok(value, json.loads(raw))
        if problem:
            wrong += 1
            example = example or f"{key}: {problem}"
    entries = sum(s.approximate_num_entries() for s in stores.values())
    if missing or wrong:
        points.append(Point(False, f"of {len(live)} live keys, {missing} are missing from the "
                                   f"new stores and {wrong} have a wrong value; e.g. {example}"))
    elif entries != len(live):
        points.append(Point(False, f"the new stores hold {entries} entries for {len(live)} live "
                                   "keys: tombstoned keys must stay deleted"))
    else:
        points.append(Point(True, f"all {len(live)} live keys migrated, each with its value "
                                  "upgraded (tombstoned keys stay deleted)"))
    return points


NO_LOGGING = Choices(
    {"a": "like withLoggingDisabled(): a crash loses the state, which must be recomputed "
          "from the input topic",
     "b": "no changelog topic is written, so nothing statekit builds on it works (restore "
          "into local stores, standbys, serving); Spark still recovers from its checkpoint",
     "c": "Spark stops writing its checkpoint, so the query runs faster"},
    right="b",
    why={"a": "that is Kafka Streams, where the changelog is the store's only backup; Spark's "
              "durability is its checkpoint files, which changelog=False does not touch",
         "b": "right: the topic is statekit's addition, shipped from Spark's change feed "
              "after each commit; switching it off only removes the Kafka copy",
         "c": "the checkpoint is Spark's own and always written; changelog=False only stops "
              "statekit's Kafka topic"})


review("03.3", "What does changelog=False switch off?", NOTEBOOK, NO_LOGGING)


WHICH_COMPACTION = Choices(
    {"a": "Kafka log compaction of the changelog topic",
     "b": "RocksDB's LSM compaction inside the local store",
     "c": "Spark's snapshot files (a full N.zip every few versions)"},
    right="a",
    why={"a": "right: the broker's cleaner keeps the latest record per key, so a restore "
              "that replays the topic reads fewer records",
         "b": "RocksDB merges its sorted files to make reads and disk use cheaper; it "
              "changes nothing in the Kafka topic a restore reads",
         "c": "snapshots shorten Spark's own restart (load a snapshot, replay the deltas "
              "after it); they do not touch the Kafka topic"})


review("03.4", "A restore from the topic got faster: which compaction?", NOTEBOOK, WHICH_COMPACTION)


EXPIRY_OPTIONS = {
    "a": "nothing: the expired window vanishes without a record (time-based retention ages "
         "its records out of the topic later)",
    "b": "a tombstone for that window's key, so replaying the log deletes it too",
    "c": "a put with a count of zero"}
#: The same question asked of each engine: they differ, and both answers are judged.
EXPIRY = {
    "statekit": Choices(EXPIRY_OPTIONS, right="b", why={
        "a": "that is Kafka Streams; statekit ships Spark's change feed, where an eviction is "
             "a delete",
        "b": "right: Spark's change feed reports the eviction as a delete, and statekit ships "
             "it as a tombstone",
        "c": "an evicted window is deleted, not zeroed"}),
    "kafka streams": Choices(EXPIRY_OPTIONS, right="a", why={
        "a": "right: a window store keeps its windows in time segments and drops a whole "
             "segment once stream time passes its retention, writing no tombstone; the "
             "changelog topic (compact,delete) deletes the old records by its retention.ms",
        "b": "that is statekit's topic; Kafka Streams' window stores drop expired segments "
             "without writing a tombstone per window",
        "c": "an expired window is dropped, not zeroed"}),
}
# each read with answers.words: 'Kafka-Streams', 'kafka_streams', 'KafkaStreams' alike
_ENGINES = {"statekit": "statekit", "spark": "statekit", "kafka streams": "kafka streams",
            "kafkastreams": "kafka streams", "streams": "kafka streams"}


@exercise("03.5", "The watermark evicts a window: what reaches the changelog, in each engine?",
          NOTEBOOK, "review", choices=EXPIRY["statekit"])
def expiry(answer: object):
    """``answer``: ``{"statekit": letter, "kafka streams": letter}``; each engine is judged on
    its own, and when both are right the check says why they differ."""
    if not isinstance(answer, Mapping):
        return [Point(False, f"answer with a dict, one letter per engine: {{'statekit': ..., "
                             f"'kafka streams': ...}}; got {answer!r}")]
    given = {one_of(str(k), _ENGINES): v for k, v in answer.items()}
    unknown = [k for k in answer if one_of(str(k), _ENGINES) is None]
    points = [Point(False, f"{k!r} is not an engine of this question: 'statekit', "
                           "'kafka streams'") for k in unknown]
    for engine, choices in EXPIRY.items():
        if engine not in given:
            points.append(Point(False, f"{engine}: not answered"))
            continue
        judged = choices.judge(given[engine])[0]
        points.append(Point(judged.ok, f"{engine}: {judged.text}"))
    if all(p.ok for p in points):
        points.append(Point(True, "they differ because the changelog is written differently: "
                                  "Kafka Streams logs the store's own writes (segments dropped "
                                  "on expiry are not writes), statekit ships Spark's change "
                                  "feed, where the watermark's eviction is a delete"))
    return points


CONSUMING = Choices(
    {"a": "nothing: the changelog is the store, so the dashboard is always exact",
     "b": "it is behind by its lag (batches shipped but not yet consumed), and with "
          "retention it misses keys whose only records were deleted before it read them",
     "c": "it sees batches Spark has not committed yet"},
    right="b",
    why={"a": "the topic is a log of changes; a reader is only as fresh as what it has "
              "consumed, and only as complete as what retention left",
         "b": "right: both caveats of reading state by consuming its changelog",
         "c": "statekit ships a batch's changes only after Spark commits it"})


review("03.6", "A dashboard that reads the changelog topic", NOTEBOOK, CONSUMING)


#: Exercise 03.7's stores: name → (logging on or off, why).
LOGGING_CASES = {
    "payments dedup": ("on", "its ids must be remembered 30 days and the input topic keeps 7: "
                             "recomputed from the input, it would forget ids and let "
                             "duplicates through"),
    "profile cache": ("off", "a cache: a lost entry is fetched from the service again, so a "
                             "changelog only costs writes"),
    "last hour counts": ("off", "derived state the input still holds (an hour of a topic "
                                "kept 7 days), and the team accepts re-reading it at recovery "
                                "to get the write throughput back"),
    "all time totals": ("on", "its state goes back further than the input's retention: only "
                              "the changelog can bring it back"),
}
_ON_OFF = {"on": "on", "logging on": "on", "enabled": "on", "keep it": "on", "keep": "on",
           "off": "off", "logging off": "off", "disabled": "off", "disable": "off"}


@exercise("03.7", "Changelog logging on or off? Four stores", NOTEBOOK, "review")
def logging_on_or_off(answer: object):
    """``answer``: a dict, store name → "on" or "off"."""
    if not isinstance(answer, Mapping) or not answer:
        return [Point(False, "expected a dict: {store name: \"on\" or \"off\"}, for "
                             + ", ".join(repr(n) for n in LOGGING_CASES))]
    found, unknown = keyed(answer, LOGGING_CASES)
    points = [Point(False, f"{key!r} is none of the stores ({', '.join(LOGGING_CASES)})")
              for key in unknown]
    for name, (right, why) in LOGGING_CASES.items():
        if name not in found:
            points.append(Point(False, f"{name}: not answered"))
            continue
        said = one_of(found[name], _ON_OFF)
        if said is None:
            points.append(Point(False, f"{name}: {found[name]!r} is neither \"on\" nor \"off\""))
        else:
            points.append(Point(said == right, f"{name}: logging {right}: {why}"
                                if said == right else f"{name}: not {said}: {why}"))
    return points


@exercise("03.8", "Predict: brokers down while the changelog still takes writes", NOTEBOOK,
          "predict")
def brokers_down(answer: object, *, replication_factor: int, min_insync_replicas: int):
    """``answer``: how many brokers may be down while an ``acks=all`` producer's writes go on."""
    value = count(answer)
    if value is None:
        return [Point(False, f"{answer!r}: answer with a whole number of brokers")]
    rf, isr = replication_factor, min_insync_replicas
    most = max((d for d in range(rf + 1) if outcome(rf, isr, d) == WRITES), default=0)
    if value == most:
        return [Point(True, f"{most}: {rf - most} replicas stay in sync, as many as "
                            f"min.insync.replicas={isr} asks; an acknowledged record is on "
                            f"{isr} brokers, so losing {survives_losing(rf, isr)} loses none")]
    if value > rf - 1:
        return [Point(False, f"{value}: with every replica down the partition is offline")]
    if value > most:
        return [Point(False, f"{value}: then {rf - value} replica(s) are in sync, fewer than "
                             f"min.insync.replicas={isr}: the leader refuses acks=all writes "
                             f"(NOT_ENOUGH_REPLICAS); reads go on")]
    return [Point(False, f"{value}: more can go: writes need min.insync.replicas={isr} "
                         f"in-sync replicas of the {rf}, not all of them")]


EXACTLY_ONCE = Choices(
    {"a": "the changelog loses batch 7: shipping happens after Spark's commit, and the crash "
          "came in between",
     "b": "on restart the writer ships batch 7 from Spark's change feed (the checkpoint holds "
          "it); read_committed readers see its records once; until then the topic is one "
          "batch behind the checkpoint, never ahead",
     "c": "Spark rolls batch 7 back, because its commit and the changelog's transaction are "
          "one transaction",
     "d": "the changelog gets batch 7 twice, once from the old writer and once from the new"},
    right="b",
    why={"a": "the checkpoint is the source: the ledger says batch 7 is not shipped yet, and the "
              "next writer ships it from the change feed",
         "b": "right: Spark's checkpoint commits state with the offsets; statekit's changelog "
              "follows it, each round one Kafka transaction with its ledger, so it may lag, "
              "never diverge. Kafka Streams instead puts changelog writes, output and input "
              "offsets in one transaction (exactly_once_v2)",
         "c": "they are two commits: Spark's (offsets log, state files, commit log) and then "
              "the Kafka transaction; Spark never waits for the topic",
         "d": "the new writer fences the old (transactional.id), aborts its open transaction, "
              "and skips batches the topic already holds (the ledger and a read_committed "
              "read past it)"})


review("03.9", "Review: a crash between Spark's commit and the changelog", NOTEBOOK,
       EXACTLY_ONCE)
