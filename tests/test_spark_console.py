"""What a fresh statekit session prints on the console: nothing of Spark's own.

PySpark's gateway starts Spark's logging as a shell does and Spark printed
"Setting default log level to "WARN"" on stderr, red under the first cell of every
notebook. The JVM's own start-up warning about the incubator module Spark 4 needs
is the only line left (the JVM prints it unconditionally; handouts drop it).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

CHILD = """
import statekit as sk
spark = sk.spark_session("local[1]")
print("ROWS", spark.range(3).count())
spark.stop()
"""
JVM_WARNING = "WARNING: Using incubator modules: jdk.incubator.vector"


@pytest.mark.slow   # a Spark session of its own in a child process
@pytest.mark.timeout(600)
def test_a_fresh_session_prints_no_log_level_banner(tmp_path):
    run = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                         timeout=500, cwd=tmp_path)
    assert "ROWS 3" in run.stdout, run.stderr[-3000:]
    assert "Setting default log level" not in run.stderr
    said = [line for line in run.stderr.splitlines() if line.strip() and line != JVM_WARNING]
    assert said == [], run.stderr[-3000:]
