"""Kafka Streams' offset checkpoint files, read: a task's ``.checkpoint`` (the changelog
offsets its stores hold) and a store's ``<store>.position`` (the input offsets its contents
reflect), both written by ``OffsetCheckpoint.java``.

Format version 0, UTF-8 lines: the version, the number of entries, then one
``<topic> <partition> <offset>`` per entry. ``-4`` (``OFFSET_UNKNOWN``) is an offset Kafka
Streams does not know yet (a task that has not checkpointed since it started): read as None.

Example:
    >>> import pathlib, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / ".checkpoint"
    >>> _ = path.write_text("0\\n2\\napp-aggregate-changelog 0 680\\napp-other-changelog 0 -4\\n")
    >>> read_offset_checkpoint(path)
    {('app-aggregate-changelog', 0): 680, ('app-other-changelog', 0): None}
    >>> _ = path.write_text("1\\n0\\n")
    >>> read_offset_checkpoint(path)
    Traceback (most recent call last):
    ...
    statekit.errors.KafkaStreamsStateError: offset checkpoint file '...checkpoint' has format \
version 1; accepted: version 0 (Kafka Streams' OffsetCheckpoint)
"""

from __future__ import annotations

from os import PathLike

from statekit.errors import KafkaStreamsStateError, StoreCorrupt

#: the one format version ``OffsetCheckpoint.java`` writes and reads
VERSION = 0
#: ``OffsetCheckpoint.OFFSET_UNKNOWN``: an offset not known yet
OFFSET_UNKNOWN = -4


def read_offset_checkpoint(path: str | PathLike) -> dict[tuple[str, int], int | None]:
    """(topic, partition) → offset (None: unknown) of the file at ``path``; an empty dict when
    there is no file (Kafka Streams deletes it rather than write no entries). A version other
    than 0 is a KafkaStreamsStateError, a damaged file a StoreCorrupt, each naming the file."""
    try:
        with open(path, encoding="utf-8") as file:
            lines = file.read().splitlines()
    except FileNotFoundError:
        return {}
    remedy = "Kafka Streams rewrites it at its next checkpoint; read the store without it"
    try:
        version, expected = int(lines[0]), int(lines[1])
    except (IndexError, ValueError):
        raise StoreCorrupt(path, "no version and entry count on its first two lines",
                           remedy) from None
    if version != VERSION:
        raise KafkaStreamsStateError(
            f"offset checkpoint file {str(path)!r} has format version {version}; accepted: "
            f"version {VERSION} (Kafka Streams' OffsetCheckpoint)")
    offsets: dict[tuple[str, int], int | None] = {}
    for line in lines[2:]:
        pieces = line.split()
        if len(pieces) != 3:
            raise StoreCorrupt(path, f"malformed line {line!r}", remedy)
        topic, partition, offset = pieces[0], int(pieces[1]), int(pieces[2])
        offsets[(topic, partition)] = None if offset == OFFSET_UNKNOWN else offset
    if len(offsets) != expected:
        raise StoreCorrupt(path, f"{expected} entries announced, {len(offsets)} found", remedy)
    return offsets
