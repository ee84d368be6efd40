"""Offsets of the Kafka source: its offset options, and a micro-batch's ranges planned.

Offsets are kept as Spark keeps them in the checkpoint: topic → partition (a string) →
offset. ``marks`` are the broker's answer: topic → partition → (low, end).

Example:
    >>> marks = {"games": {0: (5, 100), 1: (0, 40)}}
    >>> starting_offsets('{"games": {"0": 42, "1": -1}}', marks)
    {'games': {'0': 42, '1': 40}}
    >>> cap_offsets({"games": {"0": 0, "1": 0}}, log_ends(marks), 70)
    {'games': {'0': 50, '1': 20}}
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass

from pyspark.sql.datasource import InputPartition

from statekit.errors import BadArgument

EARLIEST, LATEST = -2, -1


@dataclass(frozen=True)
class KafkaInputPartition(InputPartition):
    """Records ``[start, end)`` of one topic-partition."""

    topic: str
    partition: int
    start: int
    end: int
    bootstrap_servers: str
    client_config: tuple[tuple[str, str], ...]
    fail_on_data_loss: bool


@dataclass(frozen=True)
class KafkaReadTask(InputPartition):
    """One Spark task: offset ranges read one after another with one consumer."""

    ranges: tuple[KafkaInputPartition, ...]

    @property
    def records(self) -> int:
        return sum(r.end - r.start for r in self.ranges)


def pack_ranges(ranges: list[KafkaInputPartition], tasks: int) -> list[KafkaReadTask]:
    """At most ``tasks`` read tasks of similar size (largest range first into the lightest).

    Example:
        >>> rs = [KafkaInputPartition("t", p, 0, n, "b:9092", (), True)
        ...       for p, n in enumerate([50, 40, 30, 20])]
        >>> [t.records for t in pack_ranges(rs, 2)]
        [70, 70]
    """
    tasks = max(1, min(tasks, len(ranges)))
    bins: list[list[KafkaInputPartition]] = [[] for _ in range(tasks)]
    sizes = [0] * tasks
    for r in sorted(ranges, key=lambda r: (-(r.end - r.start), r.topic, r.partition)):
        i = sizes.index(min(sizes))
        bins[i].append(r)
        sizes[i] += r.end - r.start
    return [KafkaReadTask(tuple(sorted(b, key=lambda r: (r.topic, r.partition))))
            for b in bins if b]


def starting_offsets(option: str, marks: dict[str, dict[int, tuple[int, int]]]) -> dict:
    """Option startingOffsets (``earliest``, ``latest`` or JSON) resolved against ``marks``."""
    if option in ("earliest", "latest"):
        pick = 0 if option == "earliest" else 1
        return {t: {str(p): lh[pick] for p, lh in parts.items()} for t, parts in marks.items()}
    try:
        wanted = json.loads(option)
        assert isinstance(wanted, dict)
    except (ValueError, AssertionError):
        raise BadArgument(
            "option startingOffsets", option,
            'earliest, latest, or JSON like {"topic": {"0": 42, "1": -2}}') from None
    result = {}
    for topic, parts in marks.items():
        given = wanted.get(topic, {})
        result[topic] = {}
        for p, (low, end) in parts.items():
            off = int(given.get(str(p), EARLIEST))
            result[topic][str(p)] = low if off == EARLIEST else end if off == LATEST else off
    return result


def ending_offsets(option: str | None) -> dict[str, dict[str, int]]:
    """Option endingOffsets as topic → partition (a string) → offset; {} when not given."""
    if option is None:
        return {}
    with contextlib.suppress(ValueError):
        given = json.loads(option)
        if isinstance(given, dict) and all(
                isinstance(parts, dict) and all(
                    p.isdigit() and type(off) is int and off >= 0 for p, off in parts.items())
                for parts in given.values()):
            return {t: {str(int(p)): off for p, off in parts.items()}
                    for t, parts in given.items()}
    raise BadArgument("option endingOffsets", option,
                      'JSON like {"topic": {"0": 500}} (partition → offset, a whole number >= 0)')


def log_ends(marks: dict[str, dict[int, tuple[int, int]]]) -> dict:
    """Each partition's end offset in ``marks``: topic → partition (a string) → offset."""
    return {t: {str(p): end for p, (_, end) in parts.items()} for t, parts in marks.items()}


def cap_offsets(start: dict, end: dict, budget: int) -> dict:
    """End offsets that read at most ``budget`` records, shared in proportion to what waits.

    ``start`` and ``end``: topic → partition (a string) → offset."""
    pending = {(t, p): end[t][p] - start[t][p] for t in end for p in end[t]}
    total = sum(pending.values())
    if total <= budget:
        return end
    capped = {t: dict(parts) for t, parts in start.items()}
    given = 0
    for (t, p), n in sorted(pending.items()):
        share = budget * n // total
        capped[t][p] = start[t][p] + share
        given += share
    for (t, p), _ in sorted(pending.items(), key=lambda kv: -kv[1]):  # hand out the remainder
        if given >= budget:
            break
        if capped[t][p] < end[t][p]:
            capped[t][p] += 1
            given += 1
    return capped
