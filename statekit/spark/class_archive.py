"""The driver JVM's class-data archive: Spark's classes mapped from a file instead of loaded.

A fresh driver JVM loads, parses and verifies some 20,000 of Spark's classes before and
during the first query: most of ``spark_session``'s few seconds and much of the first
``start_query`` and micro-batch. JDK 13 and later can write the classes a run loaded to
a *dynamic class-data archive* when that JVM exits (``-XX:ArchiveClassesAtExit``); a JVM
started with ``-XX:SharedArchiveFile`` maps them from it instead. Measured here (a fresh
process to its first micro-batch, see ``bench/README.md``, "cold start"): ``spark_session``
6–8 s → 3.7–4.2 s. Nothing changes once the JVM is warm.

``ClassArchive`` owns the archive file: where it lives (``cache_dir()/jvm-classes``), the
key it is valid for (the JVM build, the class path, and each of Spark's jars with its size
and modification time, as the JVM checks them), how it is built (a fresh Python process
runs a small statekit-shaped streaming query on a JVM told to write the archive at exit)
and the JVM option that uses it. The JVM crashes (SIGBUS) on a truncated archive, so one
is only ever written under a temporary name by a JVM that then exited normally, checked,
and renamed into place; an archive is never written in place.
A JVM given an archive of another class path says so on its console and runs without it.

Build it once per machine (``make`` does): ``python -m statekit.spark.class_archive``.
``spark_session`` then uses it whenever it starts a driver JVM it matches.

Example:
    >>> archive = ClassArchive.for_this_machine()             # doctest: +SKIP
    >>> archive.java_option()                                 # doctest: +SKIP
    '-XX:SharedArchiveFile=/root/.cache/statekit/jvm-classes/spark-4.3.0-….jsa'
    >>> ClassArchive.from_parts("/tmp/x", java_version=(11, 0)).supported
    False
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from statekit.cache import cache_dir, keep_newest, remove_stale

#: the first bytes of a HotSpot dynamic archive (``CDS_DYNAMIC_ARCHIVE_MAGIC``, little-endian)
_MAGIC = (0xF00BABA8).to_bytes(4, "little")
_MIN_BYTES = 1 << 20      # a dynamic archive of Spark's classes is ~180 MB; below 1 MB: torn
BUILD_TIMEOUT_S = 600.0   # the build's child process: session, a two-batch query, JVM exit
_FOLDER = "jvm-classes"
KEPT_ARCHIVES = 3         # archives kept per machine (one per venv / JDK / Spark in use)
STALE_STAGING_S = 3600.0  # a staging file this old is a build that died (a JVM killed mid-dump)


@dataclass(frozen=True)
class ClassArchive:
    """One class-data archive file: its path, and whether this JVM can use one at all."""

    path: Path
    #: the Java feature version found (None: no ``java`` was found)
    java_version: tuple[int, int] | None

    @classmethod
    def from_parts(cls, path: str | os.PathLike, java_version: tuple[int, int] | None
                   ) -> ClassArchive:
        """An archive at ``path`` for a JVM of ``java_version`` (tests, other layouts)."""
        return cls(Path(path), java_version)

    @classmethod
    def for_this_machine(cls, spark_home: str | os.PathLike | None = None,
                         extra_class_path: str = "") -> ClassArchive:
        """The archive for the JVM PySpark would start here, Spark's jars under
        ``spark_home`` (default: the installed PySpark's) and ``extra_class_path``
        (``spark.driver.extraClassPath``)."""
        java = _java_home()
        version = _java_version(java) if java is not None else None
        home = Path(spark_home) if spark_home else _pyspark_home()
        key = hashlib.sha1()
        for part in (str(java), _stat_key(_libjvm(java)) if java else "",
                     _stat_key(java / "lib" / "modules") if java else "", str(home),
                     _jars_key(home / "jars"), extra_class_path):
            key.update(part.encode() + b"\0")
        import pyspark

        name = f"spark-{pyspark.__version__}-{key.hexdigest()[:16]}.jsa"
        return cls(cache_dir() / _FOLDER / name, version)

    @property
    def supported(self) -> bool:
        """True when the JVM can write and map a dynamic archive (JDK 13 or later)."""
        return self.java_version is not None and self.java_version >= (13, 0)

    def ready(self) -> bool:
        """True when the archive file is there, whole as far as its size and magic tell."""
        return self.supported and _looks_whole(self.path)

    def mapped_by(self, pid: int) -> bool:
        """True when process ``pid`` (a driver JVM) maps this archive (Linux's
        ``/proc/<pid>/maps``; False where that cannot be read)."""
        try:
            with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as maps:
                return any(str(self.path) in line for line in maps)
        except OSError:
            return False

    def java_option(self) -> str:
        """``-XX:SharedArchiveFile=<path>`` when ``ready()``, else ``""``."""
        return f"-XX:SharedArchiveFile={self.path}" if self.ready() else ""

    @property
    def build_log(self) -> Path:
        """Where ``build`` writes its child processes' output (the JVM's included)."""
        return self.path.parent / "build.log"

    def build(self, timeout: float = BUILD_TIMEOUT_S) -> bool:
        """Write the archive (in a fresh Python process; ~30 s); True when it is ready.

        The child starts a driver JVM told to archive its classes at exit, runs the
        training query (a Python data source, JSON parsing, a watermark, a windowed
        aggregation in RocksDB) and a state read, then ends the JVM normally. Its archive
        is renamed into place only once that JVM exited with status 0, the file looks
        whole, and a second child's JVM started with it under ``-Xshare:on`` (which makes
        a torn or mismatched archive fatal there, not later in yours).
        Of the archives in its folder (other venvs', JDKs', Spark versions') the
        ``KEPT_ARCHIVES`` newest are kept, the rest removed (a JVM that maps one keeps its
        pages: removing a file never truncates it).
        """
        if not self.supported:
            return False
        self.path.parent.mkdir(parents=True, exist_ok=True)
        remove_stale(self.path.parent.glob("*.tmp"), STALE_STAGING_S)
        fd, staging = tempfile.mkstemp(prefix=self.path.name + ".", suffix=".tmp",
                                       dir=self.path.parent)
        os.close(fd)
        os.unlink(staging)  # the JVM creates it at exit
        log = open(self.build_log, "w", encoding="utf-8")  # noqa: SIM115 - closed below

        def child(mode: str) -> bool:
            command = [sys.executable, "-m", "statekit.spark.class_archive", mode, staging]
            log.write(f"$ {' '.join(command)}\n")
            log.flush()
            done = subprocess.run(command, timeout=timeout, stdout=log, stderr=log,
                                  check=False)
            log.write(f"exit status {done.returncode}\n")
            return done.returncode == 0

        try:
            # write it, then start a JVM that must map it (-Xshare:on: any flaw is fatal there)
            if not (child("--dump") and _looks_whole(Path(staging)) and child("--check")):
                return False
            os.replace(staging, self.path)
            keep_newest(self.path.parent.glob("*.jsa"), KEPT_ARCHIVES)
            return True
        except subprocess.TimeoutExpired:
            log.write(f"timed out after {timeout:.0f} s\n")
            return False
        finally:
            log.close()
            with contextlib.suppress(OSError):
                os.unlink(staging)


def _looks_whole(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            head = f.read(4)
        return path.stat().st_size >= _MIN_BYTES and head == _MAGIC
    except OSError:
        return False


def _java_home() -> Path | None:
    """The JDK PySpark's launcher runs: ``$JAVA_HOME``, else the ``java`` on ``PATH``."""
    if os.environ.get("JAVA_HOME"):
        return Path(os.environ["JAVA_HOME"]).resolve()
    java = shutil.which("java")
    return Path(java).resolve().parent.parent if java else None


def _java_version(home: Path) -> tuple[int, int] | None:
    """(feature, update) from the JDK's ``release`` file, e.g. (17, 0)."""
    try:
        text = (home / "release").read_text(errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("JAVA_VERSION="):
            parts = line.split("=", 1)[1].strip().strip('"').split(".")
            with contextlib.suppress(ValueError):
                if parts[0] == "1":  # 1.8.0_x
                    return (int(parts[1]), 0)
                return (int(parts[0]), int(parts[1]) if len(parts) > 1 else 0)
    return None


def _libjvm(home: Path) -> Path:
    found = sorted(home.glob("lib/server/libjvm.*")) or sorted(home.glob("**/libjvm.*"))
    return found[0] if found else home


def _stat_key(path: Path) -> str:
    try:
        st = path.stat()
    except OSError:
        return f"{path}:missing"
    return f"{path}:{st.st_size}:{st.st_mtime_ns}"


def _jars_key(jars: Path) -> str:
    """Each jar's name, size and modification time: what the JVM checks of every class-path
    entry before it maps an archive ("A jar file is not the one used while building the
    shared archive file"). A venv made anew at the same path has the same jars with new
    times, and so gets a new key, not an archive its JVM refuses."""
    try:
        stats = [(p.name, p.stat()) for p in jars.iterdir()]
        return ";".join(sorted(f"{name}:{st.st_size}:{st.st_mtime_ns}" for name, st in stats))
    except OSError:
        return f"{jars}:missing"


def _pyspark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


# --- the build's child process ------------------------------------------------------------
#: the name of the query the archive's build runs
TRAINING_QUERY = "statekit-class-archive"


def training_query(spark, work: str, rows: int = 2000, batches: int = 2):
    """The query whose classes the archive holds: ``batches`` micro-batches of ``rows``
    broker-free events (``WarmUpSource``, the Kafka source's columns) parsed from JSON with
    a corrupt-record column, observed, watermarked and counted in tumbling windows in
    RocksDB, into ``noop`` (``availableNow``; its checkpoint under ``work``): the classes
    statekit's own queries load."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    from statekit.spark.kafka_source import PARSED, WARM_UP_FORMAT, WarmUpSource

    spark.dataSource.register(WarmUpSource)
    schema = StructType.fromDDL("player string, game string, score long, ts timestamp")
    raw = (spark.readStream.format(WARM_UP_FORMAT).option("rows", rows)
           .option("batches", batches).option("valueSchema", schema.json())
           .option("stopFile", os.path.join(work, "stop")).load())
    with_corrupt = StructType.fromDDL(
        "player string, game string, score long, ts timestamp, _corrupt_record string")
    slow = F.from_json(F.col("value").cast("string"), with_corrupt,
                       {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": "_corrupt_record"})
    fast = F.struct(*[F.col(PARSED)[n].alias(n) for n in schema.fieldNames()],
                    F.lit(None).cast("string").alias("_corrupt_record"))
    event = F.when(F.col(PARSED).isNotNull(), fast).otherwise(slow)
    parsed = raw.withColumn("event", event).withColumn(
        "bad", F.col("event").isNull() | F.col("event._corrupt_record").isNotNull())
    counted = parsed.observe("statekit_warm_up", F.count(F.lit(1)).alias("rows"),
                             F.sum(F.col("bad").cast("long")).alias("malformed"))
    events = counted.where(~F.col("bad")).select("event.player", "event.score", "event.ts")
    result = (events.withWatermark("ts", "10 seconds")
              .groupBy(F.window("ts", "1 minute"), "player")
              .agg(F.count(F.lit(1)).alias("count"), F.sum("score").alias("sum_score"),
                   F.max("score").alias("max_score")))
    return (result.writeStream.queryName(TRAINING_QUERY).outputMode("update").format("noop")
            .option("checkpointLocation", os.path.join(work, "checkpoint"))
            .trigger(availableNow=True).start())


def _dump(staging: str) -> int:
    """Run in a fresh process: a session whose JVM archives its classes to ``staging`` at
    exit, the training query and a state read, then a normal JVM exit; 0 when the JVM exited
    with status 0."""
    from pyspark import SparkContext

    from statekit.spark import session

    options = f"{session.java_options()} -XX:ArchiveClassesAtExit={staging}"
    spark = session.spark_session(conf={"spark.driver.extraJavaOptions": options},
                                  class_archive=False)
    work = tempfile.mkdtemp(prefix="statekit-class-archive-")
    try:
        query = training_query(spark, work)
        query.awaitTermination(BUILD_TIMEOUT_S / 2)
        if query.exception() is not None:
            print(f"the archive's training query failed: {query.exception()}", file=sys.stderr)
            return 1
        state = spark.read.format("statestore").load(os.path.join(work, "checkpoint"))
        state.toArrow()
    finally:
        gateway = SparkContext._gateway
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    proc = getattr(gateway, "proc", None)
    gateway.shutdown()
    if proc is None:
        return 1
    with contextlib.suppress(OSError):
        proc.stdin.close()  # the gateway JVM ends when its stdin closes
    return proc.wait(timeout=BUILD_TIMEOUT_S / 2)


def _check(staging: str) -> int:
    """Run in a fresh process: 0 when a session's JVM starts with ``staging`` mapped
    (``-Xshare:on``) and runs a job."""
    from statekit.spark import session

    options = f"{session.java_options()} -Xshare:on -XX:SharedArchiveFile={staging}"
    spark = session.spark_session(conf={"spark.driver.extraJavaOptions": options},
                                  class_archive=False)
    rows = spark.range(10).count()
    spark.stop()
    return 0 if rows == 10 else 1


def main(argv: list[str] | None = None) -> int:
    """``python -m statekit.spark.class_archive``: build this machine's archive."""
    parser = argparse.ArgumentParser(prog="python -m statekit.spark.class_archive",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--dump", help=argparse.SUPPRESS)
    parser.add_argument("--check", help=argparse.SUPPRESS)
    parser.add_argument("--if-missing", action="store_true",
                        help="do nothing when the archive for this machine is there")
    args = parser.parse_args(argv)
    if args.dump:
        return _dump(args.dump)
    if args.check:
        return _check(args.check)
    archive = ClassArchive.for_this_machine(_mirror_home())
    if not archive.supported:
        print(f"statekit: no class-data archive: it needs Java 13 or later "
              f"(found {archive.java_version or 'no java'})")
        return 0
    if args.if_missing and archive.ready():
        print(f"statekit: class-data archive ready: {archive.path}")
        return 0
    start = time.monotonic()
    print(f"statekit: building the class-data archive (about a minute): {archive.path}")
    if archive.build():
        size = archive.path.stat().st_size / 1e6
        print(f"statekit: class-data archive written in {time.monotonic() - start:.0f} s "
              f"({size:.0f} MB): {archive.path}")
        return 0
    print(f"statekit: the class-data archive could not be built (its log: {archive.build_log}); "
          "sessions start without it")
    return 1


def _mirror_home() -> str | None:
    from statekit.spark.worker_home import worker_spark_home

    return worker_spark_home()


if __name__ == "__main__":
    sys.exit(main())
