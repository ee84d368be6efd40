"""Spark's native libraries unpacked once per machine (``statekit.spark.native_libraries``):
what is unpacked from which jar, the folder's key, whole folders only (damage, a race, a stale
staging folder), machines it does not cover, and a fresh session's JVM loading RocksDB from
the folder instead of a ``/tmp`` copy of its own.

The unit tests build small jars of their own (real zip files in ``tmp_path``); the last ones
start real driver JVMs in fresh processes.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from pathlib import Path

import pytest

from statekit.spark.native_libraries import KEPT_FOLDERS, LIBRARIES, NativeLibraries

ROCKS_X86 = "librocksdbjni-linux64.so"
LZ4_X86 = "net/jpountz/util/linux/amd64/liblz4-java.so"


def _jars(folder: Path, rocks: bytes = b"rocks" * 4000, lz4: bytes = b"lz4" * 300,
          version: str = "9.8.4", members: dict[str, str] | None = None) -> Path:
    """A jars folder with a RocksDB and an lz4-java jar, each holding both machines' members."""
    folder.mkdir(parents=True, exist_ok=True)
    names = members or {}
    with zipfile.ZipFile(folder / f"rocksdbjni-{version}.jar", "w", zipfile.ZIP_DEFLATED) as jar:
        for member in names.get("rocks", LIBRARIES["rocksdbjni-*.jar"].values()):
            jar.writestr(member, rocks)
        jar.writestr("org/rocksdb/RocksDB.class", b"\xca\xfe\xba\xbe")
    with zipfile.ZipFile(folder / "lz4-java-1.11.0.jar", "w", zipfile.ZIP_DEFLATED) as jar:
        for member in names.get("lz4", LIBRARIES["lz4-java-*.jar"].values()):
            jar.writestr(member, lz4)
    return folder


def _of(jars: Path, cache: Path, machine: str = "x86_64", libc: str = "glibc"):
    return NativeLibraries.for_jars(jars, cache=cache, machine=machine, libc=libc)


def test_each_library_is_unpacked_once_with_its_jar_member_bytes(tmp_path):
    rocks, lz4 = os.urandom(70_000), os.urandom(3_000)
    libraries = _of(_jars(tmp_path / "jars", rocks, lz4), tmp_path / "cache")
    assert libraries.supported and not libraries.ready()
    assert [lib.file_name for lib in libraries.libraries] == ["librocksdbjni-linux64.so",
                                                              "liblz4-java.so"]
    path = libraries.library_path()
    assert path == str(libraries.folder) and libraries.ready()
    assert libraries.folder.parent == tmp_path / "cache" / "jvm-native"
    assert (libraries.folder / "librocksdbjni-linux64.so").read_bytes() == rocks
    assert (libraries.folder / "liblz4-java.so").read_bytes() == lz4
    assert sorted(p.name for p in libraries.folder.iterdir()) == ["liblz4-java.so",
                                                                  "librocksdbjni-linux64.so"]
    written = (libraries.folder / "librocksdbjni-linux64.so").stat().st_mtime_ns
    time.sleep(0.01)
    assert libraries.library_path() == path          # already there: not written again
    assert (libraries.folder / "librocksdbjni-linux64.so").stat().st_mtime_ns == written
    assert [p.name for p in libraries.folder.parent.iterdir()] == [libraries.folder.name]


def test_arm64_takes_the_arm64_members(tmp_path):
    jars = tmp_path / "jars"
    jars.mkdir()
    with zipfile.ZipFile(jars / "rocksdbjni-9.8.4.jar", "w") as jar:
        jar.writestr(ROCKS_X86, b"x86")
        jar.writestr("librocksdbjni-linux-aarch64.so", b"arm rocks")
    with zipfile.ZipFile(jars / "lz4-java-1.11.0.jar", "w") as jar:
        jar.writestr(LZ4_X86, b"x86")
        jar.writestr("net/jpountz/util/linux/aarch64/liblz4-java.so", b"arm lz4")
    libraries = _of(jars, tmp_path / "cache", machine="aarch64")
    folder = Path(libraries.library_path())
    assert (folder / "librocksdbjni-linux-aarch64.so").read_bytes() == b"arm rocks"
    assert (folder / "liblz4-java.so").read_bytes() == b"arm lz4"
    assert not (folder / ROCKS_X86).exists()


