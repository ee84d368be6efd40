"""A session whose Python workers cannot import statekit is named before a query starts
(issue 40: before, the first batch failed with Spark's PYTHON_DATA_SOURCE_ERROR)."""

from __future__ import annotations

import sys

import pytest

from statekit.errors import WorkersLackStatekit
from statekit.spark.workers import require_statekit_in_workers_of


@pytest.fixture()
def bare_python(tmp_path):
    """A real interpreter without statekit: this one with site-packages and the working
    folder left off its path (-I -S)."""
    path = tmp_path / "python-without-site"
    path.write_text(f'#!/bin/sh\nexec "{sys.executable}" -I -S "$@"\n')
    path.chmod(0o755)
    return str(path)


def test_workers_on_an_interpreter_without_statekit_are_named_with_the_fix(bare_python):
    with pytest.raises(WorkersLackStatekit) as raised:
        require_statekit_in_workers_of("local[2]", bare_python)
    message = str(raised.value)
    assert bare_python in message
    assert f"PYSPARK_PYTHON={sys.executable}" in message
    assert "statekit.spark_session()" in message


@pytest.mark.parametrize("python", [sys.executable, "python-as-on-path"])
def test_workers_on_an_interpreter_with_statekit_pass(python, tmp_path, monkeypatch):
    if python == "python-as-on-path":    # the same interpreter, found by name on PATH
        (tmp_path / python).symlink_to(sys.executable)
        monkeypatch.setenv("PATH", f"{tmp_path}:{__import__('os').environ['PATH']}")
    require_statekit_in_workers_of("local[*]", python)


def test_a_missing_interpreter_is_named(tmp_path):
    with pytest.raises(WorkersLackStatekit, match="no-such-python"):
        require_statekit_in_workers_of("local[2]", str(tmp_path / "no-such-python"))


def test_a_cluster_master_is_not_asked(bare_python):
    # its executors run elsewhere: nothing on this machine can answer for them
    require_statekit_in_workers_of("spark://somewhere:7077", bare_python)


def test_the_shared_test_session_passes(spark):
    from statekit.spark.workers import require_statekit_in_workers

    require_statekit_in_workers(spark)
