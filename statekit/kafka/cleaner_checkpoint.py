"""Apache Kafka's ``cleaner-offset-checkpoint`` file: how far the log cleaner has compacted each
partition of a log folder. One module owns the format (Kafka's ``OffsetCheckpointFile``)::

    0                      <- format version
    2                      <- number of entries
    board-counts-changelog 0 1234
    board-counts-changelog 1 987

Each entry says the cleaner has cleaned the partition up to that offset (exclusive): every
record below it has been through a cleaning pass; from it on, the log is as written. Only a
broker whose folder one can read (the embedded one) gives this; a client of a remote cluster
cannot see it.

Example:
    >>> parse_cleaner_checkpoint("0\\n2\\nboard 0 12\\nboard 1 7\\n")
    {('board', 0): 12, ('board', 1): 7}
    >>> parse_cleaner_checkpoint("")
    {}
"""

from __future__ import annotations

import os
from pathlib import Path

from statekit.errors import StatekitError

FILE_NAME = "cleaner-offset-checkpoint"
VERSION = 0


def parse_cleaner_checkpoint(text: str, source: str = "cleaner-offset-checkpoint"
                             ) -> dict[tuple[str, int], int]:
    """(topic, partition) → the offset the cleaner has cleaned up to; {} for an empty file
    (Kafka writes it empty before the first pass). StatekitError naming ``source`` and the
    line for anything else that is not the format."""
    lines = text.splitlines()
    if not lines:
        return {}

    def bad(why: str) -> StatekitError:
        return StatekitError(f"{source} is not a Kafka offset checkpoint file: {why}")

    if lines[0].strip() != str(VERSION):
        raise bad(f"its version line is {lines[0]!r}, statekit reads version {VERSION}")
    try:
        count = int(lines[1])
    except (IndexError, ValueError):
        raise bad("its second line is not the number of entries") from None
    entries = lines[2:]
    if len(entries) != count:
        raise bad(f"it says {count} entries and holds {len(entries)}")
    offsets: dict[tuple[str, int], int] = {}
    for line in entries:
        parts = line.rsplit(" ", 2)
        try:
            topic, partition, offset = parts[0], int(parts[1]), int(parts[2])
        except (IndexError, ValueError):
            raise bad(f"the entry {line!r} is not 'topic partition offset'") from None
        offsets[(topic, partition)] = offset
    return offsets


def cleaned_offsets(data_dir: str | os.PathLike, topic: str) -> dict[int, int]:
    """Partition → offset the log cleaner of the broker whose ``log.dirs`` is ``data_dir``
    has cleaned ``topic`` up to; partitions it has not cleaned yet are left out."""
    path = Path(data_dir) / FILE_NAME
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise StatekitError(f"cannot read the broker's {path}: {exc.strerror}") from None
    return {part: offset for (name, part), offset in
            parse_cleaner_checkpoint(text, str(path)).items() if name == topic}
