"""Exercises of notebook 14 (Kafka Streams and Spark, side by side: the reference Kafka Streams
application on the same topic as a statekit query), and the small readings it needs.

- ``segment_interval_ms``: Kafka Streams' rule for a window store's time segments (the DSL's
  default: ``max(retention / 2, 60 s)``, ``Stores.persistentTimestampedWindowStore``), the
  retention of a windowed aggregation being its window size plus its grace
  (``WindowStoreMaterializer``); a record goes to segment ``timestamp // interval``, whose folder
  is ``<store>.<segment id × interval>`` (``AbstractSegments``); a segment is dropped once it
  ends before the stream time minus the retention;
- ``oldest_live_segment``: the oldest segment folder the rule keeps at a stream time;
- ``watch_failover``: after ``app.kill``, how the survivor answers a key: its standby copy
  (``stale``), then as the new active.

Example:
    >>> segment_interval_ms(20 * 60_000)       # a 10-minute window, 10 minutes of grace
    600000
    >>> oldest_live_segment(1_767_614_100_000, retention_ms=1_200_000)
    'aggregate.1767612600000'
    >>> from statekit import workshop
    >>> workshop.check("14.1", {"cache off": 4_986, "cache on": 494},
    ...                events=5_000, accepted=4_986, windows=479, cached=494).right
    True
"""

from __future__ import annotations

import time
from collections.abc import Mapping

import pandas as pd

from statekit.errors import KafkaStreamsAppError
from statekit.workshop.answers import count, instant, keyed, letter, whole, words
from statekit.workshop.choices import Choices
from statekit.workshop.registry import exercise
from statekit.workshop.verdict import Point

NOTEBOOK = "14_kafka_streams_and_spark"
#: Kafka Streams' least segment interval (``Stores``: ``Math.max(retention / 2, 60_000L)``)
MIN_SEGMENT_INTERVAL_MS = 60_000


