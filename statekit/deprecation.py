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


def deprecated(old: str, new: str, stacklevel: int = 3) -> None:
    """Warn that ``old`` is deprecated in favour of ``new`` (at the caller's caller)."""
    warnings.warn(f"{old} is deprecated and will be removed in the next release: use {new}",
                  DeprecationWarning, stacklevel=stacklevel)
