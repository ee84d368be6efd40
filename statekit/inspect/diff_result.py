"""What ``statekit.diff`` gives: ``StateDiff``, the keys added, removed and changed between
two snapshots with both values side by side, and the rules its two ways of computing share
(the kinds of change, the column names, the order of the rows).

Example:
    >>> import pandas as pd
    >>> frame = pd.DataFrame({"change": ["changed", "added"], "k": ["b", "a"]})
    >>> ordered(frame, ["k"])["change"].tolist()
    ['added', 'changed']
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pandas as pd

from statekit.errors import BadArgument

#: The kinds of change, in the order ``counts`` and ``frame`` give them.
KINDS = ("added", "removed", "changed", "unchanged")
CHANGE = "change"
#: Suffixes of a value column's two sides in ``StateDiff.frame``.
OLD, NEW = "_old", "_new"
#: columns of a snapshot that are neither key nor value
NOT_VALUES = ("partition", "batch", "change")


@dataclass(frozen=True)
class StateDiff:
    """What changed between two snapshots.

    Attributes:
        frame: one row per key that differs: ``change`` (``added``, ``removed``,
            ``changed``), the key columns, then each value column twice, ``<name>_old`` and
            ``<name>_new`` (missing on the side that has no such key: null).
        counts: keys of each kind, ``unchanged`` included (a Series indexed by ``KINDS``).
        key_columns, value_columns: the shape both snapshots share (``rows`` is the value
            of a key that holds a list).
        old, new: what each snapshot was (a checkpoint, a part, a batch).
        how: how it was computed: ``"change feed"`` (two batches of one store: the old
            snapshot and Spark's change feed of the batches between), ``"snapshots"`` (two
            snapshots joined by key in Spark) or ``"pandas frames"``.
        batches: the two batches (None for a frame that does not say).
    """

    frame: pd.DataFrame
    counts: pd.Series
    key_columns: list[str]
    value_columns: list[str]
    old: str
    new: str
    how: str
    batches: tuple[int | None, int | None] = field(default=(None, None))

    def __repr__(self) -> str:
        counts = ", ".join(f"{int(self.counts[k]):,} {k}" for k in KINDS)
        return (f"StateDiff({counts} (from the {self.how})\n  old: {self.old}\n"
                f"  new: {self.new})")

    def _repr_html_(self) -> str:
        counts = ", ".join(f"{int(self.counts[k]):,} {k}" for k in KINDS)
        head = self.frame.head(20).to_html(index=False, na_rep="&lt;NA&gt;", escape=True)
        return (f"<p><b>StateDiff</b>: {counts} (from the {self.how})<br>"
                f"old: {_escape(self.old)}<br>new: {_escape(self.new)}</p>{head}")

    def of(self, change: str) -> pd.DataFrame:
        """The rows of one kind (``added``, ``removed`` or ``changed``)."""
        if change not in KINDS[:3]:
            raise BadArgument("change", change, KINDS[:3])
        return self.frame[self.frame[CHANGE] == change].reset_index(drop=True)


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def shape_text(keys: Sequence[str], values: Sequence[str], types: dict[str, str]) -> str:
    return (f"key ({', '.join(f'{k} {types[k]}' for k in keys)}), value "
            f"({', '.join(f'{v} {types[v]}' for v in values)})")


def ordered(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Added, then removed, then changed; by key within each (where keys sort)."""
    order = pd.Categorical(frame[CHANGE], categories=list(KINDS[:3]), ordered=True)
    frame = frame.assign(**{CHANGE: order})
    try:
        frame = frame.sort_values([CHANGE, *keys], kind="stable", na_position="last")
    except TypeError:  # keys of mixed types: by kind only
        frame = frame.sort_values(CHANGE, kind="stable")
    frame[CHANGE] = frame[CHANGE].astype(str)
    return frame.reset_index(drop=True)
