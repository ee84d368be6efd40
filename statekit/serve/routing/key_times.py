"""A time in a key, made exact: milliseconds since the epoch from any form statekit takes.

Keys name times (a window's start, a part's timestamp column, a range's bounds) as
milliseconds since the epoch, ISO-8601 text in UTC, or a datetime (Python's, pandas' or
NumPy's); ``time_ms`` turns each into milliseconds (the changelog's precision; finer
digits floor), from 1970 to the year 9999, and refuses anything else naming the value.
``ISO_TIME`` is the one grammar of ISO text statekit reads, and ``time_schema`` states
it (with the millisecond form) as JSON Schema for the REST service's OpenAPI schema;
``window_start_text_schema`` narrows it to the starts of a window grid.

Example:
    >>> time_ms("2026-01-05T10:00:00.5Z", "window_start"), time_ms(0, "ts")
    (1767607200500, 0)
    >>> bool(ISO_TIME.fullmatch("2026-02-29"))   # not a leap year
    False
"""

from __future__ import annotations

import datetime as dt
import re

import numpy as np

from statekit.errors import BadArgument
from statekit.stores.key_layout import MAX_TIME_MS
from statekit.validate import is_whole_number

_MICROS = {"s": 1_000_000, "ms": 1000, "us": 1}
TIME_ACCEPTED = ("milliseconds since the epoch, ISO-8601 text in UTC (2026-01-05, "
                 "2026-01-05T10:00:00Z, 2026-01-05 10:00:00.5) or a datetime: Python's, "
                 "pandas' or NumPy's datetime64")
# ISO-8601 text statekit reads as a time: a calendar date of 1970..9999, optionally a time of
# day (seconds and up to 9 fraction digits optional) in UTC (Z, +00:00 or no zone). The one
# grammar the service checks and its OpenAPI schema states (a regex without look-arounds, as
# JSON Schema's and Hypothesis' both read it).
_YEAR = r"(?:19[7-9][0-9]|[2-9][0-9]{3})"
_LEAP_YEAR = (r"(?:19(?:7[26]|8[048]|9[26])|[2-9][0-9](?:0[48]|[2468][048]|[13579][26])"
              r"|(?:[2468][048]|[3579][26])00)")
_MONTH_DAY = (r"(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"
              r"|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))")
_TIME_OF_DAY = r"(?:[01][0-9]|2[0-3]):[0-5][0-9](?::[0-5][0-9](?:\.[0-9]{1,9})?)?"
_UTC = r"(?:Z|[+-]00:00)?"


def iso_pattern(time_of_day: str = _TIME_OF_DAY, year: str = _YEAR,
                leap_year: str = _LEAP_YEAR) -> str:
    """The regex of ISO-8601 UTC text: a date of ``year``, optionally ``time_of_day``."""
    date = f"(?:{year}-{_MONTH_DAY}|{leap_year}-02-29)"
    return f"^{date}(?:[T ]{time_of_day}{_UTC})?$"


ISO_TIME = re.compile(iso_pattern())
_BEYOND_MS = re.compile(r"(\.[0-9]{3})[0-9]+")  # fraction digits beyond milliseconds
#: A window start's ISO text in a key's schema: years to 9998 (a window must end by 9999; the
#: starts of 9999 are taken as text too, and stated in milliseconds only)
_YEAR_TO_9998 = r"(?:19[7-9][0-9]|[2-8][0-9]{3}|9[0-8][0-9]{2}|99[0-8][0-9]|999[0-8])"
_DAY_MS = 86_400_000


def time_schema() -> dict:
    """The JSON Schema of a time statekit takes: milliseconds since the epoch to the end of
    9999, or ISO-8601 text in UTC (``ISO_TIME``)."""
    return {"anyOf": [{"type": "integer", "minimum": 0, "maximum": MAX_TIME_MS},
                      {"type": "string", "pattern": ISO_TIME.pattern}]}


def _grid_times_of_day(slide_ms: int) -> str | None:
    """The regex of the times of day on a grid of ``slide_ms`` from midnight UTC (windows
    start there: the epoch is a midnight); None when the grid does not repeat each day in
    whole seconds (those starts are stated in milliseconds only).

    Example:
        >>> print(_grid_times_of_day(600_000))
        (?:[01][0-9]|2[0-3]):(?:00|10|20|30|40|50)(?::00(?:\\.0{1,9})?)?
    """
    if _DAY_MS % slide_ms or slide_ms % 1000:
        return None
    zero = r"(?:\.0{1,9})?"
    if slide_ms % 60_000 == 0:
        minutes = slide_ms // 60_000
        if 60 % minutes == 0:
            every = "|".join(f"{m:02d}" for m in range(0, 60, minutes))
            return rf"(?:[01][0-9]|2[0-3]):(?:{every})(?::00{zero})?"
        every = "|".join(f"{t // 60:02d}:{t % 60:02d}" for t in range(0, 1440, minutes))
        return rf"(?:{every})(?::00{zero})?"
    seconds = slide_ms // 1000
    if 60 % seconds:
        return None
    every = "|".join(f"{x:02d}" for x in range(0, 60, seconds))
    return rf"(?:[01][0-9]|2[0-3]):[0-5][0-9](?::(?:{every}){zero})?"


def window_start_text_schema(slide_ms: int) -> dict | None:
    """The JSON Schema of a window start's ISO text on a grid of ``slide_ms`` (a window ends
    by 9999: years to 9998); None when the grid's times of day are not whole seconds
    repeating each day (those starts are stated in milliseconds only)."""
    grid = _grid_times_of_day(slide_ms)
    if grid is None:
        return None
    return {"type": "string", "pattern": iso_pattern(grid, _YEAR_TO_9998)}


def time_ms(value: object, what: str) -> int:
    """A time as milliseconds since the epoch (naive = UTC); BadArgument naming ``what``."""
    import pandas as pd

    if type(value) is int:  # the common case first (is_whole_number's ABC check is slower)
        ms = value
    elif is_whole_number(value):
        ms = int(value)
    elif isinstance(value, str | dt.datetime | pd.Timestamp | np.datetime64):
        if isinstance(value, str):
            if not ISO_TIME.fullmatch(value):
                raise BadArgument(what, value, TIME_ACCEPTED)
            # cut to milliseconds (they floor: the same instant statekit keeps), so a year
            # past 2262 parses too (pandas holds nanoseconds only to 2262)
            text = _BEYOND_MS.sub(r"\1", value)
        try:
            stamp = pd.Timestamp(text if isinstance(value, str) else value)
            if stamp is pd.NaT:
                raise BadArgument(what, value, TIME_ACCEPTED)
            if stamp.tzinfo is not None:
                stamp = stamp.tz_convert("UTC").tz_localize(None)
            # nanoseconds only reach 2262: a later stamp (year 3000) counts in a coarser unit
            count = int(stamp.asm8.view("i8"))
            micros = count // 1000 if stamp.unit == "ns" else count * _MICROS[stamp.unit]
        except (ValueError, TypeError, OverflowError):
            raise BadArgument(what, value, TIME_ACCEPTED) from None
        ms = micros // 1000
    else:
        raise BadArgument(what, value, TIME_ACCEPTED)
    if not 0 <= ms <= MAX_TIME_MS:
        raise BadArgument(what, value, f"a time from 1970 to the year 9999 ({TIME_ACCEPTED})")
    return ms
