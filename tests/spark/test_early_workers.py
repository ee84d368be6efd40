"""Spark's Python processes for the Kafka source started before the first query
(``statekit.spark.early_workers``), and the source registered once per session."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest

from statekit.spark.early_workers import READ_TASKS, READY_FORMAT, ReadySource, start_early
from statekit.spark.kafka_source.data_source import FORMAT, KafkaSource, register
from statekit.spark.session import spark_log


def test_the_ready_source_reads_one_row_a_partition(spark):
    spark.dataSource.register(ReadySource)
    rows = spark.read.format(READY_FORMAT).load().collect()
    assert sorted(r.task for r in rows) == list(range(READ_TASKS)) == [0, 1]


class _Sources:
    """A session's ``dataSource`` that counts registrations (pure logic: the memo)."""

    def __init__(self, fail: bool = False):
        self.registered: list[type] = []
        self.fail = fail

    def register(self, source: type) -> None:
        if self.fail:
            raise RuntimeError("the session is stopping")
        self.registered.append(source)


class _Session:
    def __init__(self, fail: bool = False):
        self.dataSource = _Sources(fail)


def test_the_source_is_registered_once_per_session_even_from_eight_threads_at_once():
    one, other = _Session(), _Session()
    threads = [threading.Thread(target=register, args=(one,)) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert register(one) == FORMAT
    assert one.dataSource.registered == [KafkaSource]
    assert register(other) == FORMAT and other.dataSource.registered == [KafkaSource]


def test_a_failed_registration_is_tried_again_by_the_next_call():
    session = _Session(fail=True)
    with pytest.raises(RuntimeError, match="stopping"):
        register(session)
    session.dataSource.fail = False
    assert register(session) == FORMAT and session.dataSource.registered == [KafkaSource]


def test_a_failure_in_the_background_is_logged_never_raised():
    session = _Session(fail=True)
    thread = start_early(session)
    thread.join(timeout=30)
    assert not thread.is_alive()
    assert thread.name == "statekit-early-workers" and thread.daemon
    text = spark_log().read_text(errors="replace")
    assert "starting Spark's Python workers early" in text and "the session is stopping" in text


_CHILD = """
import threading
import statekit as sk
from pyspark import SparkContext
from statekit.processes import descendants, process_table
spark = sk.spark_session('local[2]', app_name='statekit-test-early'{kwargs})
for thread in threading.enumerate():
    if thread.name == 'statekit-early-workers':
        thread.join(120)
table = process_table()
modules = set()
for pid in descendants(SparkContext._gateway.proc.pid, table):
    args = table[pid].cmdline.split()
    if 'pyspark.daemon' in args:
        modules.add(args[args.index('pyspark.daemon') + 1])
print('DAEMONS', sorted(modules))
"""


@pytest.mark.slow
@pytest.mark.parametrize("kwargs, daemons", [
    ("", ["pyspark.sql.worker.create_data_source", "pyspark.sql.worker.lookup_data_sources",
          "pyspark.sql.worker.plan_data_source_read", "pyspark.worker"]),
    (", early_workers=False", []),
], ids=["default", "off"])
def test_a_fresh_session_has_the_python_daemons_running_before_any_query(kwargs, daemons):
    """In a fresh process (its own JVM): once spark_session's background start is done, the
    JVM's Python daemons for data source lookup, creation, read planning and read tasks are
    running, before any query; with early_workers=False none is."""
    out = subprocess.run([sys.executable, "-c", _CHILD.format(kwargs=kwargs)],
                         capture_output=True, text=True, timeout=600)
    assert f"DAEMONS {daemons}" in out.stdout, out.stdout[-2000:] + out.stderr[-3000:]
