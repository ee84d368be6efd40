"""A SparkSession set up for stateful streaming with RocksDB state and changelog checkpoints.

Five things make a fresh session's first query start sooner (see ``bench/README.md``,
"cold start"):

- **Spark's Python processes import PySpark with cached bytecode.** Spark puts
  ``$SPARK_HOME/python/lib/pyspark.zip`` first on its Python workers' path. A zip
  holds no compiled bytecode, so every Python process Spark starts (the driver-side
  runner of each streaming query on a Python data source, each worker daemon)
  compiled PySpark anew: about 1 s instead of 0.3 s for the streaming runner's imports,
  measured here. For a pip-installed PySpark, ``spark_session`` starts the JVM with
  ``SPARK_HOME`` pointing at a mirror of the installation (``statekit.spark.worker_home``:
  symbolic links, under ``~/.cache/statekit``) that leaves the zip out, so those processes
  import the very same installed PySpark from site-packages, bytecode cached. A
  ``SPARK_HOME`` you set is left alone.
- **Spark's classes mapped, not loaded.** When ``spark_session`` starts the driver JVM and
  this machine has a class-data archive for it (``statekit.spark.class_archive``, built
  once by ``make``), the JVM maps Spark's classes from that file instead of loading and
  verifying them: seconds sooner to the first result.
- **The JIT's quick tier only** (``jit="quick"``, ``-XX:TieredStopAtLevel=1``). A fresh
  driver JVM spent 6 of its 11 CPU-seconds to the first result in its two JIT compilers,
  4 of them in C2, and ran the meantime in C1's slower profiling code; with C1 alone,
  measured here, a fresh process reaches its first window result ~2 s sooner (7.2 vs
  9.3 s), and statekit's queries run no slower warm: 1M events through the Kafka-fed
  windowed count at 127k vs 119k records/s, the same on ``rate`` at 340k vs 302k, with
  20% less JVM CPU (``bench/README.md``, "cold start"). Their per-record work is in
  Python, Arrow and RocksDB, not in JVM code C2 would speed up. ``jit="full"`` keeps the
  JVM's default (C1 then C2), for a long job whose time is in Spark's JVM code. The quick
  mode keeps the tiered default's 240 MB code cache (``QUICK_CODE_CACHE``): C1 alone would
  get 48 MB, full within a minute of Spark queries, and then no more compiling at all.
- **Spark's Python processes started early** (``early_workers=True``): in the background,
  statekit's Kafka source is registered and a two-row read starts the Python planner and
  read workers Spark reuses for the first query (``statekit.spark.early_workers``): 0.8 s
  sooner to the first result. A background warm-up *query* (``warm_up=True``: a stream,
  state and an aggregation) was removed: when the query starts at once, as in a notebook
  run straight through, it competed with it for the two cores and gave nothing (11.2 vs
  11.3 s to the first result, ``bench/README.md``).
- **pandas imported while the JVM starts** (``PRELOADED``): this process only waits then.

The driver JVM a session starts prints to the notebook only what is worth reading: its
console goes through ``statekit.spark.console``, which leaves out known chatter (the JVM's
incubator-module warning, transformWithStateInPandas workers' prints).

Example:
    >>> spark = spark_session()                       # doctest: +SKIP
    >>> spark_session("spark://host:7077")            # an existing cluster  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import SparkSession

from statekit.errors import BadArgument
from statekit.options.base import Options, route, settle
from statekit.spark.worker_home import worker_spark_home
from statekit.validate import flag, whole_number

LOG_CONFIG = Path(__file__).with_name("log4j2.properties")
ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
#: Spark's checkpoint writer through Hadoop's ``FileSystem`` API instead of its default
#: ``FileContext`` one. On a local disk without Hadoop's native library (a pip-installed
#: PySpark has none) the ``FileContext`` path starts a ``readlink`` or ``chmod`` process
#: for most checkpoint files it writes or renames: ~90 processes a micro-batch of a 4-partition
#: aggregation, counted here (``strace -e execve``), against ~25 this way. Measured in fresh
#: processes (2 runs each): first batch 5.4 s instead of 6.3 s, later batches 0.9–1.2 s
#: instead of 1.1–1.4 s. Checksums (``.crc`` files) and write-then-rename stay as they were.
FILE_SYSTEM_CHECKPOINTS = ("org.apache.spark.sql.execution.streaming.checkpointing."
                           "FileSystemBasedCheckpointFileManager")
#: The code cache a C1-only JVM gets, as big as the tiered default: with
#: ``TieredStopAtLevel=1`` the JVM reserves 48 MB, which a long session of Spark queries
#: (each compiles new generated classes) fills in under a minute; the JVM then turns its
#: compiler off for good and runs every class loaded after that in the interpreter, seen as
#: a test session whose later queries crawl ("CodeCache is full. Compiler has been disabled").
QUICK_CODE_CACHE = "240m"
#: ``spark_session(jit=...)``: the driver JVM options of each JIT mode (see the module docstring)
JIT_OPTIONS: dict[str, str] = {
    "quick": f"-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize={QUICK_CODE_CACHE}",
    "full": ""}

#: PySpark's call sites in DataFrame errors, off: with it on, every Column function call reads
#: the Python stack and makes ~6 more JVM calls, 116 of them ~700 calls and ~0.4 s of
#: building a statekit query in a fresh session, for a context that would name statekit's own
#: lines (statekit names the argument at fault itself). ``conf={KEY: "true"}`` brings it back.
DATAFRAME_DEBUGGING = "false"

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
    "spark.sql.streaming.checkpointFileManagerClass": FILE_SYSTEM_CHECKPOINTS,
    "spark.driver.memory": "2g",
    "spark.python.sql.dataFrameDebugging.enabled": DATAFRAME_DEBUGGING,
}

_LAUNCH_LOCK = threading.Lock()


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


@dataclass(frozen=True)
class DriverStart(Options):
    """How ``spark_session`` starts a driver JVM, when it starts one (no JVM in this process
    yet, a classic session); its fields can be given to ``spark_session`` as keywords.

    An internal spec of the driver's start, not a user option (those are all in
    ``statekit.options``): it uses the options' machinery for its checks and JSON form.

    Attributes:
        cached_worker_imports: when PySpark is pip-installed (no ``SPARK_HOME`` set), let
            Spark's Python processes import PySpark from site-packages rather than from
            ``pyspark.zip`` (see the module docstring and ``worker_spark_home``). False
            keeps Spark's own layout.
        class_archive: start the JVM with this machine's class-data archive if one was
            built for it (``statekit.spark.class_archive``: Spark's classes mapped instead
            of loaded, seconds sooner to the first result).
        jit: ``"quick"``, the JVM's C1 compiler alone, sooner to the first result and no
            slower for statekit's queries (module docstring); ``"full"``, the JVM's
            default tiers (C1, then C2).
        early_workers: register statekit's Kafka source and start Spark's Python planner
            and read workers in the background (``statekit.spark.early_workers``): the
            first query no longer waits for them.
        s3a: put Hadoop's S3A connector (``statekit.spark.s3a_jars``, fetched by ``make
            s3a-jars``) on the driver's class path (``spark.jars``) and its settings
            (``statekit.spark.object_store``: keys, endpoint) in the conf, for ``s3a://``
            checkpoints; also on when ``conf`` sets a ``spark.hadoop.fs.s3a.*`` key. Off,
            a session loads none of it (no start-up cost).

    The archive and JIT options go on ``spark.driver.extraJavaOptions`` only when ``conf``
    sets none of its own.

    Example:
        >>> DriverStart(jit="full").to_dict()["jit"]
        'full'
        >>> DriverStart(jit="fast")
        Traceback (most recent call last):
        ...
        statekit.errors.BadArgument: bad jit: 'fast'; accepted: "quick" (the C1 compiler \
alone) or "full" (C1, then C2)
    """

    cached_worker_imports: bool = True
    class_archive: bool = True
    jit: str = "quick"
    early_workers: bool = True
    s3a: bool = False

    def __post_init__(self) -> None:
        for name in ("cached_worker_imports", "class_archive", "early_workers", "s3a"):
            object.__setattr__(self, name, flag(getattr(self, name), name))
        if not isinstance(self.jit, str) or self.jit not in JIT_OPTIONS:
            raise BadArgument("jit", self.jit,
                              '"quick" (the C1 compiler alone) or "full" (C1, then C2)')


def spark_session(
    master: str | SparkSession | None = None,
    app_name: str = "statekit",
    shuffle_partitions: int | None = None,
    conf: dict[str, str] | None = None,
    log_level: str = "ERROR",
    start: DriverStart | None = None,
    **start_fields: object,
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
        start: how to start the driver JVM when this call starts one (``DriverStart``);
            or its fields as keywords (``jit="full"``, ``class_archive=False``, ...).

    When this call starts the driver JVM (a classic session and no JVM in this process
    yet), it starts it itself (``pyspark.java_gateway.launch_gateway``) with the JVM's
    stdout and stderr on pipes that daemon threads drain into this process's own (file
    descriptors 1 and 2, which Jupyter's kernel shows under the running cell), every line
    but the harmless chatter ``statekit.spark.console.KNOWN_NOISE`` names: the JVM's
    incubator-module warning, the prints of transformWithStateInPandas Python workers.
    Spark's own warnings and errors still show. An existing session or JVM, and Spark
    Connect, are used as they are (their consoles untouched).
    """
    start = settle(start, DriverStart,
                   route(start_fields, dict.fromkeys(DriverStart.field_names(), "start"),
                         "spark_session()").get("start", {}), "start")
    if shuffle_partitions is not None:
        shuffle_partitions = whole_number(shuffle_partitions, "shuffle_partitions", minimum=1)
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
        fresh = not _jvm_running()   # no driver JVM yet: its start options still count
        s3a = start.s3a or any(k.startswith("spark.hadoop.fs.s3a.") for k in (conf or {}))
        if fresh and s3a:
            from statekit.spark.s3a_jars import driver_settings

            settings.update(driver_settings(settings))
        home = worker_spark_home() if start.cached_worker_imports and fresh else None
        if fresh and "spark.driver.extraJavaOptions" not in (conf or {}):
            settings["spark.driver.extraJavaOptions"] = driver_java_options(
                home, settings.get("spark.driver.extraClassPath", ""), start.class_archive,
                start.jit)
        launched = False
        with _environ("SPARK_HOME", home):
            with _LAUNCH_LOCK:  # one JVM, even when two threads ask at once
                if _launches_jvm(settings):
                    _start_context({"spark.master": master or "local[2]",
                                    "spark.app.name": app_name, **settings})
                    launched = True
            session = builder.getOrCreate()
        for key in ("spark.sql.shuffle.partitions", "spark.sql.session.timeZone",
                    "spark.sql.streaming.stateStore.providerClass",
                    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"):
            session.conf.set(key, settings[key])
        session.sparkContext.setLogLevel(log_level)
        if s3a and not fresh:
            from statekit.spark.s3a_settings import require_connector

            require_connector(session)
        if launched and start.early_workers:
            from statekit.spark.early_workers import start_early

            start_early(session)
    return session


# --- the driver JVM statekit starts, and its console ----------------------------------
def driver_java_options(home: str | None = None, extra_class_path: str = "",
                        class_archive: bool = True, jit: str = "quick") -> str:
    """The options of a driver JVM ``spark_session`` starts: ``java_options()``, the JIT
    mode's (``JIT_OPTIONS``) and, with ``class_archive``, the class-data archive's when one
    is ready for a JVM of Spark under ``home`` with ``extra_class_path``.

    Example:
        >>> driver_java_options(class_archive=False, jit="full") == java_options()
        True
        >>> driver_java_options(class_archive=False).endswith(
        ...     " -XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m")
        True
    """
    options = [java_options(), JIT_OPTIONS[jit]]
    if class_archive:
        from statekit.spark.class_archive import ClassArchive

        archive = ClassArchive.for_this_machine(home or os.environ.get("SPARK_HOME"),
                                                extra_class_path)
        options.append(archive.java_option())
    return " ".join(option for option in options if option)


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

    threading.Thread(target=_preload, name="statekit-preload", daemon=True).start()
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


#: What statekit's queries and state reads import on first use (pandas alone is ~0.3 s), imported
#: in a thread while this process waits for the driver JVM to start instead of in the first
#: query's cell. Neither imports PySpark, which the waiting thread may be importing: no two
#: threads can each hold a module the other waits for.
PRELOADED = ("pandas", "pyarrow")


def _preload() -> None:
    for name in PRELOADED:
        with contextlib.suppress(Exception):
            importlib.import_module(name)


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
