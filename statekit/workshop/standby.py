"""Exercises of notebook 05 (statekit's standby replicas, failover drills, Spark's restart)."""

from __future__ import annotations

from collections.abc import Mapping

from statekit.workshop.answers import count
from statekit.workshop.choices import Choices
from statekit.workshop.registry import exercise, review
from statekit.workshop.verdict import Point

NOTEBOOK = "05_standby_and_failover"
SCENARIOS = ("no standby", "standby", "stale standby")

STANDBY_LAG = Choices(
    {"a": "always 0: the standby receives each change as Spark makes it",
     "b": "it rises to about one batch's changes when statekit ships a batch, then drops "
          "back to 0 as the standby consumes them",
     "c": "it grows with the changelog: the standby only catches up when it is promoted"},
    right="b",
    why={"a": "Spark writes no changelog: statekit ships a batch's changes to the topic "
              "after Spark commits the batch, all at once, and the standby reads them "
              "from there a moment later",
         "b": "right: the changelog grows by a whole batch at a time (after each commit), "
              "and the standby tails it in the background, writing each poll as one "
              "write batch",
         "c": "that is a stale standby (one that stopped tailing); a live standby keeps "
              "consuming, so promoting it replays almost nothing"})


@exercise("05.1", "Predict, then run: how far behind is a standby?", NOTEBOOK, "predict",
          choices=STANDBY_LAG)
def standby_lag(answer: object, *, peak_lag: int | None = None,
                largest_batch: int | None = None):
    """``peak_lag``: the largest lag sampled; ``largest_batch``: the most changelog records
    one batch wrote (both quoted in the verdict when given)."""
    points = STANDBY_LAG.judge(answer)
    if points[0].ok and peak_lag is not None and largest_batch is not None:
        points.append(Point(True, f"measured: the lag peaked at {peak_lag:,} record"
                                  f"{'' if peak_lag == 1 else 's'}; the "
                                  f"largest batch shipped {largest_batch:,} (a loaded "
                                  f"machine can leave the standby a batch or two behind)"))
    return points


@exercise("05.2", "Predict, then run: records replayed at failover", NOTEBOOK, "predict")
def failover_records(answer: object, *, changelog_records: int, lag_at_kill: int,
                     after_stale_batch: int, stale_batch: int):
    """``answer``: scenario → records the replacement replays. ``changelog_records``: the
    whole log; ``lag_at_kill``: the live standby's lag when the owner died;
    ``after_stale_batch``: records after ``stale_batch``, where the stale standby stopped."""
    if not isinstance(answer, Mapping):
        return [Point(False, f"answer with a dict of scenario → records, e.g. "
                             f"{{'no standby': 1000, 'standby': 0, 'stale standby': 500}}; "
                             f"got {answer!r}")]
    missing = [s for s in SCENARIOS if s not in answer]
    extra = [s for s in answer if s not in SCENARIOS]
    if missing or extra:
        return [Point(False, f"the dict needs exactly the keys {list(SCENARIOS)}; "
                             f"missing {missing}, unknown {extra}")]
    values = {s: count(answer[s]) for s in SCENARIOS}
    bad = [s for s, v in values.items() if v is None]
    if bad:
        return [Point(False, f"{answer[bad[0]]!r} ({bad[0]!r}) is not a number of records")]
    points = []
    v = values["no standby"]
    if v == changelog_records:
        points.append(Point(True, f"no standby: {changelog_records:,} records, the whole "
                                  f"changelog, into an empty store"))
    else:
        points.append(Point(False, f"no standby: {v:,} is not it — a replacement with an "
                                   f"empty store has no checkpoint, so it reads every "
                                   f"record of the changelog"))
    v = values["standby"]
    if v <= lag_at_kill:
        points.append(Point(True, f"standby: {v:,} — a live standby replays only its lag "
                                  f"at the kill ({lag_at_kill:,} records here)"))
    else:
        points.append(Point(False, f"standby: {v:,} is too many — the standby had been "
                                   f"tailing the log; it replays only what it had not "
                                   f"read yet ({lag_at_kill:,} records here)"))
    v = values["stale standby"]
    if v == after_stale_batch:
        points.append(Point(True, f"stale standby: {after_stale_batch:,} records, those of "
                                  f"the batches after {stale_batch}, where it stopped"))
    else:
        points.append(Point(False, f"stale standby: {v:,} is not it — it stopped after "
                                   f"batch {stale_batch} and its checkpoint says so: it "
                                   f"reads the records of the later batches only"))
    return points


SPARK_HAS_NO_STANDBY = Choices(
    {"a": "Spark promotes statekit's standby and skips loading its own state",
     "b": "nothing: Spark has no standby replicas; it reloads the state from its checkpoint "
          "(newest snapshot, then delta files). statekit's standby tails statekit's own "
          "changelog topic, so statekit's local stores (queries, serving) fail over fast",
     "c": "Spark writes no more delta files while a standby is running",
     "d": "the restarted query reads the changelog topic instead of its checkpoint"},
    right="b",
    why={"a": "Spark knows nothing of statekit's stores; its restart always goes through "
              "its checkpoint folder",
         "b": "right: the spark_restart_drill timeline shows it — load snapshot, replay "
              "deltas, per partition — whatever standbys statekit keeps",
         "c": "Spark's RocksDB provider writes a delta file per version whatever runs "
              "beside it; statekit's changelog is shipped from that change feed",
         "d": "Spark reads no changelog topic: the topic is statekit's copy of the "
              "changes, for the Kafka Streams ideas"})


review("05.3", "What does a statekit standby change for Spark's own recovery?", NOTEBOOK,
       SPARK_HAS_NO_STANDBY)


RETENTION = Choices(
    {"a": "it resumes from its checkpointed offsets as always",
     "b": "it cannot resume: the records between its checkpoint and the topic's new start "
          "are gone; statekit raises ChangelogError, and the store must be rebuilt from "
          "scratch (from a compacted topic that still holds every key's latest record)",
     "c": "it silently skips the missing records and serves slightly stale values"},
    right="b",
    why={"a": "only if the topic still starts at or before that offset: retention (or a "
              "deleted and recreated topic) moves the start past it",
         "b": "right: that is why the reading material says changelog retention must be "
              "long enough for a restarting instance to catch up — and why the changelog "
              "of a key-value store is compacted, not deleted by time",
         "c": "statekit refuses rather than serve a store with a hole in it: the error "
              "names the store directory, the offsets and the topic"})


review("05.4", "A standby that was stopped for a week", NOTEBOOK, RETENTION)
