"""The import rules: data flows one way, and each layer loads only what it needs.

Layers, lowest first (a module may import its own layer and lower ones, never higher):

0. rules, files and processes: ``errors``, ``validate``, ``atomic``, ``durations``, ``_lazy``,
   ``processes``, ``cache``; typed options' machinery: ``options``
1. descriptions: ``query.spec``, ``kafka.connection``, ``query.options``
2. sources and engines: ``kafka``, ``spark``, ``datasets``
3. state: ``state``, ``query.progress``, ``query.reference``, ``query.session_reference``,
   ``query.running`` (the running aggregate's state processor), ``query.growth``; any
   checkpoint: ``inspect``; a person's own processor, its stores and the runner Spark's
   Python workers call: ``processor``
4. the changelog: ``changelog``
5. the query and the local stores: ``query.stateful``, ``stores``; monitoring: ``monitor``;
   starting and reading a processor: ``processor.query``
6. restore, standby, drills: ``restore``
7. serving (interactive queries): ``serve``; a person's own query, attached and followed
   live (its state, changelogs, serving): ``live``
8. charts (pure functions to Altair): ``charts``
9. widgets: ``widgets``
10. entry points: the package itself, ``demo``, ``doctor``, ``__main__``; the workshop's
    exercises: ``workshop``

Besides, a few modules must stay light at run time (checked in a fresh interpreter):
the stores and the pandas changelog model load without pyspark, a store-owner
worker without Altair or ipywidgets, Spark's Python workers (the Kafka source)
without pandas or Altair.
"""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "statekit"

LAYERS = [
    ("statekit.errors", 0), ("statekit.validate", 0), ("statekit.atomic", 0),
    ("statekit.durations", 0), ("statekit._lazy", 0), ("statekit.processes", 0),
    ("statekit.cache", 0), ("statekit.options", 0),
    ("statekit.query.spec", 1), ("statekit.kafka.connection", 1), ("statekit.query.options", 1),
    ("statekit.kafka", 2), ("statekit.spark", 2), ("statekit.datasets", 2),
    ("statekit.state", 3), ("statekit.query.progress", 3), ("statekit.query.reference", 3),
    ("statekit.query.running", 3), ("statekit.query.growth", 3),
    ("statekit.query.session_reference", 3), ("statekit.inspect", 3),
    ("statekit.processor", 3),
    ("statekit.changelog", 4),
    ("statekit.query.stateful", 5), ("statekit.stores", 5), ("statekit.monitor", 5),
    ("statekit.processor.query", 5),
    ("statekit.restore", 6),
    ("statekit.serve", 7), ("statekit.live", 7),
    ("statekit.charts", 8),
    ("statekit.widgets", 9),
    ("statekit.demo", 10), ("statekit.doctor", 10), ("statekit.__main__", 10),
    ("statekit.workshop", 10),
]
#: Package ``__init__`` files only re-export their own modules (lazily, by name).
PACKAGE_INITS = {"statekit.query": 5, "statekit": 10}

#: Third-party packages only some layers may import (anywhere in the module, even lazily).
ONLY_IN = {
    "ipywidgets": ("statekit.widgets",),
    "anywidget": ("statekit.widgets",),
    "altair": ("statekit.charts", "statekit.widgets"),
    "fastapi": ("statekit.serve",),
    "uvicorn": ("statekit.serve",),
}
#: Modules that must not import pyspark at module level (they are pure pandas / Python).
NO_PYSPARK_AT_IMPORT = ("statekit.stores", "statekit.changelog.format", "statekit.changelog.log",
                        "statekit.changelog.compaction", "statekit.changelog.ledger",
                        "statekit.state.checkpoint", "statekit.state.changes",
                        "statekit.query.spec", "statekit.validate", "statekit.atomic",
                        "statekit.kafka", "statekit.datasets", "statekit.restore.changelog",
                        "statekit.restore.standby", "statekit.restore.worker",
                        "statekit.restore.listener", "statekit.processor.layout",
                        "statekit.processor.fields", "statekit.processor.errors")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports(path: Path, top_level_only: bool = False) -> list[tuple[str, int]]:
    """(imported module, line) for every import statement (nested ones too, unless told)."""
    tree = ast.parse(path.read_text(), str(path))
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    found = []
    for node in nodes:
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.append((node.module, node.lineno))
            found += [(f"{node.module}.{alias.name}", node.lineno) for alias in node.names
                      if f"{node.module}.{alias.name}" in modules()]
        elif isinstance(node, ast.If) and top_level_only and not _is_type_checking(node):
            found += [(n, line) for n, line in _imports_in(node.body)]
    return found


