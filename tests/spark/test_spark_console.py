"""What a fresh statekit session prints on the console: nothing of Spark's own.

PySpark's gateway starts Spark's logging as a shell does and Spark printed
"Setting default log level to "WARN"" on stderr, red under the first cell of every
notebook. The JVM's own start-up warning about the incubator module Spark 4 needs
(printed unconditionally) and the prints of transformWithStateInPandas workers are
dropped by statekit's console forwarder (``statekit.spark.console``), which passes
every other line of the JVM's stdout and stderr on.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from statekit.spark.console import KNOWN_NOISE, forward, harmless
from statekit.workshop import handouts

CHILD = """
import statekit as sk
spark = sk.spark_session("local[1]")
print("ROWS", spark.range(3).count(), flush=True)

def speak(x):  # a Python worker's stderr reaches the notebook through the JVM's stderr
    import sys
    print("statekit-test: a line the worker wrote", file=sys.stderr, flush=True)
    print("Starting Streaming TransformWithStateInPandas Python worker.", file=sys.stderr,
          flush=True)
    return x

print("MAPPED", spark.sparkContext.parallelize([1], 1).map(speak).collect(), flush=True)
spark.stop()
"""
JVM_WARNING = "WARNING: Using incubator modules: jdk.incubator.vector"


@pytest.mark.slow   # a Spark session of its own in a child process
@pytest.mark.timeout(600)
def test_a_fresh_session_prints_no_log_level_banner(tmp_path):
    run = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                         timeout=500, cwd=tmp_path)
    assert "ROWS 3" in run.stdout, run.stderr[-3000:]
    assert "MAPPED [1]" in run.stdout, run.stderr[-3000:]
    assert "Setting default log level" not in run.stderr
    assert JVM_WARNING not in run.stderr
    # what the JVM passes on is still shown, its look-alike of worker chatter is not
    said = [line for line in run.stderr.splitlines() if line.strip()]
    assert said == ["statekit-test: a line the worker wrote"], run.stderr[-3000:]


HARMLESS = [
    JVM_WARNING,
    'Setting default log level to "WARN".',
    "To adjust logging level use sc.setLogLevel(newLevel). For SparkR, use setLogLevel(newLevel).",
    "Starting Streaming TransformWithStateInPandas Python worker.",
    "Streaming TransformWithStateInPandas Python worker Starting execution of UDF: <fn>.",
    "",
    "   ",
]
LOOK_ALIKES = [
    JVM_WARNING + ", jdk.incubator.foreign",
    "OpenJDK 64-Bit Server VM warning: " + JVM_WARNING,
    "WARNING: Using incubator modules: jdk.incubator.vectors",
    'Setting default log level to "WARN". Something else failed',
    "ERROR Starting Streaming TransformWithStateInPandas Python worker failed",
    "Streaming TransformWithStateInPandasPython worker",
    "26/11/25 05:50:01 ERROR Executor: Exception in task 0.0 in stage 1.0 (TID 1)",
    "\tat org.apache.spark.sql.Dataset.show(Dataset.scala:1)",
    "Traceback (most recent call last):",
]


@pytest.mark.timeout(30)
@pytest.mark.parametrize("line", HARMLESS)
def test_harmless_lines_are_dropped(line):
    assert harmless(line)
    assert handouts.unintended_output(line, stderr=True) is None


@pytest.mark.timeout(30)
@pytest.mark.parametrize("line", LOOK_ALIKES)
def test_lines_that_merely_look_harmless_are_kept(line):
    assert not harmless(line)
    assert handouts.unintended_output(line, stderr=True) == line


@pytest.mark.timeout(30)
def test_handouts_use_the_one_list():
    assert handouts.KNOWN_NOISE is KNOWN_NOISE


@pytest.mark.timeout(60)
def test_forward_drains_the_pipe_and_passes_on_all_but_harmless_lines():
    source_read, source_write = os.pipe()
    sink_read, sink_write = os.pipe()
    thread = forward(source_read, sink_write, "test-forward")
    real = [b"ERROR something real\n", "caf\u00e9 \u2603\n".encode(), b"\xff\xfe not utf-8\n"]
    # far more than a pipe holds: the thread must keep reading while the sink is not read
    chatter = (JVM_WARNING + "\n").encode() * 20000
    with open(source_write, "wb") as jvm:
        jvm.write(real[0] + chatter + real[1] + chatter + real[2] + b"no line end")
    thread.join(timeout=50)
    assert not thread.is_alive()
    os.close(sink_write)
    with open(sink_read, "rb") as sink:
        assert sink.read() == b"".join(real) + b"no line end"


@pytest.mark.timeout(60)
@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_forward_keeps_draining_when_it_cannot_write():
    source_read, source_write = os.pipe()
    full = os.open("/dev/full", os.O_WRONLY)  # every write fails (ENOSPC)
    try:
        thread = forward(source_read, full, "test-forward-full")
        with open(source_write, "wb") as jvm:
            jvm.write(b"ERROR lost\n" * 20000)
        thread.join(timeout=50)
        assert not thread.is_alive()
    finally:
        os.close(full)
