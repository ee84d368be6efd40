"""Where statekit keeps what it builds once per machine and reuses: ``cache_dir()``, and how
old entries go (``keep_newest``, ``remove_stale``).

``$XDG_CACHE_HOME/statekit``, else ``~/.cache/statekit``. Nothing kept here is needed:
each entry is named by the versions it was built from and is built again when missing.

Example:
    >>> cache_dir({"XDG_CACHE_HOME": "/var/cache"}).as_posix()
    '/var/cache/statekit'
    >>> cache_dir({}).name
    'statekit'
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Iterable, Mapping
from pathlib import Path


def cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The folder of statekit's machine-wide cache (not created here)."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "statekit"


def keep_newest(entries: Iterable[Path], kept: int) -> None:
    """Remove all but the ``kept`` newest of ``entries`` (files or folders, by modification
    time): other venvs', JDKs' or Spark versions' builds of one cache entry."""
    for old in sorted(entries, key=lambda p: p.stat().st_mtime, reverse=True)[kept:]:
        _remove(old)


def remove_stale(entries: Iterable[Path], max_age_s: float) -> None:
    """Remove those of ``entries`` (files or folders) last changed more than ``max_age_s``
    seconds ago: the staging of a build that died (a JVM killed mid-dump, ``kill -9``)."""
    cutoff = time.time() - max_age_s
    for entry in entries:
        with contextlib.suppress(OSError):
            if entry.stat().st_mtime < cutoff:
                _remove(entry)


def _remove(entry: Path) -> None:
    if entry.is_dir() and not entry.is_symlink():
        shutil.rmtree(entry, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            entry.unlink()
