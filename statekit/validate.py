"""The argument rules every public function shares: one owner per rule.

Whole numbers (batch ids, partitions, offsets, counts) accept Python ints and
NumPy integers — a batch id read out of a pandas frame is an ``np.int64`` —
and refuse bools, floats and strings; frames must carry the columns a function
reads; Kafka topic and store names use Kafka's alphabet; a switch is True or
False. Each failure is a ``BadArgument`` naming the bad value and what would be
accepted.

Example:
    >>> import numpy as np
    >>> whole_number(np.int64(3), "batch", minimum=0)
    3
    >>> whole_number(True, "batch", minimum=0)
    Traceback (most recent call last):
    ...
    statekit.errors.BadArgument: bad batch: True; accepted: a whole number >= 0
    >>> whole_number(2.0, "partitions", minimum=1)
    Traceback (most recent call last):
    ...
    statekit.errors.BadArgument: bad partitions: 2.0; accepted: a whole number >= 1
    >>> kafka_name("board-counts-changelog", "topic")
    'board-counts-changelog'
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from statekit.errors import BadArgument

if TYPE_CHECKING:  # pandas is not imported here: Spark's Python workers import this module
    import pandas as pd

#: Kafka's topic-name alphabet (also used for store names, which become part of topic names).
KAFKA_NAME = re.compile(r"^[A-Za-z0-9._-]+$")
KAFKA_NAME_ACCEPTED = "letters, digits, '.', '_' and '-' (a Kafka topic name)"
MAX_TOPIC_LENGTH = 249


def is_whole_number(value: object) -> bool:
    """True for ints and NumPy integers; False for bools, floats and everything else."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool) and \
        type(value).__name__ != "bool_"


def _bounds_text(minimum: int | None, maximum: int | None) -> str:
    if minimum is not None and maximum is not None:
        return f"a whole number from {minimum} to {maximum}"
    if minimum is not None:
        return f"a whole number >= {minimum}"
    if maximum is not None:
        return f"a whole number <= {maximum}"
    return "a whole number"


def whole_number(value: object, what: str, *, minimum: int | None = None,
                 maximum: int | None = None, accepted: str | None = None) -> int:
    """``value`` as a Python int when it is a whole number within the bounds, else BadArgument.

    Example:
        >>> whole_number(7, "partition", minimum=0, maximum=3)
        Traceback (most recent call last):
        ...
        statekit.errors.BadArgument: bad partition: 7; accepted: a whole number from 0 to 3
    """
    text = accepted or _bounds_text(minimum, maximum)
    if not is_whole_number(value):
        raise BadArgument(what, value, text)
    number = int(value)
    if (minimum is not None and number < minimum) or (maximum is not None and number > maximum):
        raise BadArgument(what, value, text)
    return number


def optional_whole_number(value: object, what: str, *, minimum: int | None = None,
                          maximum: int | None = None, accepted: str | None = None) -> int | None:
    """Like ``whole_number``, but None passes through (and is named as accepted)."""
    if value is None:
        return None
    text = accepted or f"{_bounds_text(minimum, maximum)}, or None"
    return whole_number(value, what, minimum=minimum, maximum=maximum, accepted=text)


def batch_id(value: object, what: str = "batch") -> int:
    """A Spark batch id: a whole number >= 0."""
    return whole_number(value, what, minimum=0, accepted="a batch id (a whole number >= 0)")


def optional_batch_id(value: object, what: str = "batch") -> int | None:
    """A Spark batch id, or None."""
    if value is None:
        return None
    return whole_number(value, what, minimum=0,
                        accepted="a batch id (a whole number >= 0), or None")


def batch_span(from_batch: object, to_batch: object) -> tuple[int, int | None]:
    """``(from_batch, to_batch)`` as batch ids (``to_batch`` may be None: the last), checked
    for order before anything is read: ``changes(5, 2)`` is a swap, not a missing batch.

    Example:
        >>> batch_span(5, 2)
        Traceback (most recent call last):
        ...
        statekit.errors.BadArgument: bad from_batch: 5; accepted: a batch id <= to_batch (2)
    """
    first = batch_id(from_batch, "from_batch")
    last = optional_batch_id(to_batch, "to_batch")
    if last is not None and first > last:
        raise BadArgument("from_batch", from_batch, f"a batch id <= to_batch ({last})")
    return first, last


def whole_numbers(values: Iterable[object], what: str, *, minimum: int | None = None,
                  maximum: int | None = None) -> list[int]:
    """Every value of ``values`` as an int (``whole_number`` on each; the first bad one named)."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise BadArgument(what, values, f"a list of {_bounds_text(minimum, maximum)}s")
    return [whole_number(v, what, minimum=minimum, maximum=maximum) for v in values]


def non_negative_number(value: object, what: str, *, unit: str = "", allow_none: bool = False,
                        accepted: str | None = None) -> float | None:
    """A finite number >= 0 (int or float, not bool), or None when allowed.

    Example:
        >>> non_negative_number(-5, "delete_retention_ms", unit="milliseconds")
        Traceback (most recent call last):
        ...
        statekit.errors.BadArgument: bad delete_retention_ms: -5; accepted: a number of \
