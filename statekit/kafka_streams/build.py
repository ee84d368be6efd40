"""statekit's reference Kafka Streams application, built once per machine: where it lives in
statekit's cache, building it, and its class path.

The Java module beside this file (``jvm/``: a pom and one class per concept) is compiled with
``mvn`` against Maven Central's ``kafka-streams`` of the embedded broker's version, in a copy
of the folder, and its jar lands beside its runtime dependencies in
``<cache>/kafka-streams-app-<version>-<hash of the sources>/libs``: a change to a Java file
builds again, and the older builds go (``statekit.maven_jars``)::

    python -m statekit.kafka_streams.build            # build it (make does this for you)
    python -m statekit.kafka_streams.build --check    # say where it is, or what is wrong

Example:
    >>> app_jars({"XDG_CACHE_HOME": "/c"}).as_posix().startswith(
    ...     f"/c/statekit/kafka-streams-app-{KAFKA_VERSION}-")
    True
    >>> len(sources_hash())
    10
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from statekit.cache import keep_newest
from statekit.errors import KafkaStreamsAppError
from statekit.kafka.jars import KAFKA_VERSION
from statekit.maven_jars import JarSet

#: the Maven module of the application (pom.xml, src/main/java/...)
MODULE = Path(__file__).with_name("jvm")
#: the jar ``mvn package`` makes of the module (artifactId-version)
APP_JAR = "statekit-streams-app-1.jar"
#: the class each instance runs
MAIN_CLASS = "dev.statekit.streams.Main"
BUILD_COMMAND = "python -m statekit.kafka_streams.build"
#: builds of older sources kept beside the current one (another worktree's, say)
KEPT_BUILDS = 2


def sources_hash() -> str:
    """The first 10 hex digits of the SHA-256 of the module's files (names and bytes)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in MODULE.rglob("*") if p.is_file()):
        digest.update(path.relative_to(MODULE).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()[:10]


def app_jar_set() -> JarSet:
    """The application's jars as a ``JarSet`` built from ``MODULE``."""
    return JarSet(f"statekit's Kafka Streams {KAFKA_VERSION} application", KAFKA_VERSION,
                  MODULE / "pom.xml", APP_JAR, f"kafka-streams-app-{KAFKA_VERSION}-"
                  f"{sources_hash()}", BUILD_COMMAND, KafkaStreamsAppError, "kafka.version",
                  " (and a JDK 17 with javac: apt-get install openjdk-17-jdk-headless)",
                  build=True)


def app_jars(environ: Mapping[str, str] | None = None) -> Path:
    """The folder the built application and its dependencies live in (not checked)."""
    return app_jar_set().folder(environ)


def app_classpath(environ: Mapping[str, str] | None = None) -> str:
    """The application's class path (``folder/*``); KafkaStreamsAppError, saying how to
    build it, when it is not built (or not whole)."""
    return str(app_jar_set().require(app_jars(environ)) / "*")


def build(environ: Mapping[str, str] | None = None, quiet: bool = True) -> Path:
    """Build the application into the cache (once per version of its sources): the folder."""
    env = os.environ if environ is None else environ
    folder = app_jar_set().fetch(env, quiet)
    remove_old_builds(env)
    return folder


def remove_old_builds(environ: Mapping[str, str] | None = None) -> None:
    """Keep the ``KEPT_BUILDS`` newest builds of the application (about 92 MB each)."""
    keep_newest(app_jars(environ).parent.parent.glob(f"kafka-streams-app-{KAFKA_VERSION}-*"),
                KEPT_BUILDS)


def main(argv: list[str] | None = None) -> int:
    status = app_jar_set().main(argv, app_classpath, __doc__.split("\n")[0])
    if status == 0:
        remove_old_builds()
    return status


if __name__ == "__main__":
    sys.exit(main())
