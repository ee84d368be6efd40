"""What the typed stores share, over a bytes ``Backend``: identity, raw writes,
checkpoints, iterator accounting, ``to_pandas`` and closing.

Example:
    >>> from statekit.stores import InMemoryKeyValueStore
    >>> store = InMemoryKeyValueStore("totals", key_columns=["player"])
    >>> store.write_raw([(b'{"player":"p07"}', b'{"total":5}')])
    1
    >>> store.to_pandas()
      player  total
    0    p07      5
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Mapping

from statekit._lazy import pa, pd
from statekit.changelog.arrow import json_table, table_to_pandas
from statekit.errors import StoreClosed
from statekit.model.changelog_record import TIME_COLUMNS
from statekit.stores.backend import Backend
from statekit.stores.base import RawRecord, StateStore
from statekit.stores.iterators import IteratorTracker, StoreIterator
from statekit.stores.metadata import StoreMetadata


class BackedStore(StateStore):
    """The common part of every store; subclasses add the typed methods of their kind."""

    def __init__(self, backend: Backend, metadata: StoreMetadata):
        self._backend: Backend | None = backend
        self.metadata = metadata
        self._tracker = IteratorTracker(f"{metadata.name}/{metadata.partition}")

    # --- identity ---------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def partition(self) -> int:
        return self.metadata.partition

    @property
    def key_columns(self) -> tuple[str, ...]:
        return self.metadata.key_columns

    @property
    def value_columns(self) -> tuple[str, ...] | None:
        return self.metadata.value_columns

    @property
    def is_open(self) -> bool:
        return self._backend is not None

    @property
    def open_iterators(self) -> int:
        return self._tracker.open_count

    def _open(self) -> Backend:
        backend = self._backend
        if backend is None:
            raise StoreClosed(self.metadata.describe())
        return backend

    def _iterate(self, lower: bytes | None, upper: bytes | None,
                 convert: Callable[[bytes, bytes], object] | None) -> StoreIterator:
        return StoreIterator(self._open().scan(lower, upper), self._tracker, convert)

    # --- raw bytes, checkpoint ----------------------------------------------------------
    def write_raw(self, records: Iterable[RawRecord]) -> int:
        return self._open().write(records)

    def get_raw(self, key: bytes) -> bytes | None:
        return self._open().get(key)

    def approximate_num_entries(self) -> int:
        return self._open().count()

    def read_checkpoint(self) -> dict[int, int]:
        return self._open().read_checkpoint()

    def write_checkpoint(self, offsets: Mapping[int, int]) -> None:
        backend = self._open()
        backend.flush()  # the data first: a checkpoint never runs ahead of what is durable
        backend.write_checkpoint(offsets)

    # --- pandas -------------------------------------------------------------------------
    def to_arrow(self) -> pa.Table:
        keys, values = [], []
        scan = self._open().scan(None, None)
        try:
            for key, value in scan:
                keys.append(key)
                values.append(value)
        finally:
            getattr(scan, "close", lambda: None)()
        times = [c for c in self.key_columns if c in TIME_COLUMNS]  # in every key
        key_table, value_table = json_table(keys, times), json_table(values)
        columns = {name: key_table[name] for name in key_table.column_names}
        columns.update((name, value_table[name]) for name in value_table.column_names
                       if name not in columns)
        names = [c for c in (*self.key_columns, *(self.value_columns or ())) if c not in columns]
        for name in names:  # an empty store (or a column null everywhere): still there
            columns[name] = pa.nulls(len(keys))
        order = [*self.key_columns, *(self.value_columns or ())]
        order += [c for c in columns if c not in order]
        return pa.table({name: columns[name] for name in order})

    def to_pandas(self) -> pd.DataFrame:
        return table_to_pandas(self.to_arrow())

    # --- lifecycle ----------------------------------------------------------------------
    def flush(self) -> None:
        self._open().flush()

    def compact(self) -> None:
        self._open().compact()

    def close(self) -> None:
        backend, self._backend = self._backend, None
        if backend is None:
            return
        left = self._tracker.close_all()
        try:
            if left:
                warnings.warn(
                    f"store {self.metadata.describe()} closed with {left} open iterator(s); "
                    "they are closed now: close iterators with `with store.all() as it:` "
                    "or it.close()", ResourceWarning, stacklevel=2)
        finally:
            try:
                backend.flush()
            finally:
                backend.close()

    def __repr__(self) -> str:
        state = "open" if self.is_open else "closed"
        return f"<{type(self).__name__} {self.metadata.describe()}, {state}>"
