"""A set of jars fetched once per machine from Maven Central with ``mvn``: where it lives in
statekit's cache, fetching it, and checking it is whole.

A pom beside the module that owns a set names what to fetch (nothing is built); ``mvn
dependency:copy-dependencies`` copies the jars into a staging folder renamed whole, with
``jars.json`` (each jar's name and size as fetched). A jar missing, cut short or not a zip
is named, with the command that fetches the set again. Apache Kafka's broker jars
(``statekit.kafka.jars``) and Hadoop's S3A connector (``statekit.spark.s3a_jars``) are two
such sets; none is ever committed. A set with ``build=True`` is a Maven module of its own
(statekit's reference Kafka Streams app, ``statekit.kafka_streams.build``): it is compiled
(``package``) in a copy of the pom's folder, its jar beside its dependencies. Maven runs on
the Java statekit runs (``statekit.java``: ``JAVA_HOME``, else ``java`` on PATH).

Example:
    >>> from statekit.errors import BadArgument
    >>> jars = JarSet("demo", "1.0", Path("demo.pom.xml"), "demo-1.0.jar", "demo-1.0",
    ...               "python -m demo", BadArgument)
    >>> jars.folder({"XDG_CACHE_HOME": "/c"}).as_posix()
    '/c/statekit/demo-1.0/libs'
    >>> jars.problems(Path("/nonexistent/libs"))
    ['/nonexistent/libs does not exist']
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from statekit.atomic import write_atomic
from statekit.cache import cache_dir, remove_stale
from statekit.java import java_executable

MANIFEST = "jars.json"


@dataclass(frozen=True)
class JarSet:
    """One set of jars: what it is called, the pom naming it, the jar that must be in it.

    Attributes:
        name: what a person calls it in messages ("Apache Kafka 4.1.1's jars").
        version: the version the pom is given (``-D<version_property>=``).
        pom: the pom naming the jars.
        required_jar: a jar the set is useless without (its main one).
        cache_name: the cache sub-folder (by version), the jars in its ``libs/``.
        fetch_command: the command that fetches the set (named in every error).
        error: the StatekitError raised when the set is not usable.
        version_property: the pom's property the version fills.
        build: the pom's folder is a module to compile (``package``), not only a list.
    """

    name: str
    version: str
    pom: Path
    required_jar: str
    cache_name: str
    fetch_command: str
    error: type[Exception]
    version_property: str = "version"
    extra_help: str = field(default="")
    build: bool = False

    def how_to_get(self) -> str:
        """What a person can do when the jars are missing (named in every error about them)."""
        return (f"fetch them with `{self.fetch_command}` (needs Maven: apt-get install maven)"
                f"{self.extra_help}")

    def folder(self, environ: Mapping[str, str] | None = None) -> Path:
        """The folder the fetched jars live in (statekit's cache, by version)."""
        return cache_dir(environ) / self.cache_name / "libs"

    def problems(self, folder: Path) -> list[str]:
        """What is wrong with a fetched jar folder (empty when it is whole)."""
        if not folder.is_dir():
            return [f"{folder} does not exist"]
        try:
            listed = json.loads((folder / MANIFEST).read_text())["jars"]
        except (OSError, ValueError, KeyError, TypeError):
            return [f"{folder / MANIFEST} is missing or unreadable (a fetch that did not "
                    f"finish)"]
        found = []
        for name, size in sorted(listed.items()):
            jar = folder / name
            if not jar.is_file():
                found.append(f"{jar} is missing")
            elif jar.stat().st_size != size:
                found.append(f"{jar} has {jar.stat().st_size} bytes, {size} were fetched")
            elif not zipfile.is_zipfile(jar):
                found.append(f"{jar} is not a jar (zip)")
        if self.required_jar not in listed:
            found.append(f"{folder} has no {self.required_jar}")
        return found

    def require(self, folder: Path) -> Path:
        """``folder`` when it is whole; ``error`` naming what is wrong and how to fetch."""
        found = self.problems(folder)
        if found:
            raise self.error(f"{self.name} are not usable: {'; '.join(found[:3])}"
                             f"{' …' if len(found) > 3 else ''}; {self.how_to_get()}")
        return folder

    def jars(self, environ: Mapping[str, str] | None = None) -> list[Path]:
        """The fetched jars, checked whole (``error`` saying how to fetch them otherwise)."""
        folder = self.require(self.folder(environ))
        return sorted(folder.glob("*.jar"))

    def fetch(self, environ: Mapping[str, str] | None = None, quiet: bool = True) -> Path:
        """Copy the jars from Maven Central into the cache (once): the folder.

        A folder already whole is kept; the fetch goes to a staging folder renamed whole, so
        an interrupted fetch never leaves a half folder in place.
        """
        env = os.environ if environ is None else environ
        target = self.folder(env)
        if not self.problems(target):
            return target
        mvn = shutil.which("mvn")
        if mvn is None:
            raise self.error(f"cannot fetch {self.name}: no `mvn` on PATH; {self.how_to_get()}")
        target.parent.mkdir(parents=True, exist_ok=True)
        remove_stale([*target.parent.glob("libs.staging-*"), *target.parent.glob("build-*")],
                     max_age_s=3600)
        staging = Path(tempfile.mkdtemp(prefix="libs.staging-", dir=target.parent))
        workdir = Path(tempfile.mkdtemp(prefix="build-", dir=staging.parent)) if self.build \
            else None
        pom = self.pom
        if workdir is not None:  # compile in a copy: nothing is written beside the sources
            shutil.copytree(self.pom.parent, workdir, dirs_exist_ok=True)
            pom = workdir / self.pom.name
        goals = ["package"] if self.build else []
        cmd = [mvn, "-B", *(["-q"] if quiet else []), "-f", str(pom), *goals,
               "dependency:copy-dependencies", f"-D{self.version_property}={self.version}",
               "-DincludeScope=runtime", f"-DoutputDirectory={staging}"]
        try:
            done = subprocess.run(cmd, capture_output=quiet, text=True, check=False,
                                  timeout=900, env=maven_environment(os.environ))
            if done.returncode != 0:
                tail = ((done.stdout or "") + (done.stderr or "")).strip()[-1500:]
                raise self.error(f"`{' '.join(cmd)}` exited with {done.returncode}:\n{tail}\n"
                                 f"{self.how_to_get()}")
            jars = {jar.name: jar.stat().st_size for jar in staging.glob("*.jar")}
            write_atomic(staging / MANIFEST, json.dumps(
                {"version": self.version, "jars": jars}, indent=1, sort_keys=True))
            if self.problems(staging):
                raise self.error(f"the fetched jars are not whole: {self.problems(staging)}")
            if target.exists():
                shutil.rmtree(target)
            staging.rename(target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
            if workdir is not None:
                shutil.rmtree(workdir, ignore_errors=True)
        return target

    def main(self, argv: list[str] | None, where: Callable[[], str], description: str) -> int:
        """The fetch command's ``main``: fetch (unless ``--check``), then print ``where()``
        (what is there); the error and exit status 1 when the set is not usable."""
        parser = argparse.ArgumentParser(prog=self.fetch_command, description=description)
        parser.add_argument("--check", action="store_true",
                            help="only say where the jars are, or what is wrong (exit 1)")
        args = parser.parse_args(argv)
        try:
            if not args.check:
                self.fetch(quiet=True)
            found = where()
        except self.error as exc:
            print(exc, file=sys.stderr)
            return 1
        print(f"{self.name}: {found}")
        return 0


def maven_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` with ``JAVA_HOME`` naming the JDK of the Java statekit runs, so Maven
    compiles and runs on it, not on another JDK the machine may hold.

    Example:
        >>> maven_environment({"JAVA_HOME": "/nonexistent"})["JAVA_HOME"] != ""
        True
    """
    env = dict(environ)
    java = java_executable()
    if java is not None:
        env["JAVA_HOME"] = str(Path(java).resolve().parents[1])
    return env
