"""Errors of the local state stores; each names what was found, what was expected, what to do.

Example:
    >>> err = StoreMismatch("/tmp/s", "name", found="counts", expected="totals",
    ...                     remedy="open it with name='counts', or delete the directory")
    >>> print(err)
    store directory '/tmp/s' belongs to another store: its name is 'counts', not 'totals'; \
open it with name='counts', or delete the directory
"""

from __future__ import annotations

from os import PathLike

from statekit.errors import BadArgument, StatekitError


class StoreMismatch(StatekitError):
    """A store directory that belongs to another store, or to a newer statekit."""

    def __init__(self, path: str | PathLike, what: str, found: object, expected: object,
                 remedy: str, message: str | None = None):
        self.path, self.what, self.found, self.expected = str(path), what, found, expected
        text = message or (f"store directory {self.path!r} belongs to another store: "
                           f"its {what} is {found!r}, not {expected!r}")
        super().__init__(f"{text}; {remedy}")


class StoreCorrupt(StatekitError):
    """A store file (metadata or checkpoint) that cannot be read; the path is named."""

    def __init__(self, path: str | PathLike, detail: str, remedy: str):
        self.path = str(path)
        super().__init__(f"store file {self.path!r} is unreadable ({detail}); {remedy}")


class StoreLocked(StatekitError):
    """A RocksDB store directory that another open store (in this or another process) holds."""

    def __init__(self, path: str | PathLike, detail: str = ""):
        self.path = str(path)
        super().__init__(
            f"store directory {self.path!r} is open elsewhere (RocksDB holds its LOCK file)"
            + (f": {detail}" if detail else "")
            + "; close the other store first, or open another directory")


class StoreClosed(BadArgument):
    """Using a store, or one of its iterators, after the store was closed."""

    def __init__(self, store: str):
        super().__init__("use of a closed store", store,
                         "an open store (open it again with statekit.stores.open_store)")
