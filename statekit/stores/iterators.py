"""Store iterators: context managers over a key range, closed deterministically.

Every iterator a store hands out is counted until it is closed: by ``close()``,
by leaving its ``with`` block, or by running to its end. Closing the store
closes the ones left open (and warns, see ``IteratorTracker.close_all``).

Example:
    >>> tracker = IteratorTracker("demo")
    >>> it = StoreIterator(iter([(b"a", b"1"), (b"b", b"2")]), tracker)
    >>> tracker.open_count
    1
    >>> with it:
    ...     next(it)
    (b'a', b'1')
    >>> tracker.open_count
    0
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from statekit.errors import StoreClosed

T = TypeVar("T")
#: What a converter returns for an entry the iterator should pass over.
SKIP = object()


class StoreIterator(Generic[T]):
    """The entries of one scan, converted by ``convert(key_bytes, value_bytes)``.

    ``convert`` returns the item to yield, or ``SKIP`` to pass an entry over.
    Use it in a ``with`` block (or call ``close()``) when not reading to the end.
    """

    __slots__ = ("_source", "_convert", "_tracker", "_store_closed", "__weakref__")

    def __init__(self, source: Iterator[tuple[bytes, bytes]], tracker: IteratorTracker,
                 convert: Callable[[bytes, bytes], object] | None = None):
        self._source: Iterator[tuple[bytes, bytes]] | None = source
        self._convert = convert
        self._tracker = tracker
        self._store_closed = False
        tracker.add(self)

    def __iter__(self) -> StoreIterator[T]:
        return self

    def __next__(self) -> T:
        source = self._source
        if source is None:
            if self._store_closed:
                raise StoreClosed(self._tracker.owner)
            raise StopIteration
        convert = self._convert
        for key, value in source:
            if convert is None:
                return key, value  # type: ignore[return-value]
            item = convert(key, value)
            if item is not SKIP:
                return item  # type: ignore[return-value]
        self.close()
        raise StopIteration

    @property
    def closed(self) -> bool:
        return self._source is None

    def close(self) -> None:
        """Release the scan (a RocksDB iterator pins files and memory until released)."""
        source, self._source = self._source, None
        if source is None:
            return
        self._tracker.discard(self)
        close = getattr(source, "close", None)
        if close is not None:
            close()

    def __enter__(self) -> StoreIterator[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<StoreIterator of store {self._tracker.owner!r}, {state}>"


class IteratorTracker:
    """The open iterators of one store (``owner`` names the store in messages)."""

    def __init__(self, owner: str):
        self.owner = owner
        self._open: dict[int, StoreIterator] = {}

    def add(self, iterator: StoreIterator) -> None:
        self._open[id(iterator)] = iterator

    def discard(self, iterator: StoreIterator) -> None:
        self._open.pop(id(iterator), None)

    @property
    def open_count(self) -> int:
        return len(self._open)

    def close_all(self) -> int:
        """Close every open iterator (later reads raise StoreClosed); return how many."""
        left = list(self._open.values())
        for iterator in left:
            iterator._store_closed = True
            iterator.close()
        return len(left)
