"""How the checks read a learner's answer: one rule for numbers, one for letters.

Numbers. Every check that asks for a number reads it with ``number`` (any real
number) or ``whole`` (a whole number), so ``40``, ``40.0``, ``np.int64(40)`` (what
a value read out of a DataFrame is), ``"40"``, ``" 40 "``, ``"1,200"`` and
``"1_200"`` are all read alike; a fraction ``"5/3"`` is its quotient and a
percentage ``"50%"`` a share of one (0.5). Not numbers: ``True``/``False`` (a bool is a yes or
a no, not a count), ``NaN`` and infinities, text that is not a number, a
collection of several values. A one-element array or Series is its element.
``mebibytes`` reads a size: a number, or one with its unit (``"2176 MiB"``,
``"2.125 GiB"``, ``"128 MB"``; MB is read as MiB, as Spark's settings do).

Letters. A multiple-choice answer is one letter, however it is written: ``"b"``,
``"B"``, ``" b) "``, ``"(b)"``, ``"b) the micro-batch"``.

Times. A time in a learner's table is read with ``instants``: a time zone is
converted to UTC (the zone statekit's frames are in), a number is epoch time in
seconds, milliseconds, microseconds or nanoseconds (told apart by size, as times
near today are), text is parsed.

Words. A named answer (a flag, an engine, a scenario, a dict's keys) is read with
``words``: case, quotes around it, hyphens, underscores and runs of spaces do not
count, so ``"Stalled Watermark"``, ``"stalled-watermark"`` and ``"'stalled_watermark'"``
are one answer. ``one_of`` reads a word answer against its accepted spellings;
``keyed`` reads a dict's keys the same way.

Example:
    >>> import numpy as np
    >>> whole(np.int64(40)), whole("1,200"), whole(" 7 "), whole(3.0)
    (40, 1200, 7, 3)
    >>> whole(2.5), whole(True), whole("many"), whole([1, 2])
    (None, None, None, None)
    >>> number("0.5"), number(np.float32(0.25)), number(float("nan"))
    (0.5, 0.25, None)
    >>> number("5/3") == 5 / 3, number("50%"), number("1/0"), number("50%%")
    (True, 0.5, None, None)
    >>> mebibytes("2176 MiB"), mebibytes("2.125 GiB"), mebibytes(128), mebibytes("3 apples")
    (2176.0, 2176.0, 128.0, None)
    >>> letter("(B)"), letter("b) the micro-batch"), letter("all of them")
    ('b', 'b', None)
    >>> import pandas as pd
    >>> list(instants(pd.Series([1_767_225_600_000, "2026-01-01T01:00:00+01:00"])))
    [Timestamp('2026-01-01 00:00:00'), Timestamp('2026-01-01 00:00:00')]
    >>> words(" Kafka-Streams "), words("'stalled_watermark'"), words(3)
    ('kafka streams', 'stalled watermark', None)
    >>> one_of("Scatter Gather", {"scatter-gather": "scatter-gather", "routed": "routed"})
    'scatter-gather'
    >>> keyed({"No Standby": 1, "stale-standby": 2, "other": 3}, ["no standby", "stale standby"])
    ({'no standby': 1, 'stale standby': 2}, ['other'])
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Iterable, Mapping
from decimal import Decimal

import pandas as pd

# "1200", "-3", "0.5", ".5", "1e3", with "," or "_" between groups of three digits.
_NUMBER = re.compile(r"[+-]?(?:(?:\d{1,3}(?:[,_]\d{3})+|\d+)(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
# "b", "(b)", "b)", "b." alone, or followed by the option's text: "b) the micro-batch".
_LETTER = re.compile(r"\(?([a-z])(?:\)|\.|:)?")
_LETTER_AND_TEXT = re.compile(r"\(?([a-z])[).:]\s")
# a size and its unit: "2176 MiB", "2.125GiB", "128 mb"
_SIZE = re.compile(r"(.+?)\s*([kmg])(?:i?b)?", re.IGNORECASE)
_UNIT_MIB = {"k": 1 / 1024, "m": 1.0, "g": 1024.0}
# what separates the words of a named answer: hyphens, underscores, spaces, in any number
_SEPARATORS = re.compile(r"[\s_-]+")


def _scalar(answer: object) -> object:
    """A one-element array or Series as its element; anything else as it is."""
    size, item = getattr(answer, "size", None), getattr(answer, "item", None)
    if size == 1 and callable(item) and not isinstance(answer, str | bytes):
        try:
            return item()
        except (TypeError, ValueError):
            return answer
    return answer


def number(answer: object) -> float | None:
    """``answer`` as a finite real number, or None when it is not one (see the module doc)."""
    answer = _scalar(answer)
    if type(answer).__name__ in ("bool", "bool_"):  # Python's and NumPy's
        return None
    if isinstance(answer, numbers.Real | Decimal):
        value = float(answer)
    elif isinstance(answer, str):
        value = _text_number(answer.strip())
        if value is None:
            return None
    else:
        return None
    return value if math.isfinite(value) else None


def _text_number(text: str) -> float | None:
    """A number written as text: plain, a fraction ``a/b`` or a percentage ``p%``."""
    if text.endswith("%"):
        share = text[:-1].rstrip()
        plain = None if "%" in share or "/" in share else _text_number(share)
        return None if plain is None else plain / 100
    over, slash, under = text.partition("/")
    if slash:
        if "/" in under:
            return None
        top, bottom = _text_number(over.strip()), _text_number(under.strip())
        return None if top is None or not bottom else top / bottom
    if _NUMBER.fullmatch(text) is None:
        return None
    return float(text.replace(",", "").replace("_", ""))


def mebibytes(answer: object) -> float | None:
    """A size in MiB: a number, or a number with its unit (KiB, MiB, GiB; KB, MB, GB and K,
    M, G read alike), or None."""
    value = number(answer)
    if value is not None or not isinstance(_scalar(answer), str):
        return value
    found = _SIZE.fullmatch(_scalar(answer).strip())
    size = number(found.group(1)) if found else None
    return None if size is None else size * _UNIT_MIB[found.group(2).lower()]


def whole(answer: object) -> int | None:
    """``answer`` as a whole number (``3.0`` is 3, ``2.5`` is not one), or None."""
    value = number(answer)
    if value is None or not value.is_integer():
        return None
    return int(value)


def count(answer: object) -> int | None:
    """``answer`` as a whole number ≥ 0 (records, rows), or None."""
    value = whole(answer)
    return value if value is not None and value >= 0 else None


def letter(answer: object) -> str | None:
    """The one letter a multiple-choice answer names, lower case, or None."""
    if not isinstance(answer, str):
        return None
    text = answer.strip().lower()
    found = _LETTER.fullmatch(text) or _LETTER_AND_TEXT.match(text)
    return found.group(1) if found else None


def words(answer: object) -> str | None:
    """A named answer in one spelling (lower case, words apart by one space), or None when
    it is not text."""
    answer = _scalar(answer)
    if not isinstance(answer, str):
        return None
    return _SEPARATORS.sub(" ", answer.strip().strip("'\"").casefold()).strip()


def one_of(answer: object, spellings: Mapping[str, str]) -> str | None:
    """The name ``answer`` gives among ``spellings`` (accepted spelling → name, each read
    with ``words``), or None."""
    said = words(answer)
    return None if said is None else {words(k): v for k, v in spellings.items()}.get(said)


def keyed(answer: Mapping[object, object], names: Iterable[str]
          ) -> tuple[dict[str, object], list[object]]:
    """A dict answer's values under the ``names`` its keys spell (read with ``words``), and
    the keys that spell none of them, as written."""
    spelled = {words(n): n for n in names}
    found: dict[str, object] = {}
    unknown: list[object] = []
    for key, value in answer.items():
        name = spelled.get(words(str(key)))
        if name is None:
            unknown.append(key)
        else:
            found[name] = value
    return found, unknown


# epoch time told apart by size: below 1e11 seconds (to the year 5138), below 1e14
# milliseconds, below 1e17 microseconds, else nanoseconds
_EPOCH_UNITS = ((1e11, "s"), (1e14, "ms"), (1e17, "us"))


def instant(value: object) -> pd.Timestamp | None:
    """One time as a UTC timestamp without zone (see the module doc), or None."""
    value = _scalar(value)
    if value is None or isinstance(value, bool) or (isinstance(value, float)
                                                     and math.isnan(value)):
        return None
    try:
        if isinstance(value, numbers.Real):  # bools were refused above
            unit = next((u for bound, u in _EPOCH_UNITS if abs(value) < bound), "ns")
            stamp = pd.Timestamp(value, unit=unit)
        else:
            stamp = pd.Timestamp(value)
    except (TypeError, ValueError, OverflowError):
        return None
    if stamp is pd.NaT:
        return None
    return stamp.tz_convert("UTC").tz_localize(None) if stamp.tzinfo is not None else stamp


def instants(values: pd.Series) -> pd.Series:
    """A column of times read with ``instant``, row by row (unreadable ones NaT)."""
    if pd.api.types.is_datetime64_dtype(values.dtype):
        return values
    if isinstance(values.dtype, pd.DatetimeTZDtype):
        return values.dt.tz_convert("UTC").dt.tz_localize(None)
    return pd.Series([instant(v) for v in values], index=values.index, dtype="datetime64[ns]")
