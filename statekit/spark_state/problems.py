"""A problem of a checkpoint: its kind, the file or folder at fault, what is wrong, what to do.

``statekit.spark_state.integrity`` finds them (its docstring's table says what each kind
means); ``raise_problems`` turns a read's problems into one ``CheckpointError`` naming them.

Example:
    >>> print(Problem("missing_state", "/tmp/ck/state", "the state folder is gone"))
    '/tmp/ck/state': the state folder is gone
    >>> raise_problems([], "batch 3")   # none: nothing raised
"""

from __future__ import annotations

from dataclasses import dataclass

from statekit.errors import CheckpointError

PROBLEM_KINDS = ("not_a_folder", "commit_log_gap", "offset_log_gap", "missing_state",
                 "missing_partition", "missing_delta", "no_checksum", "corrupt_file")


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a checkpoint: its ``kind`` (one of ``PROBLEM_KINDS``), the file or
    folder at fault, what is wrong, the operator it concerns (None: the logs) and, for some,
    what to do."""

    kind: str
    path: str
    detail: str
    operator_id: int | None = None
    #: what to do about it, where a rule of its own says (Spark's log files); else empty
    remedy: str = ""

    def __str__(self) -> str:
        fix = f". To fix it: {self.remedy}" if self.remedy else ""
        return f"{self.path!r}: {self.detail}{fix}"


def raise_problems(problems: list[Problem], what: str) -> None:
    """Raise a ``CheckpointError`` about reading ``what`` that names every problem (none: no-op).
    """
    if not problems:
        return
    shown = "; ".join(str(p) for p in problems[:5])
    more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
    fix = "" if all(p.remedy for p in problems) else (
        " Restore the files (or the whole checkpoint) from a copy;")
    raise CheckpointError(f"cannot read {what}: {shown}{more}.{fix} "
                          f"open_checkpoint(path).describe() lists every problem of the "
                          f"checkpoint")
