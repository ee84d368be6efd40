"""Building the reference Kafka Streams application: where the build lives, when it is built
again, and what a machine without it is told (no broker, no JVM started)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import statekit as sk
from statekit.datasets import GAME_SPEC
from statekit.errors import KafkaStreamsAppError
from statekit.java import java_executable
from statekit.kafka_streams import build
from statekit.maven_jars import maven_environment


def test_a_changed_java_source_is_built_again(tmp_path, monkeypatch):
    module = tmp_path / "jvm"
    shutil.copytree(build.MODULE, module)
    monkeypatch.setattr(build, "MODULE", module)
    before = build.sources_hash()
    assert build.app_jars({"XDG_CACHE_HOME": "/c"}).parent.name.endswith(before)
    source = next(module.rglob("Main.java"))
    source.write_text(source.read_text() + "\n// changed\n")
    assert build.sources_hash() != before


def test_without_the_build_start_says_how_to_build_it(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    with pytest.raises(KafkaStreamsAppError, match="python -m statekit.kafka_streams.build"):
        sk.kafka_streams.start("games", GAME_SPEC, kafka="127.0.0.1:1")


@pytest.mark.skipif(java_executable() is None, reason="no Java here")
def test_maven_runs_on_the_java_statekit_runs(monkeypatch):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    home = Path(maven_environment({})["JAVA_HOME"])
    assert (home / "bin" / "java").resolve() == Path(java_executable()).resolve()
