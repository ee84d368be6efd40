"""Child processes that never outlive the process that started them.

Every process statekit starts (the embedded broker, drill workers, serving
instances) is started through ``spawn``: on Linux the kernel sends the child
SIGTERM the moment its parent dies, however it dies (``kill -9`` included,
``PR_SET_PDEATHSIG``), so a crashed notebook kernel or test run leaves no orphan
behind. ``stop`` ends one politely, then firmly.

Example:
    >>> proc = spawn([sys.executable, "-c", "import time; time.sleep(60)"])
    >>> stop(proc, timeout=5)
    >>> proc.poll() is not None
    True
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Sequence

PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:  # pragma: no cover - runs in the child, before exec
    """Ask Linux to SIGTERM this process when its parent dies (no-op elsewhere)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def spawn(args: Sequence[str], **popen) -> subprocess.Popen:
    """``subprocess.Popen(args, **popen)`` for a child that dies with this process."""
    if os.name == "posix":
        popen.setdefault("preexec_fn", die_with_parent)
    return subprocess.Popen(list(args), **popen)


def stop(proc: subprocess.Popen, timeout: float = 5.0) -> None:
    """SIGTERM ``proc``, SIGKILL it after ``timeout`` seconds; wait for it. Idempotent."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout)
