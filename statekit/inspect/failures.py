"""Spark's reader failures as statekit errors that name the file at fault.

Spark reports a truncated or corrupt state file as "An error occurred during loading
state" (``CANNOT_LOAD_STATE_STORE``) or an ``EOFException``, without the file's name.
``reading`` turns any failure of a read into a ``CheckpointError``; when the store's
files are at fault it checks them against their checksums (``verify_checksums``) and
names the ones that do not match.

Example:
    >>> spark_reason(RuntimeError("An error occurred while calling o1.load.\\n"
    ...     ": java.lang.IllegalStateException: [STDS_FAILED_TO_READ_STATE_SCHEMA] Failed."))
    '[STDS_FAILED_TO_READ_STATE_SCHEMA] Failed.'
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator

from statekit.errors import CheckpointError, StatekitError

#: Signs, in Spark's message, that a state file could not be read.
FILE_TROUBLE = ("CANNOT_LOAD_STATE_STORE", "EOFException", "Stream ended prematurely",
                "CANNOT_READ", "ChecksumException", "Checksum error", "corrupt",
                "FileNotFoundException", "KryoException", "Snappy", "LZ4", "ZipException")
_CONDITION = re.compile(r"\[[A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*\][^\n]*")
_CAUSE = re.compile(r"^Caused by: ([^\n]+)", re.MULTILINE)


def spark_reason(exc: BaseException) -> str:
    """The telling line of one of Spark's errors: its error condition (``[NAME] text``), else
    its deepest ``Caused by``, else its first line."""
    text = str(exc)
    condition = _CONDITION.search(text)
    if condition:
        return condition.group(0).strip()[:500]
    causes = _CAUSE.findall(text)
    if causes:
        return causes[-1].strip()[:500]
    lines = [line.strip() for line in text.splitlines()
             if line.strip() and not line.strip().startswith("An error occurred while calling")]
    return (lines[0] if lines else type(exc).__name__)[:500]


@contextlib.contextmanager
def reading(what: str, bad_files: Callable[[], list[tuple[str, str]]] | None = None
            ) -> Iterator[None]:
    """Run a Spark read; any failure becomes a ``CheckpointError`` about ``what``.

    ``bad_files`` lists (path, problem) of the state files the read used that fail their
    checksum; it is asked only when Spark's message says a state file could not be read.
    """
    try:
        yield
    except StatekitError:
        raise
    except Exception as exc:  # Spark's AnalysisException, Py4JJavaError and the rest
        text = str(exc)
        reason = spark_reason(exc)
        if "INVALID_LOG_VERSION" in text:
            raise CheckpointError(f"cannot read {what}: a log file of the checkpoint was written "
                                  f"by a newer Spark: {reason}") from None
        if bad_files is not None and any(sign in text for sign in FILE_TROUBLE):
            bad = bad_files()
            if bad:
                named = "; ".join(f"{path!r}: {problem}" for path, problem in bad)
                raise CheckpointError(
                    f"cannot read {what}: Spark could not load a state file ({reason}); "
                    f"corrupt or truncated state file {named}. Restore the file (or the whole "
                    f"checkpoint) from a copy; a batch whose state does not need it can still "
                    f"be read") from None
        raise CheckpointError(f"cannot read {what}: {reason}") from None
