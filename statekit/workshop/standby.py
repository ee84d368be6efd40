"""Exercises of notebook 05 (statekit's standby replicas, failover drills, Spark's restart,
rack-aware standby placement)."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from statekit.workshop.answers import count, keyed
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


def lag_episodes(lag: pd.DataFrame) -> dict:
    """What a standby's lag samples (``StandbyReplica.lag()``) show, summed over partitions
    at each sample time: ``peak`` (records), ``rises`` (stretches above 0), ``final`` (the
    last sample), ``samples``, and ``every`` (median seconds between samples).

    Example:
        >>> t = pd.Timestamp("2026-01-05 10:00")
        >>> ms = pd.Timedelta("100ms")
        >>> lag = pd.DataFrame({"time": [t, t, t + ms, t + 2 * ms],
        ...                     "partition": [0, 1, 0, 0], "lag": [0, 0, 120, 0]})
        >>> lag_episodes(lag)
        {'peak': 120, 'rises': 1, 'final': 0, 'samples': 3, 'every': 0.1}
    """
    total = lag.groupby("time", sort=True)["lag"].sum()
    above = (total > 0).astype(int)
    rises = int(((above.diff().fillna(above) > 0)).sum())
    gaps = total.index.to_series().diff().dt.total_seconds().dropna()
    return {"peak": int(total.max()) if len(total) else 0, "rises": rises,
            "final": int(total.iloc[-1]) if len(total) else 0, "samples": len(total),
            "every": round(float(gaps.median()), 3) if len(gaps) else 0.0}


@exercise("05.1", "Predict, then run: how far behind is a standby?", NOTEBOOK, "predict",
          choices=STANDBY_LAG)
def standby_lag(answer: object, *, lag: pd.DataFrame | None = None,
                largest_batch: int | None = None):
    """``lag``: the standby's lag samples (``StandbyReplica.lag()``, taken on a timer from the
    topic's end offsets); ``largest_batch``: the most changelog records one batch wrote. The
    verdict quotes what was measured and never contradicts it."""
    points = STANDBY_LAG.judge(answer)
    said = answer if points[0].text[:2] in ("a)", "b)", "c)") else None
    if said is None or lag is None or largest_batch is None or lag.empty:
        return points
    seen = lag_episodes(lag)
    letter = points[0].text[0]
    share = f"{seen['peak'] / largest_batch:.0%} of " if largest_batch else ""
    if seen["final"] > 0:
        points.append(Point(letter == "c", f"measured: still {seen['final']:,} records behind "
                                           f"at the last sample (did the standby get time to "
                                           f"read the last batch?)"))
    elif seen["peak"] > 0:
        points.append(Point(letter == "b", f"measured: the lag rose above 0 {seen['rises']} "
                                           f"time(s) — at most {seen['peak']:,} records, "
                                           f"{share}the largest batch ({largest_batch:,}) — and "
                                           f"fell back to 0 each time; it is 0 at the end "
                                           f"(samples every {seen['every']:g} s from the "
                                           f"topic's end offsets)"))
    else:
        points.append(Point(True, f"measured: no sample (every {seen['every']:g} s) caught the "
                                  f"standby behind — it read each batch within one sampling "
                                  f"interval; with more batches, or a busier machine, the "
                                  f"samples catch it"))
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
    answer, extra = keyed(answer, SCENARIOS)  # 'No standby', 'stale-standby' alike
    missing = [s for s in SCENARIOS if s not in answer]
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
         "c": "Spark's state files do not depend on what runs beside it: with changelog "
              "checkpointing (statekit's setting) its RocksDB provider writes a delta file "
              "per version, without it a full N.zip per version; statekit's changelog is "
              "shipped from Spark's change feed",
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


@exercise("05.5", "Predict, then run: one zone down, partitions with no copy left", NOTEBOOK,
          "predict")
def zone_down(answer: object, *, outages: pd.DataFrame, zone: str):
    """``outages``: ``zone_outages`` of both placements with a ``placement`` column
    (``round-robin``, ``rack-aware``); the answer: round-robin's partitions lost when
    ``zone`` goes down."""
    value = count(answer)
    if value is None:
        return [Point(False, f"{answer!r}: answer with a whole number of partitions")]
    lost = outages[outages["zone"] == zone].set_index("placement")["partitions_lost"]
    round_robin, rack_aware = int(lost["round-robin"]), int(lost["rack-aware"])
    if value == round_robin:
        return [Point(True, f"{round_robin}: round-robin put a standby on the next instance, "
                            f"in the same zone as its active owner; rack-aware placement "
                            f"loses {rack_aware}")]
    if value == rack_aware:
        return [Point(False, f"{rack_aware} is the rack-aware placement's; statekit's "
                             f"round-robin puts each standby on the next instance in order, "
                             f"whatever its zone")]
    return [Point(False, f"{value}: a partition is lost only when its active owner and its "
                         f"standby are both in {zone}; count those in the round-robin plan")]
