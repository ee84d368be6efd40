"""Parse Spark-style duration strings ("10 seconds", "1 minute", "500 ms") to milliseconds.

Example:
    >>> to_millis("2 minutes")
    120000
"""

from __future__ import annotations

import re

from statekit.errors import BadArgument

_UNITS_MS = {
    "ms": 1, "millisecond": 1, "milliseconds": 1,
    "s": 1000, "sec": 1000, "second": 1000, "seconds": 1000,
    "m": 60_000, "min": 60_000, "minute": 60_000, "minutes": 60_000,
    "h": 3_600_000, "hour": 3_600_000, "hours": 3_600_000,
    "d": 86_400_000, "day": 86_400_000, "days": 86_400_000,
}
_PATTERN = re.compile(r"^\s*(\d+)\s*([a-zA-Z]+)\s*$")
ACCEPTED = "'<positive integer> <unit>', unit one of ms, seconds, minutes, hours, days"


def to_millis(duration: str, what: str = "duration") -> int:
    """Milliseconds in a duration string; raises BadArgument naming the string otherwise."""
    match = _PATTERN.match(duration) if isinstance(duration, str) else None
    if not match or match.group(2).lower() not in _UNITS_MS or int(match.group(1)) <= 0:
        raise BadArgument(what, duration, ACCEPTED)
    return int(match.group(1)) * _UNITS_MS[match.group(2).lower()]


def spark_interval(duration: str, what: str = "duration") -> str:
    """The same duration in a form Spark's window() and withWatermark() accept."""
    return f"{to_millis(duration, what)} milliseconds"