def _is_type_checking(node: ast.If) -> bool:
    return isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def _imports_in(body: list[ast.stmt]) -> list[tuple[str, int]]:
    out = []
    for node in body:
        if isinstance(node, ast.Import):
            out += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.append((node.module, node.lineno))
    return out


def layer(module: str) -> int:
    if module in PACKAGE_INITS:
        return PACKAGE_INITS[module]
    best = max((prefix for prefix, _ in LAYERS
                if module == prefix or module.startswith(prefix + ".")), key=len, default=None)
    if best is None:
        raise AssertionError(f"module {module} has no layer: add it to LAYERS in this test")
    return dict(LAYERS)[best]


def test_every_module_has_a_layer():
    for name in modules():
        layer(name)


def test_no_module_imports_a_higher_layer():
    wrong = []
    for name, path in modules().items():
        if name == "statekit" or name.endswith("__init__"):
            continue
        for target, line in imports(path):
            if target.startswith("statekit") and target not in PACKAGE_INITS and \
                    layer(target) > layer(name):
                wrong.append(f"{name} (layer {layer(name)}) imports {target} "
                             f"(layer {layer(target)}) at line {line}")
    assert not wrong, "\n".join(wrong)


def test_package_inits_import_nothing_of_their_own_eagerly():
    """Subpackage ``__init__`` files map names to modules; nothing loads until it is used."""
    eager = []
    for name, path in modules().items():
        if path.name != "__init__.py" or name in ("statekit.charts", "statekit.stores"):
            continue
        for target, line in imports(path, top_level_only=True):
            if target.startswith("statekit") and target not in (
                    "statekit._lazy", "statekit.errors"):
                eager.append(f"{name} imports {target} at line {line}")
    assert not eager, "\n".join(eager)


@pytest.mark.parametrize("package", sorted(ONLY_IN))
def test_ui_libraries_stay_in_their_layers(package):
    allowed = ONLY_IN[package]
    wrong = [f"{name} imports {target} at line {line}"
             for name, path in modules().items()
             if not any(name == a or name.startswith(a + ".") for a in allowed)
             for target, line in imports(path)
             if target == package or target.startswith(package + ".")]
    assert not wrong, "\n".join(wrong)


def test_pure_modules_do_not_import_pyspark_at_import_time():
    wrong = [f"{name} imports {target} at line {line}"
             for name, path in modules().items()
             if any(name == p or name.startswith(p + ".") for p in NO_PYSPARK_AT_IMPORT)
             for target, line in imports(path, top_level_only=True)
             if target == "pyspark" or target.startswith("pyspark.")]
    assert not wrong, "\n".join(wrong)


def loaded_after(statement: str) -> set[str]:
    """Top-level packages in ``sys.modules`` after running ``statement`` in a new interpreter."""
    code = (f"{statement}\nimport sys\n"
            "print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True)
    return set(out.stdout.split())


def test_stores_and_the_compaction_model_load_without_pyspark():
    loaded = loaded_after("import statekit.stores, statekit.changelog.compaction, "
                          "statekit.changelog.log, statekit.state.checkpoint; "
                          "from statekit.changelog import compact, materialize")
    assert "pyspark" not in loaded
    assert not {"altair", "ipywidgets"} & loaded


def test_a_store_owner_worker_loads_no_charts_widgets_or_spark():
    loaded = loaded_after("import statekit.restore.worker, statekit.restore.standby, "
                          "statekit.restore.changelog; from statekit.restore import "
                          "StandbyReplica, restore_stores")
    assert not {"altair", "ipywidgets", "anywidget", "pyspark"} & loaded


def test_spark_python_workers_load_the_source_without_pandas_or_altair():
    loaded = loaded_after("import statekit.spark.source")
    assert not {"pandas", "altair", "ipywidgets"} & loaded


def test_subpackages_resolve_on_first_use():
    code = ("import statekit as sk; "
            "print(sk.state.Checkpoint, sk.kafka.KafkaConnection, sk.datasets.GAME_SPEC, "
            "sk.query.QuerySpec, sk.widgets.ChangelogScrubber, sk.changelog.Changelog, "
            "sk.restore.restore_stores, sk.stores.open_store, sk.charts.save_chart)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert "Checkpoint" in out.stdout and "QuerySpec" in out.stdout
