"""``statekit-store.checkpoint``: how far a store directory restored its changelog.

As Kafka Streams' ``.checkpoint`` file (``OffsetCheckpoint``), it keeps, per
changelog partition, the next offset to read; a restore starts there instead
of at the changelog's start. The file is a JSON object
``{"format_version": 1, "offsets": {"3": 1200}}`` (JSON keys are strings; a
file without ``format_version`` is version 1). Written atomically; a read
checks every entry and names the file and the bad value (``StoreCorrupt``);
``validate`` is the rule for offsets handed in (``BadArgument``), which
in-memory stores share.

Example:
    >>> import tempfile
    >>> checkpoint = OffsetCheckpointFile(tempfile.mkdtemp())
    >>> checkpoint.read()
    {}
    >>> checkpoint.write({3: 1200, 0: 7})
    >>> checkpoint.read()
    {0: 7, 3: 1200}
    >>> print(checkpoint.path.read_text())
    {
     "format_version": 1,
     "offsets": {
      "0": 7,
      "3": 1200
     }
    }
    >>> checkpoint.write({3: -1})
    Traceback (most recent call last):
    ...
    statekit.errors.BadArgument: bad checkpoint offsets entry: {3: -1}; accepted: a changelog \
partition (a whole number >= 0) to its next offset (a whole number >= 0)
    >>> import shutil; shutil.rmtree(checkpoint.directory)
"""

from __future__ import annotations

from collections.abc import Mapping

from statekit.errors import BadArgument
from statekit.stores.store_file import StoreFile
from statekit.validate import is_whole_number

CHECKPOINT_FILE = "statekit-store.checkpoint"
_ENTRY = "a changelog partition (a whole number >= 0) to its next offset (a whole number >= 0)"


class OffsetCheckpointFile(StoreFile):
    """``statekit-store.checkpoint`` in the store ``directory``: partition → next offset."""

    NAME = CHECKPOINT_FILE
    VERSION = 1
    WHAT = "offset checkpoint"
    REMEDY = "delete it to restore the store from the changelog's start"

    @staticmethod
    def validate(offsets: object) -> dict[int, int]:
        """``offsets`` as a dict of int to int, or BadArgument naming the first bad entry."""
        if not isinstance(offsets, Mapping):
            raise BadArgument("checkpoint offsets", offsets, f"a dict of {_ENTRY}")
        for partition, offset in offsets.items():
            if not (is_whole_number(partition) and partition >= 0
                    and is_whole_number(offset) and offset >= 0):
                raise BadArgument("checkpoint offsets entry", {partition: offset}, _ENTRY)
        return {int(p): int(o) for p, o in offsets.items()}

    def read(self) -> dict[int, int]:
        """The checkpointed offsets (empty when there is no checkpoint yet).

        Raises StoreCorrupt for a bad file, StoreMismatch for a newer format version.
        """
        found = self.read_object()
        if found is None:
            return {}
        data, _ = found  # version 1 is the only one so far
        offsets = data.get("offsets")
        if not isinstance(offsets, dict):
            raise self.corrupt(f"offsets {offsets!r}: accepted an object of {_ENTRY}")
        read: dict[int, int] = {}
        for key, offset in offsets.items():
            if not (key.isascii() and key.isdigit()):
                raise self.corrupt(f"partition {key!r}: accepted a whole number >= 0, "
                                   f"written as a JSON key (\"3\")")
            partition = int(key)
            if partition in read:
                raise self.corrupt(f"partition {key!r} appears twice: accepted each "
                                   f"partition once")
            if not is_whole_number(offset) or offset < 0:
                raise self.corrupt(f"offset {offset!r} of partition {partition}: accepted a "
                                   f"whole number >= 0")
            read[partition] = offset
        return dict(sorted(read.items()))

    def write(self, offsets: Mapping[int, int]) -> None:
        """Replace the checkpoint with ``offsets`` (checked first; atomically, durably)."""
        checked = self.validate(offsets)
        self.write_object({"format_version": self.VERSION,
                           "offsets": {str(p): o for p, o in sorted(checked.items())}})
