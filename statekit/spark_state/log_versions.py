"""The versions of Spark's log files: the first line ``vN`` each begins with, and the newest known.

Example:
    >>> log_version("commits/0", "v1", "commit log")
    1
"""

from __future__ import annotations

import os

from statekit.errors import CheckpointError, CorruptFile

#: The newest version of each of Spark's log files that Spark 4 writes (a newer one comes from
#: a newer Spark; the offset log has v2 since checkpoint format v2).
KNOWN_LOG_VERSIONS = {"offset log": 2, "commit log": 2, "operator metadata": 2}


def log_version(path: str | os.PathLike, line: str, what: str) -> int:
    """The version ``N`` of a Spark log file's first line ``vN``; CheckpointError naming the file
    for anything else, or for a version newer than Spark 4 writes (``KNOWN_LOG_VERSIONS``).

    Example:
        >>> log_version("offsets/3", "v1", "offset log")
        1
        >>> log_version("offsets/3", "v9", "offset log")
        Traceback (most recent call last):
        ...
        statekit.errors.CheckpointError: the offset log file 'offsets/3' has version v9; Spark 4 \
writes up to v2: it was written by a newer Spark, which this Spark cannot read (open it with \
that Spark)
    """
    text = line.strip()
    if not (text.startswith("v") and text[1:].isdigit()):
        raise CorruptFile(str(path), f"{what} file", f"it is not in Spark's format (its first "
                          f"line is {text[:40]!r}, not a version 'vN')",
                          "restore it from a copy of the checkpoint")
    version = int(text[1:])
    newest = KNOWN_LOG_VERSIONS.get(what)
    if newest is not None and version > newest:
        raise CheckpointError(
            f"the {what} file {str(path)!r} has version v{version}; Spark 4 writes up to "
            f"v{newest}: it was written by a newer Spark, which this Spark cannot read (open it "
            f"with that Spark)")
    return version
