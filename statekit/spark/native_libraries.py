"""Spark's native libraries unpacked once per machine, not by every driver JVM.

Two of the jars of a pip-installed PySpark hold native code Java cannot load from inside a
jar: RocksDB's JNI library (``rocksdbjni-*.jar``, 14.7 MB: the state store statekit uses)
and lz4-java's (``lz4-java-*.jar``: Spark's default compression, of state checkpoint files
among others). Each one's loader first asks the JVM's library path (``System.loadLibrary``)
and, when that finds nothing, copies the library out of its jar into ``/tmp`` and loads the
copy. So every fresh driver JVM unpacked RocksDB's 14.7 MB again, inside its first
micro-batch (the first state store it opens), and every JVM killed with ``kill -9`` (a
crash drill) left its copies in ``/tmp``.

``NativeLibraries`` owns the unpacked copies: which libraries and which member of which
jar each one is on this machine (``LIBRARIES``), where they live
(``cache_dir()/jvm-native/<key>``, the key made of each jar's name, size and modification
time, so a new PySpark gets a new folder), how they are written (into a staging folder that
is renamed into place whole: a folder with the key's name is complete) and which folders
are kept (``KEPT_FOLDERS``). ``spark_session`` puts the folder on the driver JVM's library
path with Spark's own setting, ``spark.driver.extraLibraryPath`` (Spark's launcher adds it
to the JVM's ``LD_LIBRARY_PATH``), when it starts the JVM and ``conf`` names no library
path of its own. Measured in fresh JVMs here (3 each, alternating): RocksDB's library
loaded in 0.04–0.05 s instead of 0.13–0.17 s, time the first micro-batch no longer spends;
a fresh process's first window result moves by less than its run-to-run spread
(``bench/README.md``, "cold start"). A library the JVM cannot load from the folder (a
``noexec`` cache disk) is unpacked by its loader as before.

Only Linux with glibc on x86-64 or ARM64 is covered (the platforms of ``LIBRARIES``):
elsewhere ``supported`` is False and nothing changes. Executors of a cluster are separate
JVMs, on other machines: they unpack their own.

Example:
    >>> libraries = NativeLibraries.for_jars("/no/such/jars")
    >>> libraries.supported, libraries.library_path()
    (False, '')
    >>> NativeLibraries.for_this_machine().library_path()       # doctest: +SKIP
    '/root/.cache/statekit/jvm-native/9c1f…'
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from statekit.cache import cache_dir, keep_newest, remove_stale

_FOLDER = "jvm-native"
KEPT_FOLDERS = 3          # unpacked sets kept per machine (one per venv / Spark in use)
STALE_STAGING_S = 3600.0  # a staging folder this old is an unpack that died (kill -9)

#: jar name pattern → {machine (``platform.machine()``) → the library's member in that jar}.
#: The member's file name is the one its loader's ``System.loadLibrary`` looks for:
#: RocksDB's ``rocksdbjni-linux64``, lz4-java's ``lz4-java``.
LIBRARIES: dict[str, dict[str, str]] = {
    "rocksdbjni-*.jar": {"x86_64": "librocksdbjni-linux64.so",
                         "aarch64": "librocksdbjni-linux-aarch64.so"},
    "lz4-java-*.jar": {"x86_64": "net/jpountz/util/linux/amd64/liblz4-java.so",
                       "aarch64": "net/jpountz/util/linux/aarch64/liblz4-java.so"},
}


@dataclass(frozen=True)
class Library:
    """One native library: the jar that holds it, its member there, and its size."""

    jar: Path
    member: str
    size: int

    @property
    def file_name(self) -> str:
        return self.member.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class NativeLibraries:
    """The unpacked native libraries of one set of Spark jars, in one cache folder."""

    folder: Path
    libraries: tuple[Library, ...]

    @classmethod
    def for_jars(cls, jars: str | os.PathLike, cache: str | os.PathLike | None = None,
                 machine: str | None = None, libc: str | None = None) -> NativeLibraries:
        """The libraries of the jars in folder ``jars`` for ``machine`` and ``libc`` (default:
        this one's), kept under ``cache`` (default ``cache_dir()``). None of them when the
        machine is not covered, or a jar is missing, unreadable or lacks its member."""
        machine = platform.machine() if machine is None else machine
        libc = platform.libc_ver()[0] if libc is None else libc
        libraries = []
        if platform.system() == "Linux" and libc == "glibc":
            for pattern, members in LIBRARIES.items():
                found = sorted(Path(jars).glob(pattern))
                member = members.get(machine)
                if len(found) != 1 or member is None:
                    return cls._none(cache)
                try:
                    with zipfile.ZipFile(found[0]) as jar:
                        size = jar.getinfo(member).file_size
                except (OSError, KeyError, zipfile.BadZipFile):
                    return cls._none(cache)
                libraries.append(Library(found[0], member, size))
        if not libraries:
            return cls._none(cache)
        key = hashlib.sha1()
        for library in libraries:
            st = library.jar.stat()
            key.update(f"{library.jar.resolve()}:{st.st_size}:{st.st_mtime_ns}:"
                       f"{library.member}\0".encode())
        base = Path(cache) if cache is not None else cache_dir()
        return cls(base / _FOLDER / key.hexdigest()[:16], tuple(libraries))

    @classmethod
    def _none(cls, cache: str | os.PathLike | None) -> NativeLibraries:
        return cls((Path(cache) if cache is not None else cache_dir()) / _FOLDER, ())

    @classmethod
    def for_this_machine(cls, spark_home: str | os.PathLike | None = None) -> NativeLibraries:
        """The libraries of the Spark under ``spark_home`` (default: the installed PySpark)."""
        if spark_home is None:
            import pyspark

            spark_home = Path(pyspark.__file__).resolve().parent
        return cls.for_jars(Path(spark_home) / "jars")

    @property
    def supported(self) -> bool:
        """True when this machine's libraries are known and found in their jars."""
        return bool(self.libraries)

    def ready(self) -> bool:
        """True when every library is unpacked in ``folder``, at its size."""
        if not self.supported:
            return False
        try:
            return all((self.folder / lib.file_name).stat().st_size == lib.size
                       for lib in self.libraries)
        except OSError:
            return False

    def unpack(self) -> bool:
        """Unpack the libraries into ``folder`` unless they are there; True when ready.

        They are written into a staging folder beside it, renamed into place whole: a
        process that dies midway (``kill -9``, a full disk) leaves no folder with the key's
        name, only staging that a later unpack removes once it is an hour old. Two processes
        unpacking at once both end ready, one folder in place; a folder found damaged (a
        library missing or cut short) is replaced. Of the folders beside it
        (other venvs' or Spark versions') the ``KEPT_FOLDERS`` newest are kept.

        Raises:
            OSError: the cache folder cannot be written (a full or read-only disk).
        """
        if self.ready():
            return True
        if not self.supported:
            return False
        parent = self.folder.parent
        parent.mkdir(parents=True, exist_ok=True)
        remove_stale((p for p in parent.glob(".*-*") if p.is_dir()), STALE_STAGING_S)
        staging = Path(tempfile.mkdtemp(prefix=f".{self.folder.name}-", dir=parent))
        try:
            for lib in self.libraries:
                with zipfile.ZipFile(lib.jar) as jar, jar.open(lib.member) as source, \
                        open(staging / lib.file_name, "wb") as target:
                    shutil.copyfileobj(source, target, 1 << 20)
            staging.chmod(0o755)
            try:
                staging.rename(self.folder)
            except OSError:   # a folder is there: another process's (ready), or damaged
                if not self.ready():
                    shutil.rmtree(self.folder, ignore_errors=True)
                    staging.rename(self.folder)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        keep_newest((p for p in parent.iterdir() if p.is_dir() and not p.name.startswith(".")),
                    KEPT_FOLDERS)
        return self.ready()

    def library_path(self) -> str:
        """``folder`` once the libraries are unpacked there (unpacking them if needed), else
        ``""`` (not covered here; ``unpack`` raises when the cache cannot be written)."""
        return str(self.folder) if self.unpack() else ""

