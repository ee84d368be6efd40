"""Debian's Chromium, if it runs: the browser test (``tests/project/test_browser.py``)
drives it, and ``tests/conftest.py`` leaves the notebooks that test runs out of nbmake's
run only where it runs."""

from __future__ import annotations

import os
import shutil
import subprocess


def chromium() -> str | None:
    """Debian's Chromium (or ``$STATEKIT_CHROMIUM``), if it runs; else None."""
    path = os.environ.get("STATEKIT_CHROMIUM") or shutil.which("chromium")
    if not path:
        return None
    try:
        ok = subprocess.run([path, "--headless=new", "--no-sandbox", "--version"],
                            capture_output=True, timeout=60, check=False).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return None
    return path if ok else None
