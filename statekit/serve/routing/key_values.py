"""A key column's value, checked by its Spark type: what Python values each type takes,
that Spark can hash them, and the JSON Schema that states it.

A group key (or a part's key column) of Spark type ``string`` takes a ``str``, ``int`` a
whole number that fits 32 bits, ``double`` any real number, and so on (``checked_value``);
every value must also hash as Spark hashes it (``statekit.serve.routing.value_hash``: a
string with a lone surrogate has no UTF-8 bytes, so it is refused). Text is bounded
(``MAX_KEY_VALUE_CHARS``, ``check_text_length``). ``VALUE_SCHEMAS`` states the same per
type for the REST service's OpenAPI schema.

Example:
    >>> checked_value("level", 3, "int")
    3
    >>> VALUE_SCHEMAS["tinyint"]
    {'type': 'integer', 'minimum': -128, 'maximum': 127}
    >>> try:
    ...     checked_value("player", 7, "string")
    ... except BadArgument as exc:
    ...     print(exc)
    bad key player: 7; accepted: a string value (the key column's type)
"""

from __future__ import annotations

import numbers
import sys
from collections.abc import Mapping

from statekit.errors import BadArgument
from statekit.serve.routing.key_text import shown
from statekit.serve.routing.value_hash import SEED, TYPES, hash_value, kind_of
from statekit.validate import is_whole_number


def _real(value: object) -> bool:
    return isinstance(value, numbers.Real) and type(value).__name__ not in ("bool", "bool_")


def _whole(bits: int):
    return lambda value: is_whole_number(value) and -2**bits <= int(value) < 2**bits


_FITS = {  # Spark type of a group key -> the Python values it takes
    "string": lambda value: isinstance(value, str),
    "boolean": lambda value: type(value).__name__ in ("bool", "bool_"),
    "double": _real, "float": _real,
    "tinyint": _whole(7), "smallint": _whole(15), "int": _whole(31), "bigint": _whole(63),
}


#: A group key's text in a key sent as JSON text (over REST): at most this many characters
MAX_KEY_VALUE_CHARS = 256
_FLOAT_MAX = 3.4028234663852886e38  # Spark's float (32 bits)


def _whole_schema(bits: int) -> dict:
    return {"type": "integer", "minimum": -2**bits, "maximum": 2**bits - 1}


#: Spark type of a group key -> the JSON Schema of its values (what ``_FITS`` takes)
VALUE_SCHEMAS = {
    "string": {"type": "string", "maxLength": MAX_KEY_VALUE_CHARS},
    "boolean": {"type": "boolean"},
    "double": {"type": "number", "minimum": -sys.float_info.max,
               "maximum": sys.float_info.max},
    "float": {"type": "number", "minimum": -_FLOAT_MAX, "maximum": _FLOAT_MAX},
    "tinyint": _whole_schema(7), "smallint": _whole_schema(15), "int": _whole_schema(31),
    "bigint": _whole_schema(63),
}
ANY_VALUE_SCHEMA = {"type": ["string", "number", "boolean"], "maxLength": MAX_KEY_VALUE_CHARS}


def checked_value(name: str, value: object, kind: str | None) -> object:
    """``value`` of key column ``name`` when it is a value of Spark type ``kind`` (None: any
    plain value) that Spark can hash; else BadArgument naming it and the type.

    Example:
        >>> checked_value("player", "p07", "string")
        'p07'
        >>> checked_value("n", 2**40, "int")
        Traceback (most recent call last):
        ...
        statekit.errors.BadArgument: bad key n: 1099511627776; accepted: a int value \
(the key column's type)
    """
    fits = _FITS.get(kind, lambda v: not isinstance(v, Mapping | list | tuple | set))
    hashed = kind if kind in TYPES else (kind_of(value) if kind is None else None)
    try:
        ok = fits(value) and (hashed is None or isinstance(hash_value(value, hashed, SEED), int))
    except (TypeError, ValueError, OverflowError):  # e.g. a lone surrogate in a string
        ok = False
    if not ok:
        raise BadArgument(f"key {name}", value, f"a {kind or 'string, number or bool'} value "
                                                f"(the key column's type)")
    return value


def check_text_length(name: str, value: object, what: str = "key") -> None:
    """BadArgument naming key column ``name`` when ``value`` is text longer than
    ``MAX_KEY_VALUE_CHARS`` characters."""
    if isinstance(value, str) and len(value) > MAX_KEY_VALUE_CHARS:
        raise BadArgument(f"{what} {name}", shown(value),
                          f"text of at most {MAX_KEY_VALUE_CHARS} characters")