@pytest.mark.parametrize("machine, libc", [("riscv64", "glibc"), ("x86_64", ""),
                                           ("x86_64", "musl"), ("", "glibc")],
                         ids=["riscv64", "no-glibc", "musl", "unknown-machine"])
def test_a_machine_it_does_not_cover_changes_nothing(tmp_path, machine, libc):
    libraries = _of(_jars(tmp_path / "jars"), tmp_path / "cache", machine, libc)
    assert not libraries.supported and not libraries.ready()
    assert libraries.library_path() == "" and not libraries.unpack()
    assert not (tmp_path / "cache").exists()          # nothing written


def _no_rocks_jar(jars: Path) -> None:
    (jars / "rocksdbjni-9.8.4.jar").unlink()


def _two_rocks_jars(jars: Path) -> None:
    _jars(jars, version="9.9.0")


def _not_a_zip(jars: Path) -> None:
    (jars / "lz4-java-1.11.0.jar").write_bytes(b"PK\x03\x04 but torn")


def _member_missing(jars: Path) -> None:
    _jars(jars, members={"rocks": ["librocksdbjni-osx-arm64.jnilib"]})


@pytest.mark.parametrize("spoil", [_no_rocks_jar, _two_rocks_jars, _not_a_zip, _member_missing],
                         ids=["no-rocksdb-jar", "two-rocksdb-jars", "torn-jar", "no-member"])
def test_jars_it_cannot_read_the_libraries_from_change_nothing(tmp_path, spoil):
    jars = _jars(tmp_path / "jars")
    spoil(jars)
    libraries = _of(jars, tmp_path / "cache")
    assert not libraries.supported and libraries.library_path() == ""
    assert not (tmp_path / "cache").exists()


def test_no_jars_folder_at_all():
    libraries = NativeLibraries.for_jars("/no/such/jars", machine="x86_64", libc="glibc")
    assert not libraries.supported and libraries.library_path() == ""


def test_a_changed_jar_gets_a_folder_of_its_own_and_the_newest_three_are_kept(tmp_path):
    jars, cache = _jars(tmp_path / "jars"), tmp_path / "cache"
    folders = []
    for i in range(KEPT_FOLDERS + 2):
        jar = jars / "rocksdbjni-9.8.4.jar"
        os.utime(jar, ns=(10**18 + i, 10**18 + i))      # a venv made anew: the same jar, new time
        libraries = _of(jars, cache)
        assert libraries.library_path()
        folders.append(libraries.folder)
        time.sleep(0.01)                              # the next folder is newer
    assert len(set(folders)) == KEPT_FOLDERS + 2      # each jar version its own key
    kept = sorted(p.name for p in (cache / "jvm-native").iterdir())
    assert kept == sorted(f.name for f in folders[-KEPT_FOLDERS:])


def test_the_same_jars_under_two_spark_homes_of_links_share_one_folder(tmp_path):
    """statekit's worker SPARK_HOME mirror links each jar: it is the same key as the real one."""
    real = _jars(tmp_path / "jars")
    mirror = tmp_path / "mirror" / "jars"
    mirror.mkdir(parents=True)
    for jar in real.iterdir():
        (mirror / jar.name).symlink_to(jar)
    assert _of(real, tmp_path / "cache").folder == _of(mirror, tmp_path / "cache").folder


@pytest.mark.parametrize("damage", ["cut-short", "missing", "emptied"])
def test_a_damaged_folder_is_unpacked_again(tmp_path, damage):
    rocks = os.urandom(50_000)
    libraries = _of(_jars(tmp_path / "jars", rocks), tmp_path / "cache")
    folder = Path(libraries.library_path())
    target = folder / "librocksdbjni-linux64.so"
    if damage == "cut-short":
        os.truncate(target, 1000)
    elif damage == "missing":
        target.unlink()
    else:
        for file in folder.iterdir():
            file.unlink()
    assert not libraries.ready()
    assert libraries.library_path() == str(folder) and target.read_bytes() == rocks


