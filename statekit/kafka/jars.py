"""Apache Kafka's jars on this machine: where they are, fetching them once, and checking them.

The embedded broker (``statekit.kafka.broker``) runs Apache Kafka from its own jars. They
come from Maven Central through ``mvn`` (the pom ``jvm/kafka-broker.pom.xml`` beside this
module names them) into statekit's per-machine cache, once, and are never committed
(``statekit.maven_jars``)::

    python -m statekit.kafka.jars            # fetch them (make does this for you)
    python -m statekit.kafka.jars --check    # say where they are, or what is wrong

``STATEKIT_KAFKA_HOME`` pointing at an unpacked Apache Kafka distribution (its ``libs/``
folder) is used instead when set, for a machine without Maven.

Example:
    >>> jars_dir({"XDG_CACHE_HOME": "/c"}).as_posix() == f"/c/statekit/kafka-{KAFKA_VERSION}/libs"
    True
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from statekit.errors import KafkaJarsMissing
from statekit.maven_jars import JarSet

#: the Apache Kafka release the embedded broker runs (and, later, Kafka Streams beside Spark)
KAFKA_VERSION = "4.1.1"
#: the pom that names the broker's jars (Maven's coordinates: org.apache.kafka:kafka_2.13)
POM = Path(__file__).with_name("jvm") / "kafka-broker.pom.xml"
#: the jar the broker's main class ``kafka.Kafka`` lives in
SERVER_JAR = f"kafka_2.13-{KAFKA_VERSION}.jar"
HOME_VARIABLE = "STATEKIT_KAFKA_HOME"
FETCH_COMMAND = "python -m statekit.kafka.jars"
KAFKA_JARS = JarSet(
    f"Apache Kafka {KAFKA_VERSION}'s jars", KAFKA_VERSION, POM, SERVER_JAR,
    f"kafka-{KAFKA_VERSION}", FETCH_COMMAND, KafkaJarsMissing, "kafka.version",
    f", or set {HOME_VARIABLE} to an unpacked Apache Kafka {KAFKA_VERSION} distribution; "
    "statekit.kafka.TansuBroker runs without Java (memory only, no compaction)")


def how_to_get() -> str:
    """What a person can do when the jars are missing (named in every error about them)."""
    return KAFKA_JARS.how_to_get()


def jars_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The folder the fetched jars live in (statekit's cache, by Kafka version)."""
    return KAFKA_JARS.folder(environ)


def problems(folder: Path) -> list[str]:
    """What is wrong with a fetched jar folder (empty when it is whole).

    Example:
        >>> problems(Path("/nonexistent/libs"))
        ['/nonexistent/libs does not exist']
    """
    return KAFKA_JARS.problems(folder)


def _home_libs(environ: Mapping[str, str]) -> Path | None:
    home = environ.get(HOME_VARIABLE)
    if not home:
        return None
    libs = Path(home) / "libs"
    if not any(libs.glob("kafka_2.13-*.jar")):
        raise KafkaJarsMissing(
            f"{HOME_VARIABLE}={home!r} is not an unpacked Apache Kafka distribution: "
            f"{libs} has no kafka_2.13-*.jar; {how_to_get()}")
    return libs


def kafka_classpath(environ: Mapping[str, str] | None = None) -> str:
    """The broker's class path (``folder/*``); KafkaJarsMissing, saying how to get them,
    when the jars are not here or not whole."""
    env = os.environ if environ is None else environ
    libs = _home_libs(env)
    if libs is None:
        libs = KAFKA_JARS.require(jars_dir(env))
    return str(libs / "*")


def fetch(environ: Mapping[str, str] | None = None, quiet: bool = True) -> Path:
    """Copy Apache Kafka's broker jars from Maven Central into the cache (once): the folder."""
    return KAFKA_JARS.fetch(environ, quiet)


def main(argv: list[str] | None = None) -> int:
    return KAFKA_JARS.main(argv, kafka_classpath, __doc__.split("\n")[0])


if __name__ == "__main__":
    sys.exit(main())