milliseconds >= 0
    """
    if value is None and allow_none:
        return None
    accepted = accepted or (f"a number of {unit} >= 0" if unit else "a number >= 0") + (
        ", or None" if allow_none else "")
    if isinstance(value, bool) or type(value).__name__ == "bool_" or \
            not isinstance(value, numbers.Real) or not math.isfinite(value) or value < 0:
        raise BadArgument(what, value, accepted)
    return value


def timeout_seconds(value: object, what: str = "timeout", *, allow_zero: bool = False) -> float:
    """A wait's bound: a finite number of seconds > 0 (>= 0 with ``allow_zero``: do not wait),
    never a string, a bool or a negative number, which would end a wait at once or never.

    Example:
        >>> timeout_seconds(2.5)
        2.5
        >>> timeout_seconds("soon")
        Traceback (most recent call last):
        ...
        statekit.errors.BadArgument: bad timeout: 'soon'; accepted: a number of seconds > 0
    """
    accepted = f"a number of seconds {'>= 0' if allow_zero else '> 0'}"
    if isinstance(value, bool) or type(value).__name__ == "bool_" or \
            not isinstance(value, numbers.Real) or not math.isfinite(value) or value < 0 or \
            (value == 0 and not allow_zero):
        raise BadArgument(what, value, accepted)
    return float(value)


WRITABLE_ACCEPTED = "a writable directory, or the path of a new one inside a writable directory"


def writable_directory(value: object, what: str = "directory") -> str:
    """``value`` as a path when files can be written there: an existing writable directory,
    or a new one's path whose nearest existing folder is one (a probe file is written there
    and removed: nothing is left behind); else BadArgument naming the path and why.

    Example:
        >>> writable_directory("/proc/stores")
        Traceback (most recent call last):
        ...
        statekit.errors.BadArgument: bad directory: '/proc/stores'; accepted: a writable \
directory, or the path of a new one inside a writable directory (a file cannot be written in \
'/proc': No such file or directory)
    """
    import os
    import tempfile

    try:
        path = os.fspath(value)
    except TypeError:
        raise BadArgument(what, value, WRITABLE_ACCEPTED) from None
    existing = os.path.abspath(path)
    while not os.path.lexists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise BadArgument(what, path, f"{WRITABLE_ACCEPTED} ({existing!r} is not a directory)")
    try:
        handle, probe = tempfile.mkstemp(prefix=".statekit-probe-", dir=existing)
    except OSError as exc:
        raise BadArgument(what, path, f"{WRITABLE_ACCEPTED} (a file cannot be written in "
                                      f"{existing!r}: {exc.strerror or exc})") from None
    os.close(handle)
    os.unlink(probe)
    return path


def flag(value: object, what: str) -> bool:
    """A yes/no switch: True or False (a NumPy bool, as read out of a frame, too), never a
    string or a number, whose truth would say yes to ``"no"`` and to ``2``.

    Example:
        >>> import numpy as np
        >>> flag(np.bool_(False), "early_workers")
        False
        >>> flag("no", "early_workers")
        Traceback (most recent call last):
        ...
        statekit.errors.BadArgument: bad early_workers: 'no'; accepted: True or False
    """
    if isinstance(value, bool):
        return value
    if type(value).__module__ == "numpy" and type(value).__name__ in ("bool", "bool_"):
        return bool(value)
    raise BadArgument(what, value, "True or False")


def kafka_name(value: object, what: str) -> str:
    """A Kafka topic (or store) name, or BadArgument naming ``what``."""
    if not isinstance(value, str) or not KAFKA_NAME.match(value):
        raise BadArgument(what, value, KAFKA_NAME_ACCEPTED)
    if len(value) > MAX_TOPIC_LENGTH:
        raise BadArgument(what, value, f"at most {MAX_TOPIC_LENGTH} characters")
    return value


def require_columns(frame: pd.DataFrame, needed: Sequence[str], what: str,
                    source: str) -> None:
    """BadArgument naming the first column of ``needed`` that ``frame`` lacks.

    ``what`` names the argument ("changelog frame"), ``source`` says where a good
    one comes from ("as read_changelog gives").

    Example:
        >>> import pandas as pd
        >>> require_columns(pd.DataFrame({"a": [1]}), ["a", "b"], "frame", "from f()")
        Traceback (most recent call last):
        ...
        statekit.errors.BadArgument: bad frame: missing column 'b': ['a']; accepted: a frame \
with columns a, b (from f())
    """
    import pandas as pd

    if not isinstance(frame, pd.DataFrame):
        raise BadArgument(what, type(frame).__name__, f"a pandas DataFrame ({source})")
    missing = [c for c in needed if c not in frame.columns]
    if missing:
        raise BadArgument(f"{what}: missing column {missing[0]!r}",
                          sorted(map(str, frame.columns)),
                          f"a frame with columns {', '.join(needed)} ({source})")
