"""Rack-aware standby placement: standbys away from their active owner's zone, and what one
zone's outage takes from each placement."""

from __future__ import annotations

import pytest

from statekit.errors import BadArgument
from statekit.serve.routing.assignment import assign
from statekit.serve.routing.rack_aware import rack_aware_assign, zone_outages

ZONES = {"i0": {"zone": "a", "rack": "r1"}, "i1": {"zone": "a", "rack": "r2"},
         "i2": {"zone": "b", "rack": "r3"}, "i3": {"zone": "b", "rack": "r4"}}


def test_actives_stay_round_robin_and_standbys_leave_the_zone():
    plan = rack_aware_assign(6, ZONES, keys=["zone"])
    assert plan.active == assign(6, list(ZONES), 0).active
    for p, owner in plan.active.items():
        [standby] = plan.standbys[p]
        assert ZONES[standby]["zone"] != ZONES[owner]["zone"]
    held = plan.to_frame().groupby("instance").size()
    assert held.max() - held.min() <= 1  # the least loaded first


def test_no_zone_outage_loses_a_partition_with_rack_awareness():
    assert zone_outages(rack_aware_assign(3, ZONES, keys=["zone"]), ZONES)[
        "partitions_lost"].tolist() == [0, 0]
    round_robin = zone_outages(assign(3, list(ZONES)), ZONES)
    assert round_robin["partitions_lost"].tolist() == [1, 1]
    assert round_robin["partitions"].tolist() == [[0], [2]]


def test_two_standbys_spread_over_every_tag_they_can():
    zones = {**ZONES, "i4": {"zone": "c", "rack": "r5"}}
    plan = rack_aware_assign(5, zones, standbys=2)
    for p, owner in plan.active.items():
        assert len({zones[i]["zone"] for i in (owner, *plan.standbys[p])}) == 3


def test_one_zone_falls_back_to_other_instances():
    same = {name: {"zone": "a"} for name in ZONES}
    plan = rack_aware_assign(4, same)
    assert all(plan.standbys[p][0] != plan.active[p] for p in range(4))


def test_bad_tags_are_named():
    with pytest.raises(BadArgument, match="instance name"):
        rack_aware_assign(3, {})
    with pytest.raises(BadArgument, match="rack.aware.assignment.tags: zone"):
        rack_aware_assign(3, {"i0": {"zone": "a"}, "i1": {}}, keys=["zone"])
    with pytest.raises(BadArgument, match="standbys"):
        rack_aware_assign(3, ZONES, standbys=4)
    with pytest.raises(BadArgument, match="tag"):
        zone_outages(assign(3, list(ZONES)), ZONES, key="region")
