"""``statekit-store.json``: the file that says which store a store directory holds.

It holds the ``StoreMetadata`` as a JSON object, its ``format_version`` the
store directory format (a file without one is format 1). Opening a directory
reads it and checks it against the store asked for (``check``), so a store
never reads another store's bytes. Written atomically, read whole and checked:
a file that is not JSON, lacks a field or holds a value of the wrong type
raises ``StoreCorrupt`` naming the file and the value; a newer format raises
``StoreMismatch``.

Example:
    >>> import tempfile
    >>> file = StoreMetadataFile(tempfile.mkdtemp())
    >>> file.read() is None
    True
    >>> meta = StoreMetadata("counts", "window", 3, ("player", "window_start"), ("count",))
    >>> file.write(meta)
    >>> file.read() == meta
    True
    >>> file.check(meta, StoreMetadata("totals", "window", 3, ()))       # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    statekit.errors.StoreMismatch: store directory '...' belongs to another store: \
its name is 'counts', not 'totals'; open it with name='counts', or delete the directory \
(the changelog restores it)
    >>> import shutil; shutil.rmtree(file.directory)
"""

from __future__ import annotations

from statekit.errors import BadArgument, StoreMismatch
from statekit.stores.metadata import STORE_FORMAT_VERSION, StoreMetadata
from statekit.stores.store_file import StoreFile
from statekit.validate import is_whole_number

METADATA_FILE = "statekit-store.json"
_DELETE = "delete the directory (the changelog restores it)"
_REQUIRED = ("name", "kind", "partition", "key_columns")


class StoreMetadataFile(StoreFile):
    """``statekit-store.json`` in the store ``directory``."""

    NAME = METADATA_FILE
    VERSION = STORE_FORMAT_VERSION
    WHAT = "store"
    REMEDY = _DELETE

    def read(self) -> StoreMetadata | None:
        """The metadata of the store in the directory, or None if it has none.

        Raises StoreMismatch for a newer format version, StoreCorrupt for a bad file.
        """
        found = self.read_object()
        if found is None:
            return None
        data, version = found
        for field in _REQUIRED:
            if field not in data:
                raise self.corrupt(f"no {field!r}: accepted an object with "
                                   f"{', '.join(map(repr, _REQUIRED))}")
        self._columns(data, "key_columns", optional=False)
        self._columns(data, "value_columns", optional=True)
        try:
            return StoreMetadata.from_json({**data, "format_version": version})
        except BadArgument as exc:
            raise self.corrupt(str(exc)) from None

    def _columns(self, data: dict, field: str, *, optional: bool) -> None:
        columns = data.get(field)
        if optional and columns is None:
            return
        if not isinstance(columns, list) or not all(isinstance(c, str) for c in columns):
            raise self.corrupt(f"{field} {columns!r}: accepted a list of column names"
                               + (", or null" if optional else ""))

    def write(self, meta: StoreMetadata) -> None:
        """Write ``meta`` (atomically); its format version must be one this statekit reads."""
        if not isinstance(meta, StoreMetadata):
            raise BadArgument("store metadata", meta, "a StoreMetadata")
        version = meta.format_version
        if not is_whole_number(version) or not 1 <= version <= self.VERSION:
            raise BadArgument("store format_version", version,
                              f"a store format this statekit reads: {self._versions_read()}")
        self.write_object(meta.to_json())

    def check(self, found: StoreMetadata, expected: StoreMetadata, *,
              layout: bool = True) -> None:
        """StoreMismatch if ``found`` (read from this directory) is not the ``expected`` store.

        Identity (name, kind, partition) must match; with ``layout`` so must the
        columns, window size and changelog topic where ``expected`` gives them (not None).
        """
        directory = self.directory
        remedy = {
            "name": f"open it with name={found.name!r}, or {_DELETE}",
            "kind": f"open it as a {found.kind} store, or {_DELETE}",
            "partition": f"open it with partition={found.partition}, or {_DELETE}",
        }
        for what in ("name", "kind", "partition"):
            if getattr(found, what) != getattr(expected, what):
                raise StoreMismatch(directory, what, getattr(found, what),
                                    getattr(expected, what), remedy[what])
        if not layout:
            return
        for what in ("key_columns", "value_columns", "window_size_ms", "changelog_topic"):
            want, have = _shown(getattr(expected, what)), _shown(getattr(found, what))
            if want is not None and want != have:
                raise StoreMismatch(
                    directory, what.replace("_", " "), have, want,
                    f"open it with {what}={have!r} (or {what}=None to take the directory's), "
                    f"or {_DELETE}",
                    message=(f"store directory {str(directory)!r} holds store "
                             f"{found.describe()} with {what} {have!r}, not {want!r}"))


def _shown(value: object) -> object:
    return list(value) if isinstance(value, tuple) else value