def test_eight_unpacks_at_once_all_end_ready_with_one_folder(tmp_path):
    rocks = os.urandom(200_000)
    jars, cache = _jars(tmp_path / "jars", rocks), tmp_path / "cache"
    results: list[str] = []
    start = threading.Barrier(8)

    def unpack() -> None:
        start.wait(timeout=10)
        results.append(_of(jars, cache).library_path())

    threads = [threading.Thread(target=unpack) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(results) == 8 and len(set(results)) == 1 and results[0]
    assert [p.name for p in (cache / "jvm-native").iterdir()] == [Path(results[0]).name]
    assert (Path(results[0]) / "librocksdbjni-linux64.so").read_bytes() == rocks


def test_staging_left_by_a_killed_unpack_goes_once_it_is_an_hour_old(tmp_path):
    jars, cache = _jars(tmp_path / "jars"), tmp_path / "cache"
    libraries = _of(jars, cache)
    parent = cache / "jvm-native"
    old, recent = parent / f".{libraries.folder.name}-dead", parent / ".other-running"
    for staging in (old, recent):
        staging.mkdir(parents=True)
        (staging / "librocksdbjni-linux64.so").write_bytes(b"half")
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    assert libraries.library_path()
    assert not old.exists() and recent.exists()       # another unpack may still be writing
    assert libraries.folder.exists()


def test_an_unwritable_cache_raises_and_leaves_no_folder(tmp_path):
    cache = tmp_path / "cache"
    cache.write_text("a file where the cache folder should be")
    libraries = _of(_jars(tmp_path / "jars"), cache)
    with pytest.raises(OSError):
        libraries.unpack()
    assert cache.is_file()


# --- a fresh session's driver JVM -------------------------------------------------------
_CHILD = """
import os, tempfile
import statekit as sk
from pyspark import SparkContext
from statekit.spark.class_archive import training_query
spark = sk.spark_session('local[1]', app_name='statekit-test-native'{kwargs})
query = training_query(spark, tempfile.mkdtemp(), rows=100, batches=1)
query.awaitTermination(300)
pid = SparkContext._gateway.proc.pid
maps = sorted({{line.split()[-1] for line in open(f'/proc/{{pid}}/maps')
                if 'librocksdbjni' in line}})
env = [e for e in open(f'/proc/{{pid}}/environ').read().split(chr(0))
       if e.startswith('LD_LIBRARY_PATH=')]
print('STATE', query.lastProgress['stateOperators'][0]['numRowsTotal'] > 0)
print('MAPS', '|'.join(maps))
print('ENV', '|'.join(env))
"""


@pytest.mark.slow
@pytest.mark.skipif(not NativeLibraries.for_this_machine().supported,
                    reason="statekit does not unpack native libraries on this machine")
@pytest.mark.parametrize("kwargs, from_cache, library_path", [
    ("", True, "statekit"),
    (", native_libraries=False", False, None),
    # conf's own library path is the person's: statekit adds nothing to it
    (", conf={'spark.driver.extraLibraryPath': '/opt/mine'}", False, "/opt/mine"),
], ids=["default", "off", "conf-own-path"])
def test_a_fresh_sessions_jvm_loads_rocksdb_from_the_folder_asked_for(kwargs, from_cache,
                                                                      library_path):
    """In a fresh process: a RocksDB state store opened, then which copy of RocksDB's library
    the JVM maps: statekit's unpacked one, or the one the JVM unpacked into /tmp itself."""
    folder = NativeLibraries.for_this_machine().folder
    out = subprocess.run([sys.executable, "-c", _CHILD.format(kwargs=kwargs)],
                         capture_output=True, text=True, timeout=600)
    lines = dict(line.split(" ", 1) for line in out.stdout.splitlines()
                 if line.split(" ", 1)[0] in ("STATE", "MAPS", "ENV") and " " in line)
    assert lines.get("STATE") == "True", out.stderr[-3000:]
    maps = lines["MAPS"].split("|")
    assert len(maps) == 1
    if from_cache:
        assert maps == [str(folder / "librocksdbjni-linux64.so")]
    else:
        assert Path(maps[0]).parent == Path(tempfile.gettempdir())   # the JVM's own copy
        assert Path(maps[0]).name.startswith("librocksdbjni")
    env = lines.get("ENV", "")
    if library_path is None:
        assert env == ""
    elif library_path == "statekit":
        assert env == f"LD_LIBRARY_PATH={folder}"
    else:
        assert env == f"LD_LIBRARY_PATH={library_path}"
