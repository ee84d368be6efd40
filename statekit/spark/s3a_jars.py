"""Hadoop's S3A connector for Spark (``s3a://`` checkpoints): its jars on this machine.

PySpark ships Hadoop's client but not its S3A connector. ``hadoop-aws`` at the bundled
client's version (``HADOOP_VERSION``) and the AWS SDK v2 modules it calls come from Maven
Central through ``mvn`` (the pom ``jvm/s3a.pom.xml`` beside this module) into statekit's
per-machine cache, once (``statekit.maven_jars``), and are never committed::

    python -m statekit.spark.s3a_jars            # fetch them (``make s3a-jars``)
    python -m statekit.spark.s3a_jars --check    # say where they are, or what is wrong

``spark_session(s3a=True)`` puts them on the driver's class path (``spark.jars``); a session
without an ``s3a://`` location never loads them.

Example:
    >>> S3A_JARS.required_jar == f"hadoop-aws-{HADOOP_VERSION}.jar"
    True
"""

from __future__ import annotations

import contextlib
import hashlib
import sys
from collections.abc import Mapping
from pathlib import Path

from statekit.errors import S3AJarsMissing
from statekit.maven_jars import JarSet
from statekit.spark.s3a_settings import S3ASettings, spark_settings

#: PySpark 4's bundled Hadoop client (``pyspark/jars/hadoop-client-api-<version>.jar``):
#: hadoop-aws must be the same release
HADOOP_VERSION = "3.5.0"
POM = Path(__file__).with_name("jvm") / "s3a.pom.xml"
FETCH_COMMAND = "python -m statekit.spark.s3a_jars"
#: the pom's own digest names the cache folder too: a changed pom fetches its set anew
POM_DIGEST = hashlib.sha256(POM.read_bytes()).hexdigest()[:10]
S3A_JARS = JarSet(f"Hadoop {HADOOP_VERSION}'s S3A connector jars", HADOOP_VERSION, POM,
                  f"hadoop-aws-{HADOOP_VERSION}.jar", f"hadoop-aws-{HADOOP_VERSION}-{POM_DIGEST}",
                  FETCH_COMMAND, S3AJarsMissing, "hadoop.version", " (or `make s3a-jars`)")


def s3a_jars(environ: Mapping[str, str] | None = None) -> list[Path]:
    """The connector's jars, checked whole; S3AJarsMissing saying how to fetch them."""
    return S3A_JARS.jars(environ)


def main(argv: list[str] | None = None) -> int:
    return S3A_JARS.main(argv, lambda: f"{len(s3a_jars())} jars in {S3A_JARS.folder()}",
                         __doc__.split("\n")[0])


if __name__ == "__main__":
    sys.exit(main())


def driver_settings(settings: dict[str, str]) -> dict[str, str]:
    """What a driver JVM for ``s3a://`` checkpoints adds to ``settings``: the connector's
    jars on ``spark.jars`` and, when they are found (``S3ASettings``), the keys and endpoint
    as ``spark.hadoop.fs.s3a.*`` (those ``settings`` has win)."""
    from statekit.errors import ObjectStoreError

    jars = [settings["spark.jars"]] if settings.get("spark.jars") else []
    added = {"spark.jars": ",".join(jars + [str(jar) for jar in s3a_jars()])}
    with contextlib.suppress(ObjectStoreError):  # none yet: named when a location is read
        found = spark_settings(S3ASettings.resolve(None, settings))
        added.update((k, v) for k, v in found.items() if k not in settings)
    return added
