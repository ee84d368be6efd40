"""How many brokers a partition can lose: Kafka's rule for replication factor,
min.insync.replicas and acks (pure; the broker's own reading of a topic is in the notebook)."""

from __future__ import annotations

import pytest

from statekit.errors import BadArgument
from statekit.kafka.replication import OFFLINE, REFUSED, WRITES, outcome, outcomes, survives_losing


@pytest.mark.parametrize(("rf", "isr", "acks", "down", "expected"), [
    (3, 2, "all", 0, WRITES), (3, 2, "all", 1, WRITES), (3, 2, "all", 2, REFUSED),
    (3, 2, "all", 3, OFFLINE), (3, 2, "1", 2, WRITES), (3, 2, "-1", 2, REFUSED),
    (3, 3, "all", 1, REFUSED), (1, 1, "all", 0, WRITES), (1, 1, "all", 1, OFFLINE),
    (3, 2, " ALL ", 1, WRITES)])
def test_what_a_partition_does_as_brokers_go_down(rf, isr, acks, down, expected):
    assert outcome(rf, isr, down, acks) == expected


def test_how_many_brokers_an_acknowledged_record_survives():
    assert survives_losing(3, 2) == 1
    assert survives_losing(3, 3) == 2
    assert survives_losing(1, 1) == 0
    assert survives_losing(3, 2, "1") == 0  # the leader alone acknowledged it


def test_the_grid_and_bad_input():
    grid = outcomes({"rf3": (3, 2, "all"), "rf1": (1, 1, "all")}, max_down=2)
    assert len(grid) == 6 and list(grid.columns) == ["setting", "brokers_down", "outcome",
                                                     "survives_losing"]
    with pytest.raises(BadArgument, match="acks"):
        outcome(3, 2, 0, "0")
    with pytest.raises(BadArgument, match="replication factor"):
        outcome(0, 1, 0)
    with pytest.raises(BadArgument, match="brokers down"):
        outcome(3, 2, -1)
    with pytest.raises(BadArgument, match="min.insync.replicas"):
        survives_losing(3, 0)
