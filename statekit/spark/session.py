"""A SparkSession set up for stateful streaming with RocksDB state and changelog checkpoints.

Example:
    >>> spark = spark_session()                       # doctest: +SKIP
    >>> spark = spark_session("spark://host:7077")     # an existing cluster  # doctest: +SKIP
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from pyspark.sql import SparkSession

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


def state_store_log() -> Path:
    """The file where this process's Spark driver logs its state store's work (INFO)."""
    return Path(tempfile.gettempdir()) / f"statekit-{os.getpid()}" / "state-store.log"


def _java_options() -> str:
    return (f"-Dlog4j2.configurationFile=file:{LOG_CONFIG} "
            f"-Dstatekit.state.log={state_store_log()}")


def spark_session(
    master: str | SparkSession | None = None,
    app_name: str = "statekit",
    shuffle_partitions: int | None = None,
    conf: dict[str, str] | None = None,
    log_level: str = "ERROR",
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
    """
    settings = {**DEFAULT_CONF, "spark.driver.extraJavaOptions": _java_options()}
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
        return session
    # Workers must run the same Python as the driver (the venv's), not whatever is on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master or "local[2]").appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    for key in ("spark.sql.shuffle.partitions", "spark.sql.session.timeZone",
                "spark.sql.streaming.stateStore.providerClass",
                "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"):
        session.conf.set(key, settings[key])
    session.sparkContext.setLogLevel(log_level)
    return session
