"""Where statekit keeps what it builds once per machine and reuses: ``cache_dir()``.

``$XDG_CACHE_HOME/statekit``, else ``~/.cache/statekit``. Nothing kept here is needed:
each entry is named by the versions it was built from and is built again when missing.

Example:
    >>> cache_dir({"XDG_CACHE_HOME": "/var/cache"}).as_posix()
    '/var/cache/statekit'
    >>> cache_dir({}).name
    'statekit'
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The folder of statekit's machine-wide cache (not created here)."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "statekit"
