"""A ``SPARK_HOME`` under which Spark's Python processes import PySpark with cached bytecode.

Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` first on its Python workers' path, and a
zip holds no compiled bytecode. For a pip-installed PySpark, ``worker_spark_home`` builds
once (under ``~/.cache/statekit``) a mirror of the installation as symbolic links, without
the zip; ``statekit.spark.session`` starts the JVM with ``SPARK_HOME`` pointing there.

Example:
    >>> home = worker_spark_home()                               # doctest: +SKIP
    >>> os.path.exists(os.path.join(home, "python/lib/pyspark.zip"))  # doctest: +SKIP
    False
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
from pathlib import Path

from statekit.cache import cache_dir


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
