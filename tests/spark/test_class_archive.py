"""The driver JVM's class-data archive: which file is valid, which is refused, and that a
session started by statekit really maps the archive built for this machine."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from statekit.spark.class_archive import _MAGIC, _MIN_BYTES, ClassArchive

JDK17 = (17, 0)


def _archive_file(path: Path, size: int, magic: bytes = _MAGIC) -> Path:
    with open(path, "wb") as f:
        f.write(magic)
        f.truncate(size)
    return path


def test_a_whole_looking_archive_is_used(tmp_path):
    path = _archive_file(tmp_path / "a.jsa", 2 * _MIN_BYTES)
    archive = ClassArchive.from_parts(path, JDK17)
    assert archive.ready()
    assert archive.java_option() == f"-XX:SharedArchiveFile={path}"


@pytest.mark.parametrize("make", [
    lambda p: None,                                          # missing
    lambda p: _archive_file(p, 4096),                        # torn: far too small
    lambda p: _archive_file(p, 2 * _MIN_BYTES, b"\x00\x00\x00\x00"),  # not an archive
    lambda p: _archive_file(p, 2 * _MIN_BYTES, (0xF00BABA2).to_bytes(4, "little")),  # static
    lambda p: p.mkdir(),                                     # a folder of that name
], ids=["missing", "torn", "not-an-archive", "a-static-archive", "a-folder"])
def test_a_file_that_is_not_a_whole_dynamic_archive_is_never_given_to_the_jvm(tmp_path, make):
    path = tmp_path / "a.jsa"
    make(path)
    archive = ClassArchive.from_parts(path, JDK17)
    assert not archive.ready()
    assert archive.java_option() == ""


@pytest.mark.parametrize("version", [None, (1, 8), (11, 0), (12, 9)],
                         ids=["no-java", "java-8", "java-11", "java-12"])
def test_a_jvm_older_than_13_gets_no_archive(tmp_path, version):
    path = _archive_file(tmp_path / "a.jsa", 2 * _MIN_BYTES)
    archive = ClassArchive.from_parts(path, version)
    assert not archive.supported and not archive.ready() and archive.java_option() == ""
    assert archive.build() is False
    assert not (tmp_path / "build.log").exists()


@pytest.mark.parametrize("release, expected", [
    ('JAVA_VERSION="17.0.15"', (17, 0)), ('JAVA_VERSION="1.8.0_402"', (8, 0)),
    ('JAVA_VERSION="21"', (21, 0)), ("IMPLEMENTOR=x", None), ('JAVA_VERSION="x.y"', None),
], ids=["17", "1.8", "21", "no-version", "garbled"])
def test_the_java_version_is_read_from_the_jdk_release_file(tmp_path, release, expected):
    from statekit.spark.class_archive import _java_version

    (tmp_path / "release").write_text(f"{release}\n")
    assert _java_version(tmp_path) == expected
    assert _java_version(tmp_path / "missing") is None


def test_the_archive_is_keyed_by_class_path_and_kept_in_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    plain = ClassArchive.for_this_machine()
    assert plain.path.parent == tmp_path / "statekit" / "jvm-classes"
    assert plain.path.suffix == ".jsa"
    assert ClassArchive.for_this_machine().path == plain.path  # stable
    assert ClassArchive.for_this_machine(extra_class_path="/x.jar").path != plain.path
    assert ClassArchive.for_this_machine(spark_home=tmp_path).path != plain.path


def test_a_jar_rewritten_with_the_same_name_and_size_gets_a_new_key(tmp_path, monkeypatch):
    """A venv made anew at the same path: the same jars, new modification times. The JVM
    refuses an archive whose class-path jars changed time ("top archive failed to load"),
    so the key changes with them and the old archive is never taken as this one."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    home = tmp_path / "spark"
    (home / "jars").mkdir(parents=True)
    for name in ("spark-core.jar", "spark-sql.jar"):
        (home / "jars" / name).write_bytes(b"PK" + name.encode())
    first = ClassArchive.for_this_machine(spark_home=home)
    assert ClassArchive.for_this_machine(spark_home=home).path == first.path
    jar = home / "jars" / "spark-sql.jar"
    stat = jar.stat()
    os.utime(jar, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert jar.stat().st_size == stat.st_size
    assert ClassArchive.for_this_machine(spark_home=home).path != first.path
    os.utime(jar, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert ClassArchive.for_this_machine(spark_home=home).path == first.path
    (home / "jars" / "extra.jar").write_bytes(b"PK")
    assert ClassArchive.for_this_machine(spark_home=home).path != first.path


def test_a_torn_archive_is_refused_by_the_check_before_it_could_be_used(tmp_path):
    """The build's last step starts a JVM with the candidate under -Xshare:on: a torn file
    (right magic, cut short) fails there, in a child, so it is never renamed into place."""
    torn = _archive_file(tmp_path / "torn.jsa.tmp", 2 * _MIN_BYTES)
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    out = subprocess.run([sys.executable, "-m", "statekit.spark.class_archive", "--check",
                          str(torn)], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode != 0


@pytest.mark.slow
def test_a_session_statekit_starts_maps_this_machines_archive():
    """In a fresh process (its own JVM), spark_session() maps the archive `make` built."""
    archive = ClassArchive.for_this_machine(_mirror())
    if not archive.ready():
        pytest.skip(f"no class-data archive built on this machine ({archive.path}); "
                    "`make jvm-classes` builds it")
    child = (
        "import statekit as sk\n"
        "from pyspark import SparkContext\n"
        "spark = sk.spark_session('local[1]', app_name='statekit-test-class-archive')\n"
        "from statekit.spark.class_archive import ClassArchive\n"
        "from statekit.spark.worker_home import worker_spark_home\n"
        "archive = ClassArchive.for_this_machine(worker_spark_home())\n"
        "mapped = archive.mapped_by(SparkContext._gateway.proc.pid)\n"
        f"print('MAPPED', mapped and str(archive.path) == {str(archive.path)!r}, "
        "spark.range(5).count())\n")
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True,
                         timeout=600)
    assert "MAPPED True 5" in out.stdout, out.stderr[-3000:]
    assert "Unable to use shared archive" not in out.stdout + out.stderr


def _mirror():
    from statekit.spark.worker_home import worker_spark_home

    return worker_spark_home()


def test_an_archive_no_process_maps_is_not_reported_mapped(tmp_path):
    archive = ClassArchive.from_parts(_archive_file(tmp_path / "a.jsa", 4096), JDK17)
    assert not archive.mapped_by(os.getpid())      # this process maps no archive
    assert not archive.mapped_by(2**22 + 12345)    # no such process


def test_the_newest_archives_are_kept_and_older_ones_removed(tmp_path):
    from statekit.cache import keep_newest
    from statekit.spark.class_archive import KEPT_ARCHIVES

    paths = []
    for i in range(KEPT_ARCHIVES + 2):
        path = _archive_file(tmp_path / f"spark-{i}.jsa", 4096)
        os.utime(path, (1_000_000 + i, 1_000_000 + i))
        paths.append(path)
    (tmp_path / "build.log").write_text("kept: not an archive")
    keep_newest(tmp_path.glob("*.jsa"), KEPT_ARCHIVES)   # as ClassArchive.build calls it
    assert sorted(p.name for p in tmp_path.glob("*.jsa")) == sorted(
        p.name for p in paths[-KEPT_ARCHIVES:])
    assert (tmp_path / "build.log").exists()
