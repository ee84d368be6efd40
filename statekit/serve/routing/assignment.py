"""Which serving instance owns which state partition: the active owner and its standbys.

Kafka Streams assigns tasks (one per input partition) to instances, with
``num.standby.replicas`` standbys each on other instances; a key's queries go
to the instance that owns its partition. Here a partition is a Spark state
partition (= a changelog partition): an instance holds the partition's store
when it is the partition's **active** owner or one of its **standbys**. Both
keep the store current from the changelog the same way — in Spark the query
itself writes the state, not the serving instance — so "active" means "answers
the partition's queries", and a standby answers when the active one is gone.

An ``Assignment`` is a plain value: made by ``assign``, changed by ``without``
(an instance died: its active partitions go to a standby, lost standbys are
re-created on the least loaded live instances), and carried as JSON.

Example:
    >>> plan = assign(partitions=4, instances=["i0", "i1", "i2"], standbys=1)
    >>> plan.active
    {0: 'i0', 1: 'i1', 2: 'i2', 3: 'i0'}
    >>> plan.standbys
    {0: ('i1',), 1: ('i2',), 2: ('i0',), 3: ('i1',)}
    >>> after = plan.without("i1")
    >>> after.active[1], after.standbys[1], after.version
    ('i2', ('i0',), 2)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from statekit.errors import BadArgument
from statekit.validate import whole_number

ROLES = ("active", "standby")


@dataclass(frozen=True)
class Assignment:
    """partition → active instance, partition → standby instances; ``version`` counts changes."""

    active: Mapping[int, str]
    standbys: Mapping[int, tuple[str, ...]]
    instances: tuple[str, ...]
    version: int = 1
    lost: tuple[int, ...] = field(default=())  # partitions no live instance holds

    @property
    def partitions(self) -> int:
        return len(self.active) + len(self.lost)

    def role(self, instance: str, partition: int) -> str | None:
        """``active``, ``standby`` or None: what ``instance`` is for ``partition``."""
        if self.active.get(partition) == instance:
            return "active"
        if instance in self.standbys.get(partition, ()):
            return "standby"
        return None

    def held_by(self, instance: str) -> dict[int, str]:
        """The partitions ``instance`` holds, with its role for each."""
        held = {p: "active" for p, owner in self.active.items() if owner == instance}
        for p, replicas in self.standbys.items():
            if instance in replicas:
                held[p] = "standby"
        return dict(sorted(held.items()))

    def owners(self, partition: int) -> list[str]:
        """The instances that can answer for ``partition``: the active one first."""
        active = self.active.get(partition)
        return ([active] if active else []) + list(self.standbys.get(partition, ()))

    def without(self, dead: str) -> Assignment:
        """The assignment after instance ``dead`` died.

        Each partition it owned goes to its first live standby (promotion); each
        standby it held, and each promoted standby, is replaced on the live instance
        holding the fewest partitions, so partitions keep their standby count when
        there are instances to spare. A partition with no live holder is ``lost``.
        """
        if dead not in self.instances:
            raise BadArgument("instance", dead, self.instances)
        live = tuple(i for i in self.instances if i != dead)
        wanted = max((len(r) for r in self.standbys.values()), default=0)
        active, standbys, lost = {}, {}, list(self.lost)
        for p in range(self.partitions):
            holders = [i for i in self.owners(p) if i != dead]
            if not holders:
                lost.append(p)
                continue
            active[p] = holders[0]
            standbys[p] = tuple(holders[1:])
        load = {i: 0 for i in live}
        for p, owner in active.items():
            load[owner] += 1
            for i in standbys[p]:
                load[i] += 1
        for p in sorted(active):
            while len(standbys[p]) < min(wanted, len(live) - 1):
                spare = min((i for i in live if i != active[p] and i not in standbys[p]),
                            key=lambda i: (load[i], live.index(i)))
                standbys[p] += (spare,)
                load[spare] += 1
        return Assignment(active, standbys, live, self.version + 1, tuple(sorted(set(lost))))

    def to_dict(self) -> dict:
        return {"active": {str(p): i for p, i in sorted(self.active.items())},
                "standbys": {str(p): list(r) for p, r in sorted(self.standbys.items())},
                "instances": list(self.instances), "version": self.version,
                "lost": list(self.lost)}

    @classmethod
    def from_dict(cls, data: Mapping) -> Assignment:
        try:
            return cls({int(p): i for p, i in data["active"].items()},
                       {int(p): tuple(r) for p, r in data["standbys"].items()},
                       tuple(data["instances"]), int(data["version"]),
                       tuple(int(p) for p in data.get("lost", ())))
        except (KeyError, TypeError, ValueError, AttributeError):
            raise BadArgument("assignment", data, "a dict as Assignment.to_dict() writes "
                                                  "(active, standbys, instances, version)"
                              ) from None

    def to_frame(self):
        """One row per (partition, instance): ``partition``, ``instance``, ``role``."""
        import pandas as pd

        rows = [(p, i, "active") for p, i in self.active.items()]
        rows += [(p, i, "standby") for p, r in self.standbys.items() for i in r]
        frame = pd.DataFrame(rows, columns=["partition", "instance", "role"])
        return frame.sort_values(["partition", "role", "instance"], ignore_index=True)


def check_standbys(standbys: object, instances: int) -> int:
    """``standbys`` when each partition's standbys fit on the other instances: 0 to
    ``instances - 1`` (None: one when there is another instance, else none); else
    BadArgument naming it and that range.

    Example:
        >>> check_standbys(None, instances=1), check_standbys(None, instances=3)
        (0, 1)
        >>> check_standbys(5, instances=2)
        Traceback (most recent call last):
        ...
        statekit.errors.BadArgument: bad standbys: 5; accepted: a number of standbys from 0 \
to 1 (each on another of the 2 instances)
    """
    if standbys is None:
        return min(1, instances - 1)
    return whole_number(standbys, "standbys", minimum=0, maximum=instances - 1,
                        accepted=f"a number of standbys from 0 to {instances - 1} (each on "
                                 f"another of the {instances} instances)")


def assign(partitions: int, instances: Sequence[str], standbys: int = 1) -> Assignment:
    """Round-robin: partition ``p`` active on instance ``p % n``, standbys on the next ones.

    Raises BadArgument when ``standbys`` needs more instances than there are.
    """
    partitions = whole_number(partitions, "partitions", minimum=1)
    names = tuple(instances)
    if not names or len(set(names)) != len(names) or not all(
            isinstance(n, str) and n for n in names):
        raise BadArgument("instances", instances, "one or more distinct instance names")
    standbys = check_standbys(standbys, len(names))
    n = len(names)
    active = {p: names[p % n] for p in range(partitions)}
    replicas = {p: tuple(names[(p + k) % n] for k in range(1, standbys + 1))
                for p in range(partitions)}
    return Assignment(active, replicas, names)
