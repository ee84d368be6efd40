"""The changelog writer's ledger: how far a checkpoint's changes have been shipped to a topic.

One file per (checkpoint, topic), at ``Checkpoint.ledger_path(topic)``, rewritten
atomically after every committed shipping round (and written fresh, nothing shipped,
before a checkpoint's first round). It records the last batch whose changes are all
in the topic, each Kafka partition's next offset after that round, and the last batch
that wrote to each partition (the ``statekit.prev`` header of the next record). A
writer reads it, then the few records past ``next_offset`` (a round a crash cut short,
or one committed but not recorded), and ships the rest.

Example:
    >>> import tempfile, os
    >>> ledger = Ledger(os.path.join(tempfile.mkdtemp(), "t.json"), "board-counts-changelog")
    >>> ledger.read() is None
    True
    >>> ledger.write(LedgerState.fresh("board-counts-changelog", {0: 0, 1: 0}))
    >>> ledger.read().last_batch, ledger.read().prev
    (-1, {0: -1, 1: -1})
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from statekit.atomic import VersionedJsonFile
from statekit.errors import ChangelogError
from statekit.validate import is_whole_number

KIND = "statekit.changelog.ledger"
VERSION = 1


@dataclass(frozen=True)
class LedgerState:
    """The ledger: the topic, the last shipped batch, per-partition next offsets and batches."""

    topic: str
    last_batch: int
    next_offset: Mapping[int, int]
    prev: Mapping[int, int]

    @classmethod
    def fresh(cls, topic: str, ends: Mapping[int, int]) -> LedgerState:
        """Nothing shipped yet; the topic's partitions end at ``ends``."""
        return cls(topic, -1, dict(ends), dict.fromkeys(ends, -1))

    @property
    def partitions(self) -> int:
        return len(self.next_offset)

    def after_round(self, last_batch: int, prev: Mapping[int, int],
                    next_offset: Mapping[int, int]) -> LedgerState:
        """The state after a committed round that shipped up to ``last_batch``."""
        return replace(self, last_batch=last_batch, prev=dict(prev),
                       next_offset=dict(next_offset))


class Ledger:
    """The ledger file of one changelog ``topic`` (versioned JSON, written atomically)."""

    def __init__(self, path: str | os.PathLike, topic: str,
                 remedy: str | Callable[[], str] | None = None):
        self.topic = topic
        self.file = VersionedJsonFile(
            path, KIND, VERSION, error=ChangelogError,
            remedy=remedy or f"delete it and the topic {topic!r} to ship every retained batch "
                             f"again")

    @property
    def path(self) -> str:
        return str(self.file.path)

    def read(self) -> LedgerState | None:
        """The ledger, or None when nothing was shipped from this checkpoint to ``topic``."""
        data = self.file.read()
        if data is None:
            return None
        try:
            state = LedgerState(
                topic=data["topic"], last_batch=data["last_batch"],
                next_offset={int(p): o for p, o in data["next_offset"].items()},
                prev={int(p): b for p, b in data["prev"].items()})
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise self.file.bad(f"is missing or has a bad field ({exc!r})") from None
        numbers = [state.last_batch, *state.next_offset.values(), *state.prev.values()]
        if not all(is_whole_number(n) for n in numbers) or \
                set(state.next_offset) != set(state.prev):
            raise self.file.bad(f"holds values that are not batch ids and offsets: {data}")
        if state.topic != self.topic:
            raise self.file.bad(f"is the ledger of topic {state.topic!r}, not {self.topic!r}")
        return state

    def write(self, state: LedgerState) -> None:
        """Replace the ledger with ``state``."""
        self.file.write({
            "topic": state.topic, "last_batch": int(state.last_batch),
            "next_offset": {str(p): int(o) for p, o in sorted(state.next_offset.items())},
            "prev": {str(p): int(b) for p, b in sorted(state.prev.items())}})

    def delete(self) -> None:
        self.file.delete()
