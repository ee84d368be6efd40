"""The typed options' machinery: what travels together is one small frozen dataclass.

The option classes themselves are this package's other modules (``statekit.options``).

A class of options is a frozen dataclass that mixes in ``Options``: ``to_dict()`` gives its
JSON-ready form (what a worker process receives) and ``from_dict()`` reads it back, naming a
missing or unknown field and the accepted ones. A field holding a richer object (a
``KafkaConnection``, a ``QuerySpec``) says how to encode and decode it with
``codec(encode, decode)`` in its metadata.

A function that takes options objects can still take their fields as keyword arguments
("shortcuts", what people type): ``route`` sends each keyword to its object by one table,
and ``settle`` builds the object, refusing a setting given both ways.

Example:
    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class Pace(Options):
    ...     rate: float = 1.0
    ...     burst: int = 10
    >>> Pace.from_dict({"rate": 2.0}).to_dict()
    {'rate': 2.0, 'burst': 10}
    >>> Pace.from_dict({"speed": 2.0})
    Traceback (most recent call last):
    ...
    statekit.errors.BadArgument: bad Pace field: 'speed'; accepted: rate, burst
    >>> route({"rate": 3.0}, {"rate": "pace", "keys": "spec"}, "run()")
    {'pace': {'rate': 3.0}}
    >>> settle(Pace(rate=2.0), Pace, {"rate": 3.0}, "pace")
    Traceback (most recent call last):
    ...
    statekit.errors.BadArgument: bad rate with pace=: ['rate']; accepted: each setting once: \
inside pace=Pace(...) or as keyword arguments, not both
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from statekit.errors import BadArgument

T = TypeVar("T", bound="Options")


def codec(encode: Callable[[Any], Any], decode: Callable[[Any], Any]) -> dict:
    """Field metadata: how ``to_dict`` encodes a (non-None) value and ``from_dict`` decodes it.

    Example: ``kafka: KafkaConnection | None = field(default=None, metadata=codec(...))``.
    """
    return {"encode": encode, "decode": decode}


def _plain(value: Any) -> Any:
    """``value`` as JSON-ready data: tuples become lists, objects with ``to_dict`` dicts."""
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if hasattr(value, "to_dict"):
        return value.to_dict()
    return value


class Options:
    """Mixin of a frozen dataclass of options: ``to_dict`` / ``from_dict``, checked."""

    @classmethod
    def field_names(cls) -> list[str]:
        """The accepted field names, in declaration order."""
        return [f.name for f in dataclasses.fields(cls)]

    def to_dict(self) -> dict:
        """Every field as JSON-ready data (``from_dict`` reads it back)."""
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            encode = f.metadata.get("encode")
            out[f.name] = encode(value) if encode is not None and value is not None \
                else _plain(value)
        return out

    @classmethod
    def from_dict(cls: type[T], data: Mapping) -> T:
        """The options ``to_dict`` described; a field left out takes its default.

        Raises:
            BadArgument: ``data`` is not a dict, names an unknown field, lacks a required
                one, or holds a bad value (the field is named, with what it accepts).
        """
        names = cls.field_names()
        if not isinstance(data, Mapping):
            raise BadArgument(f"{cls.__name__} description", data,
                              f"a dict with fields among {', '.join(names)}")
        unknown = [k for k in data if k not in names]
        if unknown:
            raise BadArgument(f"{cls.__name__} field", unknown[0], names)
        required = [f.name for f in dataclasses.fields(cls)
                    if f.default is dataclasses.MISSING
                    and f.default_factory is dataclasses.MISSING]
        missing = [n for n in required if n not in data]
        if missing:
            raise BadArgument(f"{cls.__name__} description", dict(data),
                              f"a dict with at least {', '.join(required)} "
                              f"({missing[0]} is missing)")
        values = {}
        for f in dataclasses.fields(cls):
            if f.name in data:
                value, decode = data[f.name], f.metadata.get("decode")
                values[f.name] = decode(value) if decode is not None and value is not None \
                    else value
        return cls(**values)


def route(given: Mapping[str, Any], table: Mapping[str, str], where: str
          ) -> dict[str, dict[str, Any]]:
    """The keyword arguments ``given``, grouped by where ``table`` sends each (keyword →
    target name; the keyword is the field's name there).

    Raises:
        BadArgument: a keyword the table does not know (named, with every accepted one).
    """
    routed: dict[str, dict[str, Any]] = {}
    for keyword, value in given.items():
        if keyword not in table:
            raise BadArgument(f"keyword argument of {where}", keyword, sorted(table))
        routed.setdefault(table[keyword], {})[keyword] = value
    return routed


def settle(options: T | None, cls: type[T], shortcuts: Mapping[str, Any], label: str,
           defaults: Mapping[str, Any] | None = None) -> T:
    """``options``, or a ``cls`` built from ``shortcuts`` (over ``defaults``) when None.

    Raises:
        BadArgument: ``options`` is not a ``cls``, or shortcuts come with it (each setting
            is given once: inside the object or as keyword arguments).
    """
    if options is None:
        return cls(**{**(defaults or {}), **shortcuts})
    if not isinstance(options, cls):
        raise BadArgument(label, options, f"a {cls.__name__} (or leave it out)")
    if shortcuts:
        raise BadArgument(f"{', '.join(shortcuts)} with {label}=", sorted(shortcuts),
                          f"each setting once: inside {label}={cls.__name__}(...) or as "
                          "keyword arguments, not both")
    return options
