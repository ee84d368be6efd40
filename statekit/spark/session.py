"""A SparkSession set up for stateful streaming with RocksDB state and changelog checkpoints.

Two things make a fresh session's first query start sooner (see ``bench/README.md``,
"cold start"):

- **Spark's Python processes import PySpark with cached bytecode.** Spark puts
  ``$SPARK_HOME/python/lib/pyspark.zip`` first on its Python workers' path. A zip
  holds no compiled bytecode, so every Python process Spark starts (the driver-side
  runner of each streaming query on a Python data source, each worker daemon)
  compiled PySpark anew: about 1 s instead of 0.3 s for the streaming runner's imports,
  measured here. For a pip-installed PySpark, ``spark_session`` starts the JVM with
  ``SPARK_HOME`` pointing at a mirror of the installation (symbolic links, under
  ``~/.cache/statekit``) that leaves the zip out, so those processes import the very
  same installed PySpark from site-packages, bytecode cached. A ``SPARK_HOME`` you set
  is left alone.
- **An optional warm-up** (``warm_up=True``): a background thread runs a tiny
  streaming query shaped like statekit's (Python data source, JSON parsing, watermark,
  windowed aggregation in RocksDB) while you read the next cell, so the first real
  query finds Spark's classes loaded, the Python workers started and the driver's
  modules imported. It steps aside (ends after its current micro-batch) as soon as
  another query starts.

The driver JVM a session starts prints to the notebook only what is worth reading: its
console goes through ``statekit.spark.console``, which leaves out known chatter (the JVM's
incubator-module warning, transformWithStateInPandas workers' prints).

Example:
    >>> spark = spark_session()                       # doctest: +SKIP
    >>> spark = spark_session(warm_up=True)           # doctest: +SKIP
    >>> spark_session("spark://host:7077")            # an existing cluster  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import SparkSession

from statekit.cache import cache_dir

LOG_CONFIG = Path(__file__).with_name("log4j2.properties")
ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"

#: What statekit sets on a session it builds; every key can be overridden through ``conf``.
DEFAULT_CONF: dict[str, str] = {
    "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "2",
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.streaming.noDataMicroBatches.enabled": "true",
    "spark.driver.memory": "2g",
}

WARM_UP_QUERY = "statekit-warm-up"
_LAUNCH_LOCK = threading.Lock()
WARM_UP_TIMEOUT_S = 300.0


def state_store_log() -> Path:
    """The file where this process's Spark driver logs its state store's work (INFO)."""
    return Path(tempfile.gettempdir()) / f"statekit-{os.getpid()}" / "state-store.log"


def spark_log() -> Path:
    """The file where this process's Spark driver logs its errors (with their Java traces and,
    for a failed streaming query, its plan), Py4J's own messages, and the full text of every
    Spark failure statekit turned into a short error; nothing of it reaches a notebook.

    Example:
        >>> spark_log().name
        'spark.log'
    """
    return Path(tempfile.gettempdir()) / f"statekit-{os.getpid()}" / "spark.log"


def java_options() -> str:
    """The driver JVM options statekit starts a session with (its log configuration)."""
    return (f"-Dlog4j2.configurationFile=file:{LOG_CONFIG} "
            f"-Dstatekit.state.log={state_store_log()} -Dstatekit.spark.log={spark_log()}")


def quiet_py4j() -> None:
    """Send Py4J's Python-side log records (a listener callback that failed, a lost gateway)
    to ``spark_log()`` instead of the notebook (once per process)."""
    logger = logging.getLogger("py4j")
    if any(getattr(h, "_statekit", False) for h in logger.handlers):
        return
    with contextlib.suppress(OSError):
        spark_log().parent.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(spark_log(), delay=True)
        handler._statekit = True
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logger.addHandler(handler)
        logger.propagate = False


def log_failure(what: str, exc: BaseException) -> None:
    """Append ``exc``'s full text (Spark's plan and traces included) to ``spark_log()``; a
    full disk just loses it."""
    with contextlib.suppress(OSError):
        spark_log().parent.mkdir(parents=True, exist_ok=True)
        with open(spark_log(), "a", encoding="utf-8") as out:
            out.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} statekit: {what}\n{exc}\n\n")


def spark_session(
    master: str | SparkSession | None = None,
    app_name: str = "statekit",
    shuffle_partitions: int | None = None,
    conf: dict[str, str] | None = None,
    log_level: str = "ERROR",
    warm_up: bool = False,
    cached_worker_imports: bool = True,
    class_archive: bool = True,
) -> SparkSession:
    """Build (or reuse) a session ready for statekit queries.

    Args:
        master: None for ``local[2]``; a master URL (``local[*]``, ``spark://host:7077``);
            or an existing SparkSession, which is used as it is apart from the state
            store settings statekit needs (set at session level).
        app_name: the Spark application name.
        shuffle_partitions: number of state store partitions of new queries.
        conf: extra Spark settings, applied last.
        log_level: Spark's driver log level.
        warm_up: start ``warm_up(session)`` on a background thread: a tiny streaming
            query like statekit's, so that the first real query starts warm (see the
            module docstring). ``warm_up_status(session)`` tells how it went.
        cached_worker_imports: when this call starts the JVM and PySpark is
            pip-installed (no ``SPARK_HOME`` set), let Spark's Python processes import
            PySpark from site-packages rather than from ``pyspark.zip`` (see the module
            docstring and ``worker_spark_home``). False keeps Spark's own layout.
        class_archive: when this call starts the JVM, start it with this machine's
            class-data archive if one was built for it (``statekit.spark.class_archive``:
            Spark's classes mapped instead of loaded, seconds sooner to the first result)
            and ``conf`` sets no ``spark.driver.extraJavaOptions`` of its own.

    When this call starts the driver JVM (a classic session and no JVM in this process
    yet), it starts it itself (``pyspark.java_gateway.launch_gateway``) with the JVM's
    stdout and stderr on pipes that daemon threads drain into this process's own (file
    descriptors 1 and 2, which Jupyter's kernel shows under the running cell), every line
    but the harmless chatter ``statekit.spark.console.KNOWN_NOISE`` names: the JVM's
    incubator-module warning, the prints of transformWithStateInPandas Python workers.
    Spark's own warnings and errors still show. An existing session or JVM, and Spark
    Connect, are used as they are (their consoles untouched).
    """
    quiet_py4j()
    settings = {**DEFAULT_CONF, "spark.driver.extraJavaOptions": java_options()}
    if shuffle_partitions is not None:
        settings["spark.sql.shuffle.partitions"] = str(shuffle_partitions)
    settings.update(conf or {})
    if isinstance(master, SparkSession):
        session = master
        for key in ("spark.sql.streaming.stateStore.providerClass",
                    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled",
                    "spark.sql.session.timeZone"):
            session.conf.set(key, settings[key])
        if shuffle_partitions is not None:
            session.conf.set("spark.sql.shuffle.partitions", str(shuffle_partitions))
    else:
        # Workers must run the same Python as the driver (the venv's), not whatever is on PATH.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        builder = SparkSession.builder.master(master or "local[2]").appName(app_name)
        for key, value in settings.items():
            builder = builder.config(key, value)
        home = worker_spark_home() if cached_worker_imports and not _jvm_running() else None
        if class_archive and "spark.driver.extraJavaOptions" not in (conf or {}):
            settings["spark.driver.extraJavaOptions"] = _with_class_archive(
                settings["spark.driver.extraJavaOptions"], home,
                settings.get("spark.driver.extraClassPath", ""))
        with _environ("SPARK_HOME", home):
            with _LAUNCH_LOCK:  # one JVM, even when two threads ask at once
                if _launches_jvm(settings):
                    _start_context({"spark.master": master or "local[2]",
                                    "spark.app.name": app_name, **settings})
            session = builder.getOrCreate()
        for key in ("spark.sql.shuffle.partitions", "spark.sql.session.timeZone",
                    "spark.sql.streaming.stateStore.providerClass",
                    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"):
            session.conf.set(key, settings[key])
        session.sparkContext.setLogLevel(log_level)
    if warm_up:
        start_warm_up(session)
    return session


# --- the driver JVM statekit starts, and its console ----------------------------------
def _with_class_archive(options: str, home: str | None, extra_class_path: str) -> str:
    """``options`` plus the class-data archive's option, when one is ready for this JVM."""
    if _jvm_running():
        return options
    from statekit.spark.class_archive import ClassArchive

    archive = ClassArchive.for_this_machine(home or os.environ.get("SPARK_HOME"),
                                            extra_class_path)
    option = archive.java_option()
    return f"{options} {option}" if option else options


def _jvm_running() -> bool:
    from pyspark import SparkContext

    return SparkContext._gateway is not None


def _launches_jvm(settings: dict[str, str]) -> bool:
    """True when ``builder.getOrCreate()`` would start a classic driver JVM here: no JVM
    (nor a gateway PySpark was told to connect to) yet, and no Spark Connect anywhere."""
    from pyspark.util import is_remote_only

    if _jvm_running() or "PYSPARK_GATEWAY_PORT" in os.environ or is_remote_only():
        return False
    connect = ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE", "SPARK_LOCAL_REMOTE")
    if any(name in os.environ for name in connect) or "spark.remote" in settings:
        return False
    mode = settings.get("spark.api.mode", os.environ.get("SPARK_API_MODE", "classic"))
    return mode.lower() != "connect"


def _start_context(settings: dict[str, str]) -> None:
    """Start the driver JVM with its stdout and stderr on pipes that ``console.forward``
    drains into this process's own (less ``KNOWN_NOISE``), and a SparkContext on it with
    ``settings`` (the builder's own ``getOrCreate`` then finds it)."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    from statekit.spark.console import forward

    conf = SparkConf()
    for key, value in settings.items():
        conf.set(key, value)
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    # The threads read from the start: a JVM that fails to start says why on its stderr.
    forward(out_read, 1, "statekit-jvm-stdout")
    forward(err_read, 2, "statekit-jvm-stderr")
    try:
        gateway = launch_gateway(conf=conf,
                                 popen_kwargs={"stdout": out_write, "stderr": err_write})
    finally:  # the JVM holds its own copies; the threads see the end when it exits
        os.close(out_write)
        os.close(err_write)
    SparkContext(conf=conf, gateway=gateway)


# --- Spark's Python processes: PySpark from site-packages ------------------------------
@contextlib.contextmanager
def _environ(name: str, value: str | None):
    """``os.environ[name] = value`` inside the block (nothing when value is None)."""
    if value is None:
        yield
        return
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


def worker_spark_home(cache: str | os.PathLike | None = None,
                      environ: dict[str, str] | None = None) -> str | None:
    """A ``SPARK_HOME`` for the JVM under which Spark's Python processes use cached bytecode.

    Spark starts its Python processes with ``$SPARK_HOME/python/lib/pyspark.zip`` first
    on ``PYTHONPATH``. This returns a directory that mirrors the pip-installed PySpark
    (``bin``, ``jars`` and the rest as symbolic links to the installation) but has no
    ``pyspark.zip``, so those processes import the same installed package from
    site-packages, where Python keeps its compiled bytecode. It is built once under
    ``cache`` (default ``$XDG_CACHE_HOME/statekit`` or ``~/.cache/statekit``).

    Returns None, so that nothing changes, when ``SPARK_HOME`` is already set (your own
    Spark), when ``PYSPARK_PYTHON`` names another interpreter than this one (it may not
    have PySpark installed), when PySpark is not pip-installed, or when the mirror cannot
    be written.

    Example:
        >>> home = worker_spark_home()                               # doctest: +SKIP
        >>> os.path.exists(os.path.join(home, "python/lib/pyspark.zip"))  # doctest: +SKIP
        False
    """
    env = os.environ if environ is None else environ
    if env.get("SPARK_HOME"):
        return None
    python = env.get("PYSPARK_PYTHON")
    if python and os.path.realpath(python) != os.path.realpath(sys.executable):
        return None
    import pyspark

    real = Path(pyspark.__file__).resolve().parent
    if not ((real / "bin" / "spark-submit").is_file() and (real / "jars").is_dir()
            and (real / "python" / "lib" / "pyspark.zip").is_file()):
        return None
    if cache is None:
        cache = cache_dir(env)
    digest = hashlib.sha1(str(real).encode()).hexdigest()[:10]
    home = Path(cache) / f"spark-home-{pyspark.__version__}-{digest}"
    try:
        if not _is_mirror(home, real):
            _build_mirror(home, real)
    except OSError:
        return None
    return str(home)


def _mirror_entries(real: Path) -> list[tuple[str, Path]]:
    """(path inside the mirror, what it links to): everything but python/lib/pyspark.zip."""
    entries = []
    for item in sorted(real.iterdir()):
        if item.name != "python":
            entries.append((item.name, item))
    for item in sorted((real / "python").iterdir()):
        if item.name != "lib":
            entries.append((f"python/{item.name}", item))
    for item in sorted((real / "python" / "lib").iterdir()):
        if item.name != "pyspark.zip":
            entries.append((f"python/lib/{item.name}", item))
    return entries


def _is_mirror(home: Path, real: Path) -> bool:
    if not home.is_dir() or (home / "python" / "lib" / "pyspark.zip").exists():
        return False
    return all((home / name).is_symlink() and os.readlink(home / name) == str(target)
               for name, target in _mirror_entries(real))


def _build_mirror(home: Path, real: Path) -> None:
    """Build the mirror beside its final place, then rename it there (atomic)."""
    home.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=home.name + ".", dir=home.parent))
    try:
        (staging / "python" / "lib").mkdir(parents=True)
        for name, target in _mirror_entries(real):
            os.symlink(target, staging / name)
        if home.exists():  # an outdated mirror (PySpark reinstalled elsewhere)
            shutil.rmtree(home, ignore_errors=True)
        try:
            os.rename(staging, home)
        except OSError:
            if not _is_mirror(home, real):  # not another process that got there first
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


# --- warm-up ------------------------------------------------------------------------------
@dataclass
class WarmUp:
    """How a session's warm-up went: see ``start_warm_up``."""

    started: float = field(default_factory=time.monotonic)
    #: seconds the warm-up took (None while it runs)
    seconds: float | None = None
    #: True when it stopped early because another query started
    stepped_aside: bool = False
    #: what went wrong, if anything (a warm-up never raises into your code)
    error: str | None = None
    #: micro-batches the warm-up query completed
    batches: int = 0
    #: seconds until Spark's Python workers were started and had imported the source's
    #: modules (the first step; None until then)
    workers_ready: float | None = None
    done: threading.Event = field(default_factory=threading.Event, repr=False)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the warm-up is over (True), or ``timeout`` seconds pass (False)."""
        return self.done.wait(timeout)


_WARM_UPS: dict[int, WarmUp] = {}
_WARM_UPS_LOCK = threading.Lock()


def warm_up_status(spark: SparkSession) -> WarmUp | None:
    """The warm-up started on ``spark`` (None if none was)."""
    return _WARM_UPS.get(id(spark))


def start_warm_up(spark: SparkSession, rows: int = 2000, batches: int = 2) -> WarmUp:
    """Warm ``spark`` up on a daemon thread; returns at once (one warm-up per session).

    The thread imports what ``statekit.start_query`` imports on the driver, then has Spark
    start its Python processes a first batch needs (the planner worker that creates a
    Python data source, one read worker per core, each importing the Kafka source's
    modules: Spark reuses them for the first real query, which then starts about 1.5 s
    sooner even when it is started at once). If no other query has started by then, it
    runs a streaming query shaped like statekit's: the ``statekit_warmup`` Python data source
    (``statekit.spark.kafka_source.WarmUpSource``: the Kafka source's columns, ``rows`` game
    events a batch, no broker) through JSON parsing with a corrupt-record column, an
    observed count, a watermark and a tumbling-window count/sum/max kept in RocksDB, into
    the ``noop`` sink, ``batches`` micro-batches, checkpoint in a temporary directory
    (deleted after). That starts Spark's Python runner and worker daemons and loads the
    JVM classes a real query needs. If any other query starts meanwhile, the warm-up
    ends after its current micro-batch and leaves the machine to it (``stepped_aside``);
    it is never stopped in the middle of a batch, which Spark would log as an error.
    """
    with _WARM_UPS_LOCK:
        status = _WARM_UPS.get(id(spark))
        if status is not None:
            return status
        status = _WARM_UPS[id(spark)] = WarmUp()
    thread = threading.Thread(target=_warm_up, args=(spark, status, rows, batches),
                              name="statekit-warm-up", daemon=True)
    thread.start()
    return status


def _warm_up(spark: SparkSession, status: WarmUp, rows: int, batches: int) -> None:
    work = tempfile.mkdtemp(prefix="statekit-warm-up-")
    query = None
    try:
        import pandas  # noqa: F401 - what start_query's modules import (the query layer is
        import pyarrow  # noqa: F401 - above this one: warm its libraries, not its modules)

        from statekit.kafka import topics  # noqa: F401 - the admin client kafka_stream uses

        _start_python_workers(spark)
        status.workers_ready = time.monotonic() - status.started
        if any(True for _ in spark.streams.active):  # a query started: the rest would slow it
            status.stepped_aside = True
            return
        stop_file = os.path.join(work, "stop")
        query = warm_up_query(spark, work, rows, batches, stop_file)
        deadline = time.monotonic() + WARM_UP_TIMEOUT_S
        while query.isActive and time.monotonic() < deadline:
            if not status.stepped_aside and any(q.id != query.id for q in spark.streams.active):
                status.stepped_aside = True
                Path(stop_file).touch()  # the source offers no further batch
            time.sleep(0.05)
        if query.isActive:  # should not happen: an availableNow query ends by itself
            query.stop()
            status.error = f"the warm-up query ran over {WARM_UP_TIMEOUT_S:.0f} s; stopped"
        elif query.exception() is not None:
            status.error = str(query.exception())
        status.batches = sum(1 for p in query.recentProgress if p["numInputRows"] > 0)
    except Exception as exc:  # noqa: BLE001 - a warm-up must never break the session
        status.error = f"{type(exc).__name__}: {exc}"
        if query is not None:
            with contextlib.suppress(Exception):
                query.stop()
    finally:
        status.seconds = time.monotonic() - status.started
        shutil.rmtree(work, ignore_errors=True)
        status.done.set()


def _start_python_workers(spark: SparkSession) -> None:
    """Have Spark start the Python processes a statekit query's first batch needs: the
    planner worker that creates a Python data source, and one read worker per core, each
    importing the Kafka source's modules. Spark reuses them (``spark.python.worker.reuse``,
    on by default) for the first real query's planning and read tasks."""
    from statekit.spark.kafka_source import WARM_UP_FORMAT, WarmUpSource

    spark.dataSource.register(WarmUpSource)
    spark.readStream.format(WARM_UP_FORMAT).load()  # a planner worker creates the source
    cores = max(1, spark.sparkContext.defaultParallelism)
    spark.range(0, cores, 1, cores).mapInArrow(_import_read_modules, "id long").collect()


def _import_read_modules(batches):
    """In a Python worker: import what the Kafka source's read tasks import."""
    import confluent_kafka  # noqa: F401
    import pyarrow.json  # noqa: F401

    import statekit.spark.kafka_source.reading  # noqa: F401

    yield from batches


def warm_up_query(spark: SparkSession, work: str, rows: int, batches: int,
                  stop_file: str | None = None):
    """Start the warm-up's ``availableNow`` query (checkpoint under ``work``), into ``noop``."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    from statekit.spark.kafka_source import PARSED, WARM_UP_FORMAT, WarmUpSource

    spark.dataSource.register(WarmUpSource)
    schema = StructType.fromDDL("player string, game string, score long, ts timestamp")
    raw = (spark.readStream.format(WARM_UP_FORMAT).option("rows", rows)
           .option("batches", batches).option("valueSchema", schema.json())
           .option("stopFile", stop_file or os.path.join(work, "stop")).load())
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
    return (result.writeStream.queryName(WARM_UP_QUERY).outputMode("update").format("noop")
            .option("checkpointLocation", os.path.join(work, "checkpoint"))
            .trigger(availableNow=True).start())
