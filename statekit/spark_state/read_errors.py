"""A failed Spark read of a checkpoint, said in statekit's words: ``reading`` turns it into
a ``CheckpointError`` naming the damaged files (those ``restore_problems`` finds, or the one
a Hadoop ``ChecksumException`` names), else Spark's reason in one line (``spark_reason``).

Example:
    >>> with reading("the state of batch 3"):                          # doctest: +SKIP
    ...     spark.read.format("statestore").load(path).toPandas()
"""

from __future__ import annotations

import contextlib
import re
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

from statekit.errors import CheckpointError, StatekitError
from statekit.spark_state.checksums import checksum_problem
from statekit.spark_state.integrity import log_file_problems
from statekit.spark_state.problems import Problem

_CONDITION = re.compile(r"\[[A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*\][^\n]*")
_CAUSE = re.compile(r"^Caused by: ([^\n]+)", re.MULTILINE)
#: Hadoop's error for a file that does not match its ``.crc`` (the path, with or without
#: ``file:``)
_CHECKSUM_FAILURE = re.compile(r"ChecksumException: Checksum error: (?:file:)?(/\S+) at \d+")


def spark_reason(exc: BaseException) -> str:
    """The telling line of one of Spark's errors: its error condition (``[NAME] text``), else
    its deepest ``Caused by``, else its first line.

    Example:
        >>> spark_reason(RuntimeError("An error occurred while calling o1.load.\\n"
        ...     ": java.lang.IllegalStateException: [STDS_FAILED_TO_READ_STATE_SCHEMA] Failed."))
        '[STDS_FAILED_TO_READ_STATE_SCHEMA] Failed.'
    """
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


def checksum_failure(text: str) -> Problem | None:
    """The file a Hadoop ``ChecksumException`` in Spark's error ``text`` names, as a
    ``corrupt_file`` problem (one of Spark's log files: its own check and remedy), or None.

    Example:
        >>> checksum_failure("org.apache.hadoop.fs.ChecksumException: Checksum error: "
        ...                  "file:/nowhere/ck/state/0/1/2.changelog at 0 exp: 1 got: 2").path
        '/nowhere/ck/state/0/1/2.changelog'
    """
    match = _CHECKSUM_FAILURE.search(text)
    if match is None:
        return None
    path = Path(match.group(1))
    root = next((p for p in path.parents if (p / "offsets").is_dir()), None)
    found = log_file_problems(root, only=path) if root is not None else []
    return found[0] if found else Problem(
        "corrupt_file", str(path), checksum_problem(path) or "its bytes do not match its "
        "checksum file (truncated or changed)", remedy="restore it from a copy of the checkpoint")


@contextlib.contextmanager
def reading(what: str, bad_files: Callable[[], list[Problem]] | None = None) -> Iterator[None]:
    """Run a Spark read; any failure becomes a ``CheckpointError`` about ``what``.

    ``bad_files`` lists the problems of the files the read used (``restore_problems``); it is
    asked when the read fails, and the error names them, as it names a file Hadoop found
    failing its checksum (``checksum_failure``); otherwise the error gives Spark's reason in
    one line (the full error stays in statekit's Spark log).
    """
    try:
        with warnings.catch_warnings():
            # PySpark warns with the whole Java trace before it raises; the error says it once
            warnings.filterwarnings("ignore", message="toPandas attempted Arrow optimization")
            yield
    except StatekitError:
        raise
    except Exception as exc:  # Spark's AnalysisException, Py4JJavaError and the rest
        text = str(exc)
        reason = spark_reason(exc)
        if "INVALID_LOG_VERSION" in text:
            raise CheckpointError(f"cannot read {what}: a log file of the checkpoint was written "
                                  f"by a newer Spark: {reason}") from None
        bad = bad_files() if bad_files is not None else []
        failed = checksum_failure(text)
        if failed is not None and failed.path not in {p.path for p in bad}:
            bad.append(failed)
        if bad:
            named = "; ".join(str(p) for p in bad[:5])
            fix = "" if all(p.remedy for p in bad[:5]) else (
                ". Restore the file (or the whole checkpoint) from a copy; a batch whose state "
                "does not need it can still be read")
            raise CheckpointError(f"cannot read {what}: Spark could not load it: {named}{fix}"
                                  ) from None
        raise CheckpointError(f"cannot read {what}: {reason}") from None
