"""Which Java statekit runs, and what version it is: one rule for Spark's JVM, the embedded
Apache Kafka broker and the doctor.

``$JAVA_HOME/bin/java`` when ``JAVA_HOME`` names a JDK, else the ``java`` on ``PATH``: what
PySpark's launcher runs, so the broker and Spark never pick two different JDKs by accident
(a machine may hold a newer JDK beside Java 17 that neither is meant to use).

Example:
    >>> parse_java_version('openjdk version "17.0.15" 2025-04-15')
    17
    >>> parse_java_version('java version "1.8.0_392"')
    8
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

#: the oldest Java that Spark 4 and Apache Kafka 4 run on
MIN_JAVA = 17
JAVA_FIX = "apt-get install openjdk-17-jre-headless (or set JAVA_HOME to a JDK 17+)"


def parse_java_version(text: str) -> int | None:
    """The Java feature version in ``java -version`` output (1.8.0_392 → 8); None if absent."""
    match = re.search(r'version "(\d+)(?:\.(\d+))?[^"]*"', text or "")
    if not match:
        return None
    major = int(match.group(1))
    if major == 1 and match.group(2) is not None:  # the old 1.x scheme: 1.8 is Java 8
        return int(match.group(2))
    return major


def java_executable() -> str | None:
    """``$JAVA_HOME/bin/java`` if it exists, else ``java`` on PATH (what Spark would use)."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").is_file():
        return str(Path(home) / "bin" / "java")
    return shutil.which("java")
