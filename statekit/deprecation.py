"""Deprecated spellings: kept for one release, each with a ``DeprecationWarning`` that names
the spelling to use.

Example:
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     deprecated("query.stop()", "query.close()")
    >>> str(caught[0].message)
    'query.stop() is deprecated and will be removed in the next release: use query.close()'
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping


def deprecated(old: str, new: str, stacklevel: int = 3) -> None:
    """Warn that ``old`` is deprecated in favour of ``new`` (at the caller's caller)."""
    warnings.warn(f"{old} is deprecated and will be removed in the next release: use {new}",
                  DeprecationWarning, stacklevel=stacklevel)


def renamed(module: str, names: Mapping[str, tuple[str, object]]) -> Callable[[str], object]:
    """A module ``__getattr__`` for its renamed names: ``names`` maps an old name to (the new
    name, its object); the old name still gives the object, with a ``DeprecationWarning``.

    Example:
        >>> __getattr__ = renamed("statekit.stores", {"SessionKey": ("Session", tuple)})
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     __getattr__("SessionKey")
        <class 'tuple'>
        >>> str(caught[0].message).endswith("use statekit.stores.Session")
        True
    """

    def __getattr__(name: str) -> object:
        if name not in names:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        new, value = names[name]
        deprecated(f"{module}.{name}", f"{module}.{new}")  # points at the caller's line
        return value

    return __getattr__
