"""Standbys placed away from their active owner's rack or zone, as Kafka Streams' rack-aware
standby assignment does.

Kafka Streams gives each instance tags (``client.tag.zone=eu-1a``) and names the tags that
matter (``rack.aware.assignment.tags=zone``); a standby then goes to an instance whose
value of each such tag differs from the active owner's (and from the other standbys'), as
far as the instances allow, the least loaded first. statekit's ``assign`` is round-robin: the
next instance in order, whatever its zone — when instances are listed zone by zone, an
active and its standby often share one, and that zone's outage takes both.

``rack_aware_assign`` keeps ``assign``'s active owners and places the standbys by tags;
``zone_outages`` counts, for each value of a tag, the partitions left with no holder when
every instance with that value goes down at once.

Example:
    >>> zones = {"i0": {"zone": "a"}, "i1": {"zone": "a"}, "i2": {"zone": "b"},
    ...          "i3": {"zone": "b"}}
    >>> rack_aware_assign(4, zones).standbys
    {0: ('i2',), 1: ('i3',), 2: ('i0',), 3: ('i1',)}
    >>> zone_outages(assign(4, list(zones)), zones)["partitions_lost"].tolist()
    [1, 1]
    >>> zone_outages(rack_aware_assign(4, zones), zones)["partitions_lost"].tolist()
    [0, 0]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from statekit._lazy import pd
from statekit.errors import BadArgument
from statekit.serve.routing.assignment import Assignment, assign, check_standbys


def _tags(tags: Mapping[str, Mapping[str, str]], keys: Sequence[str] | None
          ) -> tuple[tuple[str, ...], tuple[str, ...]]:
    if not isinstance(tags, Mapping) or not tags:
        raise BadArgument("tags", tags, "instance name → {tag: value}, e.g. "
                                        "{'i0': {'zone': 'a'}, 'i1': {'zone': 'b'}}")
    names = tuple(tags)
    keys = tuple(keys) if keys is not None else tuple(sorted({k for t in tags.values()
                                                              for k in t}))
    for name in names:
        missing = [k for k in keys if k not in (tags[name] or {})]
        if missing:
            raise BadArgument(f"tags of instance {name!r}", dict(tags[name] or {}),
                              f"a value for every tag of rack.aware.assignment.tags: "
                              f"{', '.join(keys)}")
    if not keys:
        raise BadArgument("tag keys", list(keys), "one or more tag names, e.g. ['zone']")
    return names, keys


def rack_aware_assign(partitions: int, tags: Mapping[str, Mapping[str, str]],
                      standbys: int = 1, keys: Sequence[str] | None = None) -> Assignment:
    """``assign``'s active owners; each standby on the instance whose tag values (``keys``:
    every tag when None) differ most from the active's and the chosen standbys', then the
    least loaded, then the first in order."""
    names, keys = _tags(tags, keys)
    standbys = check_standbys(standbys, len(names))
    plan = assign(partitions, names, 0)
    load = {n: 0 for n in names}
    for owner in plan.active.values():
        load[owner] += 1
    replicas: dict[int, tuple[str, ...]] = {}
    for p, owner in plan.active.items():
        chosen: list[str] = []
        used = {k: {tags[owner][k]} for k in keys}
        for _ in range(standbys):
            candidates = [n for n in names if n != owner and n not in chosen]
            best = min(candidates, key=lambda n: (
                -sum(tags[n][k] not in used[k] for k in keys), load[n], names.index(n)))
            chosen.append(best)
            load[best] += 1
            for k in keys:
                used[k].add(tags[best][k])
        replicas[p] = tuple(chosen)
    return Assignment(dict(plan.active), replicas, names)


def zone_outages(plan: Assignment, tags: Mapping[str, Mapping[str, str]],
                 key: str = "zone") -> pd.DataFrame:
    """For each value of tag ``key``: ``instances_down`` (every instance with it) and
    ``partitions_lost`` (no live holder left), with the lost ``partitions``."""
    names, _ = _tags(tags, [key])
    rows = []
    for value in sorted({tags[n][key] for n in names}):
        down = [n for n in names if tags[n][key] == value]
        # all at once: no time to re-create a standby elsewhere (``Assignment.without``)
        lost = [p for p in range(plan.partitions)
                if all(holder in down for holder in plan.owners(p))]
        rows.append({key: value, "instances_down": ", ".join(down),
                     "partitions_lost": len(lost), "partitions": lost})
    return pd.DataFrame(rows, columns=[key, "instances_down", "partitions_lost", "partitions"])