def segment_interval_ms(retention_ms: int) -> int:
    """The segment interval of a DSL window store of ``retention_ms``."""
    return max(int(retention_ms) // 2, MIN_SEGMENT_INTERVAL_MS)


def oldest_live_segment(stream_time_ms: int, retention_ms: int, store: str = "aggregate") -> str:
    """The folder of the oldest segment Kafka Streams keeps at ``stream_time_ms``: segment
    ``(stream time - retention) // interval`` (``AbstractSegments.cleanupExpiredSegments``)."""
    interval = segment_interval_ms(retention_ms)
    return f"{store}.{(int(stream_time_ms) - int(retention_ms)) // interval * interval}"


def watch_failover(app, key: object, victim: int, every: float = 0.25,
                   timeout: float = 60.0) -> pd.DataFrame:
    """Kill instance ``victim`` (``kill -9``) and ask the survivor for ``key`` every
    ``every`` s until it answers as the key's active owner: one row per answer, ``seconds``
    since the kill, ``role`` (``stale``: a standby's copy; ``active``; ``no answer`` while the
    group rebalances), ``served_by``, ``rows`` (the key's windows in the answer)."""
    survivor = next(i.index for i in app.instances if i.index != victim)
    app.kill(victim)
    start, rows = time.monotonic(), []
    while time.monotonic() - start < timeout:
        seconds = round(time.monotonic() - start, 2)
        try:
            answer = app.client.get(key, via=survivor)
            rows.append({"seconds": seconds, "role": answer["role"],
                         "served_by": answer["served_by"], "rows": len(answer["rows"])})
            if answer["role"] == "active":
                break
        except KafkaStreamsAppError:
            rows.append({"seconds": seconds, "role": "no answer", "served_by": None,
                         "rows": 0})
        time.sleep(every)
    return pd.DataFrame(rows, columns=["seconds", "role", "served_by", "rows"])


def _dict_answer(answer: object, names: tuple[str, ...]) -> tuple[dict, list[Point]]:
    """A dict answer's values under ``names`` (``answers.keyed``), or the point refusing it."""
    wanted = " and ".join(f'"{n}"' for n in names)
    if not isinstance(answer, Mapping):
        return {}, [Point(False, f"answer with a dict with the keys {wanted}")]
    found, unknown = keyed(answer, names)
    if unknown or len(found) < len(names):
        return found, [Point(False, f"give exactly the keys {wanted} (not "
                                    f"{[str(k) for k in unknown] or 'missing'})")]
    return found, []


# --- 14.1 --------------------------------------------------------------------------------------
CACHE = ("cache off", "cache on")


@exercise("14.1", "Predict, then run: changelog records with the record cache off and on",
          NOTEBOOK, "predict")
def changelog_with_cache(answer: object, *, events: int | None = None,
                         accepted: int | None = None, windows: int | None = None,
                         cached: int | None = None):
    """``answer``: {"cache off": n, "cache on": m}. ``events``: records in the input topic;
    ``accepted``: the events the app aggregated (the cache-off changelog's records);
    ``windows``: the (key, window) it ever wrote; ``cached``: the cache-on changelog's records.

    Example:
        >>> facts = dict(events=5_000, accepted=4_986, windows=479, cached=494)
        >>> [p.ok for p in changelog_with_cache({"Cache-Off": "4,986", "cache_on": 479},
        ...                                     **facts)]
        [True, True]
        >>> [p.ok for p in changelog_with_cache({"cache off": 5_000, "cache on": 40}, **facts)]
        [False, False]
    """
    found, refused = _dict_answer(answer, CACHE)
    if refused:
        return refused
    if None in (events, accepted, windows, cached):
        return [Point(False, "run the two apps first and pass events=..., accepted=..., "
                             "windows=..., cached=... (the cell does it)")]
    off, on = count(found["cache off"]), count(found["cache on"])
    dropped = events - accepted
    if off is None:
        first = Point(False, f"cache off: {found['cache off']!r} is not a number of records")
    elif off == accepted:
        first = Point(True, f"cache off: {accepted:,}, one changelog record per event the app "
                            f"aggregated (the {events:,} events less the {dropped} it dropped: "
                            "malformed, or later than the grace)")
    else:
        hint = {events: "that counts the events Kafka Streams dropped too (malformed, or "
                        "later than the grace): look at dropped-records-total",
                windows: "that is one record per (key, window): the cache folds updates, "
                         "and it is off"}.get(off, "with the cache off every update reaches the "
                                                   "store and its changelog: one per event")
        first = Point(False, f"cache off: {off:,} is not what was measured ({accepted:,}): "
                             f"{hint}")
    if on is None:
        second = Point(False, f"cache on: {found['cache on']!r} is not a number of records")
    elif windows <= on <= accepted:
        second = Point(True, f"cache on: between one record per (key, window) ({windows:,}) "
                             f"and one per event ({accepted:,}): updates to a window between "
                             f"two commits fold into one; measured {cached:,}")
    else:
        why = ("fewer than the (key, window) the store ever held: each reaches the changelog "
               "at least once" if on < windows else
               "more than one per event: the cache only folds updates, it adds none")
        second = Point(False, f"cache on: {on:,} is {why} (measured {cached:,})")
    return [first, second]


# --- 14.2 --------------------------------------------------------------------------------------
def _segment_ms(answer: object, store: str) -> int | None:
    """A segment named by its folder (``aggregate.1767612600000``), its start in ms, or its
    start as a time (``"2026-01-05 11:30"``)."""
    text = words(answer)
    if text is not None and text.startswith(f"{store}."):
        answer = text[len(store) + 1:]
    number = whole(answer)
    if number is not None:
        return number
    stamp = instant(answer) if isinstance(answer, str | pd.Timestamp) else None
    return None if stamp is None else int(stamp.value // 1_000_000)


@exercise("14.2", "Read a window store's segments: the oldest segment kept", NOTEBOOK,
          "predict")
def oldest_segment(answer: object, *, stores: pd.DataFrame | None = None, partition: int = 0,
                   stream_time_ms: int | None = None, retention_ms: int | None = None,
                   store: str = "aggregate"):
    """``answer``: the oldest segment folder task ``partition``'s store keeps (its folder name,
    its start in ms, or its start as a time). ``stores``: ``open_kafka_streams(...).stores()``
    of the closed app (the real directory); ``stream_time_ms``: the task's stream time;
    ``retention_ms``: the store's retention.

    Example:
        >>> stores = pd.DataFrame({"partition": [0], "store": ["aggregate"], "segments": [[
        ...     "aggregate.1767612600000", "aggregate.1767613200000"]]})
        >>> facts = dict(stores=stores, stream_time_ms=1_767_614_100_000,
        ...              retention_ms=1_200_000)
        >>> [p.ok for p in oldest_segment("2026-01-05 11:30", **facts)]
        [True]
        >>> [p.ok for p in oldest_segment(1_767_612_900_000, **facts)]
        [False]
    """
    if stores is None or stream_time_ms is None or retention_ms is None:
        return [Point(False, "open the closed app's state directory first and pass stores=..., "
                             "stream_time_ms=..., retention_ms=... (the cell does it)")]
    row = stores[(stores["partition"] == partition) & (stores["store"] == store)]
    on_disk = sorted(int(s.rsplit(".", 1)[1]) for s in row["segments"].iloc[0])
    said = _segment_ms(answer, store)
    interval = segment_interval_ms(retention_ms)
    rule = int(oldest_live_segment(stream_time_ms, retention_ms, store).rsplit(".", 1)[1])
    if said is None:
        return [Point(False, f"{answer!r} names no segment: give its folder "
                             f"({store}.<start ms>), its start in ms or as a time")]
    folders = ", ".join(f"{store}.{s}" for s in on_disk)
    if said == on_disk[0]:
        return [Point(True, f"{store}.{said}: (stream time − retention) // interval × interval "
                            f"= ({stream_time_ms} − {retention_ms}) // {interval} × {interval};"
                            f" the directory keeps {folders}"
                            + ("" if rule == on_disk[0] else
                               f" (the rule gives {store}.{rule}: the directory disagrees)"))]
    if said == stream_time_ms - retention_ms:
        hint = "that is stream time − retention itself: a segment goes as a whole, so round " \
               "down to the segment interval"
    elif said % interval:
        hint = f"segments start at multiples of the interval, max(retention / 2, 60 s) = " \
               f"{interval // 1000} s"
    elif said < on_disk[0]:
        hint = "older than what Kafka Streams keeps: a segment is dropped once it ends " \
               "before stream time − retention (the changelog's extra retention is the " \
               "topic's, not the store's)"
    else:
        hint = "too new: the store still keeps an older segment"
    return [Point(False, f"{store}.{said}: {hint}; the directory keeps {folders}")]


# --- 14.3 --------------------------------------------------------------------------------------
WHY_ROUTING = Choices(
    {"a": "Spark hashes with murmur3 and Kafka Streams with murmur2: the same key gets another "
          "partition number, but each engine keeps all its windows together",
     "b": "Spark hashes the window together with the key, so each of the key's windows may "
          "land on another partition; Kafka Streams hashes the key alone",
     "c": "Kafka Streams keeps each window in its own time segment, so its windows spread too"},
    right="b",
    why={"a": "the hash functions do differ, but that alone would keep a key's windows in one "
              "partition on Spark too: Spark's grouping values include the window",
         "b": "right: Spark's state is partitioned by every grouping value, the window first; "
              "the repartition topic of Kafka Streams is keyed by the key alone",
         "c": "segments split a task's store by time, inside one partition: the key stays in "
              "its partition"})
ROUTING_KEYS = ("player", "why")


@exercise("14.3", "Find a key whose routing differs between the engines, and say why",
          NOTEBOOK, "review")
def routing_differs(answer: object, *, placement: pd.DataFrame | None = None, key: str = "player"):
    """``answer``: {"player": a key whose windows Spark keeps in several partitions while
    Kafka Streams keeps them in one, "why": a letter of ``WHY_ROUTING``}. ``placement``:
    ``SideBySide.placement()``.

    Example:
        >>> placement = pd.DataFrame({"player": ["p00", "p01"], "windows": [2, 2],
        ...                           "spark_partitions": [1, 2],
        ...                           "kafka_streams_partitions": [1, 1]})
        >>> [p.ok for p in routing_differs({"Player": " P01 ", "why": "(B)"},
        ...                                placement=placement)]
        [True, True]
        >>> [p.ok for p in routing_differs({"player": "p00", "why": "a"}, placement=placement)]
        [False, False]
    """
    found, refused = _dict_answer(answer, ROUTING_KEYS)
    if refused:
        return refused
    if placement is None:
        return [Point(False, "compare the engines first and pass placement=both.placement() "
                             "(the cell does it)")]
    players = {words(str(p)): p for p in placement[key]}
    said = players.get(words(str(found["player"])))
    if said is None:
        first = Point(False, f"{found['player']!r} is no {key} both engines hold")
    else:
        row = placement[placement[key] == said].iloc[0]
        spread = int(row["spark_partitions"]) > 1 and int(row["kafka_streams_partitions"]) == 1
        first = Point(spread, f"{said}: {int(row['windows'])} windows, in "
                              f"{int(row['spark_partitions'])} Spark partition(s) and "
                              f"{int(row['kafka_streams_partitions'])} Kafka Streams partition"
                              + ("" if spread else ": no difference to see in this key"))
    if letter(found["why"]) is None:
        return [first, Point(False, f"why: {found['why']!r} is not one of the choices: a, b, c")]
    return [first, *WHY_ROUTING.judge(found["why"])]
