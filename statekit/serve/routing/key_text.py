"""A key sent as JSON text, bounded: how long it may be, how deep it may nest, how it is read.

A key comes over REST (or as a ``str`` in Python) as JSON text: one object of the key
columns, e.g. ``{"player": "p07"}``. Before it is parsed its length (``MAX_KEY_CHARS``)
and nesting (``MAX_KEY_DEPTH``) are bounded, so no key, however hostile, costs more
than a small parse or reaches Python's recursion limit; ``parse_key_object`` then takes
one object naming only the columns a codec asks for. An error names the text, cut to
its first characters (``shown``).

Example:
    >>> parse_key_object('{"player": "p07"}', "key", ["player"])
    {'player': 'p07'}
    >>> try:
    ...     parse_key_object('{"player": "p07", "count": 3}', "key", ["player"])
    ... except BadArgument as exc:
    ...     print(exc.accepted)
    a JSON object of the key columns ['player'] (not ['count'])
"""

from __future__ import annotations

import json
import re

from statekit.errors import BadArgument

#: A key given as JSON text (over REST, or a str in Python): at most this many characters
#: (5 key columns of MAX_KEY_VALUE_CHARS characters, each written as JSON escapes, fit)...
MAX_KEY_CHARS = 16_384
#: ...and arrays / objects nested at most this deep (a key is one object of plain values:
#: 2 levels; the bound keeps a hostile key from reaching Python's recursion limit).
MAX_KEY_DEPTH = 16
KEY_ACCEPTED = 'a JSON object of the key columns, e.g. {"player": "p07"}'
_NESTING = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')  # a JSON string, or a bracket
_SHOWN = 120  # characters of a refused key shown in its error


def shown(text: str) -> str:
    """``text``, cut to its first characters when long (an error names it, not all of it)."""
    return text if len(text) <= _SHOWN else f"{text[:_SHOWN]}... ({len(text):,} characters)"


def nesting_depth(text: str) -> int:
    """How deep arrays and objects nest in JSON ``text`` (brackets inside strings do not count).

    Example:
        >>> nesting_depth('{"player": "[[["}'), nesting_depth("[[[1]], 2]")
        (1, 3)
    """
    if text.count("[") + text.count("{") <= 1:
        return text.count("[") + text.count("{")
    depth = deepest = 0
    for match in _NESTING.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif token in "]}":
            depth -= 1
    return deepest


def parse_key_json(text: str | bytes, what: str = "key", accepted: str = KEY_ACCEPTED
                   ) -> object:
    """JSON ``text`` of a key, bounded: at most ``MAX_KEY_CHARS`` characters nested at most
    ``MAX_KEY_DEPTH`` deep; else (or when it is not JSON) BadArgument naming it. Never a
    RecursionError, however deep the text nests.

    Example:
        >>> parse_key_json('{"player": "p07"}')
        {'player': 'p07'}
        >>> try:
        ...     parse_key_json("[" * 2000)
        ... except BadArgument as exc:
        ...     print(exc.accepted.split(", ")[-1])
        nested at most 16 deep (this one: 2000)
    """
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise BadArgument(what, shown(repr(text)), f"{accepted} in UTF-8") from None
    check_key_text(text, what, accepted)
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        raise BadArgument(what, shown(text), accepted) from None


def check_key_text(text: str, what: str = "key", accepted: str = KEY_ACCEPTED) -> str:
    """``text`` when it is at most ``MAX_KEY_CHARS`` long and nests at most ``MAX_KEY_DEPTH``
    deep (JSON or not), else BadArgument naming it."""
    if len(text) > MAX_KEY_CHARS:
        raise BadArgument(what, shown(text), f"{accepted}, at most {MAX_KEY_CHARS:,} "
                                             f"characters long")
    depth = nesting_depth(text)
    if depth > MAX_KEY_DEPTH:
        raise BadArgument(what, shown(text), f"{accepted}, nested at most {MAX_KEY_DEPTH} "
                                             f"deep (this one: {depth})")
    return text


def parse_key_object(text: str | bytes, what: str, columns: list[str]) -> dict:
    """JSON ``text`` of a key that is one object naming only key ``columns`` (bounded as
    ``parse_key_json`` bounds it), else BadArgument naming it and the columns."""
    accepted = f"a JSON object of the key columns {columns}"
    value = parse_key_json(text, what, accepted)
    sent = shown(text if isinstance(text, str) else text.decode())
    if not isinstance(value, dict):
        raise BadArgument(what, sent, accepted)
    unknown = [name for name in value if name not in columns]
    if unknown:
        raise BadArgument(what, sent, f"{accepted} (not {unknown})")
    return value
