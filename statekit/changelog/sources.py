"""What a changelog writer ships from: the committed changes of one store, and what it holds.

``ChangelogWriter`` ships the change feed of one store to one topic. Where the changes come
from is a ``ChangeSource``:

* ``QueryChanges``: a statekit query's store (``StateReader``; its ``QuerySpec`` says the
  columns, and a windowed store's topic is ``compact,delete`` with a retention);
* ``PartChanges``: one part of any operator of an attached query (``statekit.inspect``'s
  ``StateView``: an aggregation's store, a deduplication's keys, a join's stores, group
  state, a transformWithState variable or its timers), described by a ``meta.PartShape``.
  A part whose key holds a list of rows (a join side, a list state, the timers:
  ``statekit.inspect.lists``) ships one record per key, its whole list after the batch
  (value column ``rows``). Its topic is
  ``compact``: Spark removes what the part no longer holds with deletes, which become
  tombstones, so compaction alone bounds it. Its ledger lives in a folder statekit owns,
  never in the person's checkpoint.

Example:
    >>> source = QueryChanges(query.reader)                                # doctest: +SKIP
    >>> source.key_columns, source.value_columns                          # doctest: +SKIP
    (['player', 'window_start', 'window_end'], ['count', 'sum_score', 'max_score'])
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from pyspark.sql import DataFrame

from statekit.changelog import meta, naming
from statekit.durations import to_millis
from statekit.errors import StatekitError
from statekit.inspect.hashed_columns import placement_columns
from statekit.inspect.lists import (
    ROWS,
    diffs_snapshots,
    holds_lists,
    list_changes_frame,
    snapshot_diff_frame,
)
from statekit.inspect.part_views import StateView
from statekit.model import changelog_record as codec
from statekit.spark_state.checkpoint import Checkpoint
from statekit.spark_state.state_reader import StateReader

#: Ledger file of a topic in a ledger folder (one owner of the name)
LEDGER_SUFFIX = ".json"


class ChangeSource(Protocol):
    """The store a writer ships: its checkpoint, committed changes and description."""

    checkpoint: Checkpoint

    @property
    def operator_id(self) -> int: ...

    @property
    def key_columns(self) -> list[str]: ...

    @property
    def value_columns(self) -> list[str]: ...

    def changes_frame(self, first: int, last: int) -> DataFrame: ...

    def ledger_path(self, topic: str) -> Path: ...

    def topic_config(self) -> dict[str, str]: ...

    def store_schema(self, batch: int) -> meta.StoreSchema: ...


def _key_types(frame: DataFrame, keys: list[str]) -> dict[str, str]:
    return {f.name: f.dataType.simpleString() for f in frame.schema.fields if f.name in keys}


class QueryChanges:
    """The store of a statekit query (``StateReader``), as a writer ships it."""

    def __init__(self, state: StateReader):
        self.state, self.checkpoint = state, state.checkpoint

    @property
    def operator_id(self) -> int:
        return self.state.operator_id

    @property
    def key_columns(self) -> list[str]:
        return codec.changelog_key_columns(self.state.spec.key_columns)

    @property
    def value_columns(self) -> list[str]:
        return list(self.state.spec.value_columns)

    def changes_frame(self, first: int, last: int) -> DataFrame:
        return self.state.changes_frame(first, last)

    def ledger_path(self, topic: str) -> Path:
        return self.checkpoint.ledger_path(topic)

    def retention_ms(self) -> int:
        """How long a windowed changelog keeps records: window + watermark delay + 1 day
        (Kafka Streams keeps a window store's changelog for the store's retention plus
        ``windowstore.changelog.additional.retention.ms``, 1 day by default)."""
        spec = self.state.spec
        return spec.window.size_ms + to_millis(spec.watermark) + naming.ADDITIONAL_RETENTION_MS

    def topic_config(self) -> dict[str, str]:
        windowed = self.state.spec.window is not None  # a key-value store keeps every key
        return naming.topic_config(windowed, self.retention_ms() if windowed else None)

    def store_schema(self, batch: int) -> meta.StoreSchema:
        spec = self.state.spec
        types = _key_types(self.state.snapshot_frame(batch), list(spec.keys))
        return meta.StoreSchema(spec, types, self.checkpoint.shuffle_partitions())


class PartChanges:
    """One part of an attached query's operator (an inspect ``StateView``), as a writer
    ships it; its ledgers go to ``ledger_dir`` (outside the checkpoint).

    A list-valued part (a join side, a list state, the timers) ships each touched key's
    whole list; ``touched_by`` are the views whose change feeds name the keys a batch
    touched (a join side's two stores; a list state's own change feed when not given).
    The writer assembles those lists from plain reads (``assembles_lists``:
    ``statekit.changelog.list_records``; ``changes_frame`` gives the same records built in
    Spark). The timers, which have no change feed, are diffed snapshot to snapshot.

    Raises ``UnsupportedRead`` (from the part) when Spark's reader gives no change feed
    for it and it cannot be diffed (a join side without the views of its stores).
    """

    def __init__(self, view: StateView, query: str, ledger_dir: str | os.PathLike,
                 touched_by: Sequence[StateView] = ()):
        part = view.part
        lists = holds_lists(part)
        self.touched_by = list(touched_by) or ([view] if lists else [])
        self.diffed = diffs_snapshots(part)
        limit = part.changes_limit()
        if limit is not None and not (lists and touched_by) and not self.diffed:
            raise limit
        self.view, self.checkpoint = view, view.checkpoint
        self.ledger_dir = Path(ledger_dir)
        schema = view.schema()
        hashed, _ = placement_columns(schema, part.store)
        values = schema[schema["role"] == "value"]
        self.shape = meta.PartShape(
            query, part.operator_id, part.operator, part.kind, part.what, part.name,
            tuple(view.key_columns), (ROWS,) if lists else tuple(view.value_columns),
            tuple(hashed),
            tuple(zip(values["column"], values["type"], strict=True)) if lists else ())

    @property
    def assembles_lists(self) -> bool:
        """True where the writer assembles the lists itself from the change feeds' touched
        keys and the part's rows (``statekit.changelog.list_records``): a list part with
        change feeds (not the timers)."""
        return self.shape.lists and not self.diffed

    @property
    def operator_id(self) -> int:
        return self.shape.operator_id

    @property
    def key_columns(self) -> list[str]:
        return list(self.shape.key_columns)

    @property
    def value_columns(self) -> list[str]:
        return list(self.shape.value_columns)

    def changes_frame(self, first: int, last: int) -> DataFrame:
        if self.diffed:
            return snapshot_diff_frame(self.view, first, last)
        if self.shape.lists:
            return list_changes_frame(self.view, self.touched_by, first, last)
        return self.view.changes_frame(first, last)

    def ledger_path(self, topic: str) -> Path:
        if self.ledger_dir.resolve().is_relative_to(Path(str(self.checkpoint)).resolve()):
            raise StatekitError(f"the ledger folder {str(self.ledger_dir)!r} is inside the "
                                f"query's checkpoint: statekit writes nothing there; choose "
                                f"a folder outside it")
        return self.ledger_dir / f"{topic}{LEDGER_SUFFIX}"

    def topic_config(self) -> dict[str, str]:
        return naming.topic_config(False)

    def store_schema(self, batch: int) -> meta.StoreSchema:
        types = _key_types(self.view.snapshot_frame(batch), self.key_columns)
        return meta.StoreSchema(None, types, self.checkpoint.shuffle_partitions(),
                                part=self.shape)


def change_source(state: StateReader | ChangeSource) -> ChangeSource:
    """``state`` as a ``ChangeSource`` (a ``StateReader`` is wrapped in ``QueryChanges``)."""
    return QueryChanges(state) if isinstance(state, StateReader) else state
