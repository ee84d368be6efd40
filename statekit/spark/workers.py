"""Spark's Python workers must import statekit: its Kafka source and its processors run there.

A session built by ``statekit.spark_session()`` runs its workers on this very interpreter
(``PYSPARK_PYTHON``). A session a person built themselves, without ``PYSPARK_PYTHON``,
runs them on whatever ``python3`` is first on ``PATH``; without statekit there, the first
batch fails with Spark's ``PYTHON_DATA_SOURCE_ERROR ... No module named 'statekit'``.
``require_statekit_in_workers`` finds that out before a query starts, on a local master
(whose workers are this machine's processes; a cluster's executors cannot be asked here).

Example:
    >>> require_statekit_in_workers_of("local[2]", sys.executable)   # this one has it
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from statekit.errors import WorkersLackStatekit

#: interpreter path -> whether it imports statekit (asked once per process)
_ANSWERS: dict[str, bool] = {}


def _imports_statekit(python: str) -> bool:
    if python not in _ANSWERS:
        try:
            done = subprocess.run([python, "-c", "import statekit"], capture_output=True,
                                  timeout=120, check=False)
            _ANSWERS[python] = done.returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            _ANSWERS[python] = False
    return _ANSWERS[python]


def require_statekit_in_workers_of(master: str, python: str) -> None:
    """WorkersLackStatekit naming ``python`` (the workers' interpreter) and the fix, when a
    local ``master``'s workers would run an interpreter that cannot import statekit."""
    if not master.startswith("local"):
        return
    found = shutil.which(python) or python
    if os.path.realpath(found) == os.path.realpath(sys.executable) or _imports_statekit(found):
        return
    raise WorkersLackStatekit(
        f"this Spark session's Python workers run {python!r} ({found}), which cannot import "
        f"statekit, and statekit's Kafka source and processors run in them: build the "
        f"session with statekit.spark_session(), or set PYSPARK_PYTHON={sys.executable} "
        f"before the session is built (it is read once, when Spark starts)")


def require_statekit_in_workers(spark) -> None:
    """``require_statekit_in_workers_of`` the session's master and worker interpreter (a
    classic session; Spark Connect's server has its own, checked when it was started)."""
    from statekit.spark.connect import is_connect

    if is_connect(spark):
        return
    context = spark.sparkContext
    require_statekit_in_workers_of(context.master, context.pythonExec)
