"""spark_session's start-up help: PySpark imported from site-packages by Spark's Python
processes (``worker_spark_home``). Values, never timings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyspark
import pytest

from statekit.spark.worker_home import worker_spark_home

REAL = Path(pyspark.__file__).resolve().parent
PLAIN = {"PATH": os.environ.get("PATH", "")}


def test_the_mirror_is_the_installation_without_pyspark_zip(tmp_path):
    home = Path(worker_spark_home(tmp_path, PLAIN))
    assert (home / "bin" / "spark-submit").resolve() == (REAL / "bin" / "spark-submit").resolve()
    assert (home / "jars").resolve() == (REAL / "jars").resolve()
    assert not (home / "python" / "lib" / "pyspark.zip").exists()
    py4j = [p.name for p in (REAL / "python" / "lib").iterdir() if p.name.startswith("py4j")]
    assert py4j and all((home / "python" / "lib" / name).exists() for name in py4j)
    assert (REAL / "python" / "lib" / "pyspark.zip").is_file()  # the installation is untouched


def test_the_mirror_is_built_once_and_reused(tmp_path):
    first = worker_spark_home(tmp_path, PLAIN)
    marker = Path(first) / "python" / "marker"
    marker.touch()  # a rebuild would drop it
    assert worker_spark_home(tmp_path, PLAIN) == first
    assert marker.exists()
    assert [p.name for p in tmp_path.iterdir()] == [Path(first).name]  # no staging left


def test_a_broken_mirror_is_rebuilt(tmp_path):
    home = Path(worker_spark_home(tmp_path, PLAIN))
    (home / "jars").unlink()
    assert worker_spark_home(tmp_path, PLAIN) == str(home)
    assert (home / "jars").resolve() == (REAL / "jars").resolve()


@pytest.mark.parametrize("environ", [
    {"SPARK_HOME": "/opt/spark"},
    {"PYSPARK_PYTHON": "/usr/bin/some-other-python"},
], ids=["own-spark-home", "other-worker-python"])
def test_nothing_changes_when_spark_is_set_up_otherwise(tmp_path, environ):
    assert worker_spark_home(tmp_path, {**PLAIN, **environ}) is None
    assert not any(tmp_path.iterdir())


def test_the_same_python_as_workers_is_fine(tmp_path):
    assert worker_spark_home(tmp_path, {**PLAIN, "PYSPARK_PYTHON": sys.executable}) is not None


def test_an_unwritable_cache_changes_nothing(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    assert worker_spark_home(blocked / "cache", PLAIN) is None


CHILD = r"""
import json, os, sys
import statekit as sk
spark = sk.spark_session("local[2]", app_name="statekit-test-worker-home")
from pyspark.sql.functions import udf

@udf("string")
def pyspark_file(_):
    import pyspark
    return pyspark.__file__

print("RESULT " + json.dumps({
    "spark_home_left_alone": os.environ.get("SPARK_HOME"),
    "worker_pyspark": spark.range(1).select(pyspark_file("id")).first()[0]}))
"""


@pytest.mark.slow
def test_a_fresh_sessions_python_workers_import_installed_pyspark(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_HOME", "PYSPARK_PYTHON")}
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                         env=env, timeout=900, cwd=tmp_path)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, out.stderr[-3000:]
    result = json.loads(lines[-1][len("RESULT "):])
    assert result["spark_home_left_alone"] is None  # set for the JVM's launch only
    worker = Path(result["worker_pyspark"])
    assert "pyspark.zip" not in str(worker)
    assert worker.resolve() == Path(pyspark.__file__).resolve()
    assert any((tmp_path / "cache" / "statekit").iterdir())
