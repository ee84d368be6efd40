"""bench.tail's pure part: the check that every record of a tail run arrived exactly once."""

from __future__ import annotations

import doctest

import pytest

from bench import tail


def whole(rounds: int = 2, per_partition: int = 3) -> dict[int, list[int]]:
    return {p: list(range(rounds * per_partition)) for p in range(tail.PARTITIONS)}


def test_every_offset_once_and_in_order_passes():
    assert tail.exactly_once(whole(), 2, 3)


def test_partitions_listed_in_another_order_still_pass():
    offsets = dict(reversed(list(whole().items())))
    assert list(offsets) == [3, 2, 1, 0] and tail.exactly_once(offsets, 2, 3)


@pytest.mark.parametrize("broken", [
    lambda o: o[1].append(5),                   # a record twice
    lambda o: o[2].remove(4),                   # a record missing
    lambda o: o[0].reverse(),                   # out of order
    lambda o: o.pop(3),                         # a partition never read
    lambda o: o.update({4: [0, 1, 2, 3, 4, 5]}),  # a partition that is not the topic's
    lambda o: o[0].append(6),                   # more than the rounds produced
], ids=["duplicate", "gap", "reordered", "partition-missing", "extra-partition", "extra"])
def test_each_wrong_read_is_refused(broken):
    offsets = whole()
    broken(offsets)
    assert not tail.exactly_once(offsets, 2, 3)


def test_the_docstring_examples_hold():
    assert doctest.testmod(tail).failed == 0
