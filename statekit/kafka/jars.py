"""Apache Kafka's jars on this machine: where they are, fetching them once, and checking them.

The embedded broker (``statekit.kafka.broker``) runs Apache Kafka from its own jars. They
come from Maven Central through ``mvn`` (the pom ``jvm/kafka-broker.pom.xml`` beside this
module names them) into statekit's per-machine cache, once, and are never committed::

    python -m statekit.kafka.jars            # fetch them (make does this for you)
    python -m statekit.kafka.jars --check    # say where they are, or what is wrong

``STATEKIT_KAFKA_HOME`` pointing at an unpacked Apache Kafka distribution (its ``libs/``
folder) is used instead when set, for a machine without Maven.

A fetched folder holds ``jars.json``: each jar's name and size as fetched. A jar missing,
cut short or not a zip is named, with the command that fetches the set again.

Example:
    >>> jars_dir({"XDG_CACHE_HOME": "/c"}).as_posix() == f"/c/statekit/kafka-{KAFKA_VERSION}/libs"
    True
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Mapping
from pathlib import Path

from statekit.atomic import write_atomic
from statekit.cache import cache_dir, remove_stale
from statekit.errors import KafkaJarsMissing

#: the Apache Kafka release the embedded broker runs (and, later, Kafka Streams beside Spark)
KAFKA_VERSION = "4.1.1"
#: the pom that names the broker's jars (Maven's coordinates: org.apache.kafka:kafka_2.13)
POM = Path(__file__).with_name("jvm") / "kafka-broker.pom.xml"
#: the jar the broker's main class ``kafka.Kafka`` lives in
SERVER_JAR = f"kafka_2.13-{KAFKA_VERSION}.jar"
MANIFEST = "jars.json"
HOME_VARIABLE = "STATEKIT_KAFKA_HOME"
FETCH_COMMAND = "python -m statekit.kafka.jars"


def how_to_get() -> str:
    """What a person can do when the jars are missing (named in every error about them)."""
    return (f"fetch them with `{FETCH_COMMAND}` (needs Maven: apt-get install maven), or set "
            f"{HOME_VARIABLE} to an unpacked Apache Kafka {KAFKA_VERSION} distribution; "
            "statekit.kafka.TansuBroker runs without Java (memory only, no compaction)")


def jars_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The folder the fetched jars live in (statekit's cache, by Kafka version)."""
    return cache_dir(environ) / f"kafka-{KAFKA_VERSION}" / "libs"


def problems(folder: Path) -> list[str]:
    """What is wrong with a fetched jar folder (empty when it is whole).

    Example:
        >>> problems(Path("/nonexistent/libs"))
        ['/nonexistent/libs does not exist']
    """
    if not folder.is_dir():
        return [f"{folder} does not exist"]
    try:
        listed = json.loads((folder / MANIFEST).read_text())["jars"]
    except (OSError, ValueError, KeyError, TypeError):
        return [f"{folder / MANIFEST} is missing or unreadable (a fetch that did not finish)"]
    found = []
    for name, size in sorted(listed.items()):
        jar = folder / name
        if not jar.is_file():
            found.append(f"{jar} is missing")
        elif jar.stat().st_size != size:
            found.append(f"{jar} has {jar.stat().st_size} bytes, {size} were fetched")
        elif not zipfile.is_zipfile(jar):
            found.append(f"{jar} is not a jar (zip)")
    if SERVER_JAR not in listed:
        found.append(f"{folder} has no {SERVER_JAR}")
    return found


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
        libs = jars_dir(env)
        found = problems(libs)
        if found:
            raise KafkaJarsMissing(
                f"Apache Kafka {KAFKA_VERSION}'s jars are not usable: {'; '.join(found[:3])}"
                f"{' …' if len(found) > 3 else ''}; {how_to_get()}")
    return str(libs / "*")


def fetch(environ: Mapping[str, str] | None = None, quiet: bool = True) -> Path:
    """Copy Apache Kafka's broker jars from Maven Central into the cache (once): the folder.

    A folder already whole is kept; the fetch goes to a staging folder renamed whole, so an
    interrupted fetch never leaves a half folder in place.
    """
    env = os.environ if environ is None else environ
    target = jars_dir(env)
    if not problems(target):
        return target
    mvn = shutil.which("mvn")
    if mvn is None:
        raise KafkaJarsMissing(f"cannot fetch Apache Kafka's jars: no `mvn` on PATH; "
                               f"{how_to_get()}")
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale(target.parent.glob("libs.staging-*"), max_age_s=3600)
    staging = Path(tempfile.mkdtemp(prefix="libs.staging-", dir=target.parent))
    cmd = [mvn, "-B", *(["-q"] if quiet else []), "-f", str(POM),
           "dependency:copy-dependencies", f"-Dkafka.version={KAFKA_VERSION}",
           "-DincludeScope=runtime", f"-DoutputDirectory={staging}"]
    try:
        done = subprocess.run(cmd, capture_output=quiet, text=True, check=False, timeout=900)
        if done.returncode != 0:
            tail = ((done.stdout or "") + (done.stderr or "")).strip()[-1500:]
            raise KafkaJarsMissing(f"`{' '.join(cmd)}` exited with {done.returncode}:\n{tail}\n"
                                   f"{how_to_get()}")
        jars = {jar.name: jar.stat().st_size for jar in staging.glob("*.jar")}
        write_atomic(staging / MANIFEST, json.dumps(
            {"kafka_version": KAFKA_VERSION, "jars": jars}, indent=1, sort_keys=True))
        if problems(staging):
            raise KafkaJarsMissing(f"the fetched jars are not whole: {problems(staging)}")
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=FETCH_COMMAND, description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="only say where the jars are, or what is wrong (exit 1)")
    args = parser.parse_args(argv)
    try:
        if not args.check:
            fetch(quiet=True)
        classpath = kafka_classpath()
    except KafkaJarsMissing as exc:
        print(exc, file=sys.stderr)
        return 1
    print(f"Apache Kafka {KAFKA_VERSION} jars: {classpath}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
