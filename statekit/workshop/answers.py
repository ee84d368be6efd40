"""How the checks read a learner's answer: one rule for numbers, one for letters.

Numbers. Every check that asks for a number reads it with ``number`` (any real
number) or ``whole`` (a whole number), so ``40``, ``40.0``, ``np.int64(40)`` (what
a value read out of a DataFrame is), ``"40"``, ``" 40 "``, ``"1,200"`` and
``"1_200"`` are all read alike. Not numbers: ``True``/``False`` (a bool is a yes or
a no, not a count), ``NaN`` and infinities, text that is not a number, a
collection of several values. A one-element array or Series is its element.

Letters. A multiple-choice answer is one letter, however it is written: ``"b"``,
``"B"``, ``" b) "``, ``"(b)"``, ``"b) the micro-batch"``.

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
    >>> letter("(B)"), letter("b) the micro-batch"), letter("all of them")
    ('b', 'b', None)
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

# "1200", "-3", "0.5", ".5", "1e3", with "," or "_" between groups of three digits.
_NUMBER = re.compile(r"[+-]?(?:(?:\d{1,3}(?:[,_]\d{3})+|\d+)(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
# "b", "(b)", "b)", "b." alone, or followed by the option's text: "b) the micro-batch".
_LETTER = re.compile(r"\(?([a-z])(?:\)|\.|:)?")
_LETTER_AND_TEXT = re.compile(r"\(?([a-z])[).:]\s")
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
        text = answer.strip()
        if _NUMBER.fullmatch(text) is None:
            return None
        value = float(text.replace(",", "").replace("_", ""))
    else:
        return None
    return value if math.isfinite(value) else None


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
