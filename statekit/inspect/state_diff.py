"""What changed between two snapshots of state: keys added, removed and changed, both
values side by side.

``diff(old, new)`` takes two snapshots of the same shape: two batches of one query
(``diff((q, 3), (q, 5))``), the same operator in two checkpoints (before and after a code
change, a repartition, a rewrite: ``diff("/ck/before", "/ck/after")``), or two pandas
frames a ``snapshot()`` gave. A snapshot is named by

- a handle or reader (``start_query``'s and ``attach``'s queries, a processor query,
  ``open_checkpoint``'s ``CheckpointView``, a ``StateView``, a ``StateReader``) or a
  checkpoint path: its last committed batch;
- a pair ``(any of those, batch)``: that batch;
- a pandas frame a ``snapshot()`` returned (its ``attrs`` name the key columns; pass
  ``keys=`` for a frame of your own).

Two state sources are compared inside Spark, in one job: both snapshots are read, joined
by key (a null key meets a null key), and only the keys that differ come back to pandas,
with the count of every kind measured on the way (``Observation``). A key is compared by
its whole value; where a key holds a list (a join side, a list state, the timers), by its
whole list in the store's order. The store partition a key sits in is not compared.

Example:
    >>> d = diff((q, 3), (q, 5))                                         # doctest: +SKIP
    >>> d.counts                                                         # doctest: +SKIP
    added          2
    removed        1
    changed       14
    unchanged    183
    >>> d.frame.head(2)                                                  # doctest: +SKIP
        change player  count_old  count_new
    0    added     p9       <NA>          1
    1  changed     p1          4          6
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import pandas as pd

from statekit.errors import BadArgument, StatekitError
from statekit.inspect.diff_in_pandas import pandas_diff
from statekit.inspect.diff_in_spark import side, spark_diff
from statekit.inspect.diff_result import StateDiff  # noqa: F401 - what diff returns
from statekit.inspect.part_names import find_part
from statekit.inspect.part_views import StateView
from statekit.model.query_handle import is_query_handle
from statekit.spark_state.checkpoint import Checkpoint
from statekit.spark_state.state_reader import StateReader


def diff(old: object, new: object, *, part: str | None = None,
         keys: Sequence[str] | None = None) -> StateDiff:
    """Keys added, removed and changed from snapshot ``old`` to snapshot ``new``.

    Args:
        old, new: each a query handle, ``CheckpointView``, ``StateView``, ``StateReader``
            or checkpoint path (its last committed batch), a pair ``(one of those, batch)``,
            or a pandas frame from ``snapshot()``.
        part: which part of a query with several (``"<operator_id>/<name>"``, or a name
            only one operator has), the same on both sides.
        keys: the key columns of pandas frames whose ``attrs`` do not name them.

    Raises:
        BadArgument: the snapshots differ in shape (both shapes named), or a source
            statekit cannot read; BatchNotRetained: a batch the checkpoint no longer holds.

    Example:
        >>> old = pd.DataFrame({"player": ["p1", "p2"], "count": [3, 5]})
        >>> new = pd.DataFrame({"player": ["p2", "p3"], "count": [6, 1]})
        >>> d = diff(old, new, keys=["player"])
        >>> d.frame
            change player  count_old  count_new
        0    added     p3       <NA>          1
        1  removed     p1          3       <NA>
        2  changed     p2          5          6
        >>> d.counts.to_dict()
        {'added': 1, 'removed': 1, 'changed': 1, 'unchanged': 0}
    """
    if isinstance(old, pd.DataFrame) or isinstance(new, pd.DataFrame):
        return pandas_diff(_as_frame(old, part, "old"), _as_frame(new, part, "new"), keys)
    if keys is not None:
        raise BadArgument("keys", keys, "None: a state source names its own key columns "
                                        "(keys= is for pandas frames)")
    (old_source, old_batch), (new_source, new_batch) = _split(old, "old"), _split(new, "new")
    old_reader = _reader_of(old_source, part, "old")
    new_reader = _reader_of(new_source, part, "new")
    # a statekit query beside a plain checkpoint: both read with the query's column names
    if isinstance(old_reader, StateReader) and isinstance(new_reader, StateView):
        new_reader = _as_query_state(new_reader, old_reader)
    elif isinstance(new_reader, StateReader) and isinstance(old_reader, StateView):
        old_reader = _as_query_state(old_reader, new_reader)
    return spark_diff(side(old_reader, old_batch, "old"), side(new_reader, new_batch, "new"))


def _as_query_state(view: StateView, query_state: StateReader) -> StateView | StateReader:
    """``view`` read as a statekit query's state (its aggregates by name, as the query's
    side has them) where its state fits the query's spec; else ``view`` as it is."""
    reader = StateReader(view.spark, view.checkpoint, query_state.spec, view.operator_id)
    try:
        reader.snapshot_frame(view.checkpoint.check_batch(None)).schema  # noqa: B018
    except StatekitError:
        return view
    return reader


def _reader_of(source: object, part: str | None, which: str) -> StateView | StateReader:
    """The reader of one part of ``source`` (a handle, view, reader or checkpoint path)."""
    if isinstance(source, StateView | StateReader):
        if part is not None:
            raise BadArgument("part", part, f"None: {which} is already one part "
                                             f"({type(source).__name__})")
        return source
    if is_query_handle(source):  # start_query's, start_processor's, attach's
        return source.state(part)
    from statekit.inspect.view import CheckpointView, open_checkpoint

    if isinstance(source, str | os.PathLike | Checkpoint):
        view = open_checkpoint(source)
    elif isinstance(source, CheckpointView):
        view = source
    else:
        raise BadArgument(which, type(source).__name__, ACCEPTED)
    parts = view.parts()
    found = parts[0] if part is None and len(parts) == 1 else find_part(parts, part)
    return view.operator(found.operator_id).state(found.name)


ACCEPTED = ("a query handle (start_query, attach, start_processor), a CheckpointView, a "
            "StateView or StateReader, a checkpoint path, a pair (one of those, batch), or a "
            "pandas frame from snapshot()")


def _split(source: object, which: str) -> tuple[object, int | None]:
    if isinstance(source, tuple):
        if len(source) != 2:
            raise BadArgument(which, source, "a pair (source, batch)")
        return source[0], source[1]
    return source, None


def _as_frame(source: object, part: str | None, which: str) -> pd.DataFrame:
    if isinstance(source, pd.DataFrame):
        return source
    given, batch = _split(source, which)
    return _reader_of(given, part, which).snapshot(batch)
