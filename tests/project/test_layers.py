"""The import rules: data flows one way, each folder is one layer, and each layer loads only
what it needs.

Layers, lowest first (a module may import its own layer and lower ones, never higher;
``LAYER_NAMES`` below is the table the architecture page shows):

0. rules, files and processes: ``errors``, ``validate``, ``deprecation``, ``atomic``,
   ``durations``, ``_lazy``,
   ``processes``, ``ports``, ``cache``, ``java``, ``maven_jars``
1. descriptions: ``model`` (the query and store descriptions, the changelog record codec,
   the Kafka connection), ``options`` (every option class a user passes, and their
   machinery; they need the Kafka connection)
2. sources and engines: ``kafka``, ``spark``, ``datasets``
3. reading state: Spark's state of a statekit query (``spark_state``), any checkpoint
   (``inspect``), the same results in pandas (``reference``)
4. the changelog: ``changelog``
5. the query, the local stores, monitoring, a person's own processor: ``query``, ``stores``,
   ``monitor``, ``processor``
6. restore and standby replicas: ``restore``, ``standby``; Kafka Streams' own run of a query
   (the reference app), compared with statekit's, restores included: ``kafka_streams``
7. serving (interactive queries, routing): ``serve``; a person's own query attached: ``live``;
   crash drills and the processes they kill: ``drills``
8. charts (pure functions to Altair): ``charts``
9. widgets: ``widgets``
10. entry points: the package itself, ``demo``, ``doctor``, ``__main__``; the workshop's
    exercises: ``workshop``

Besides, a few modules must stay light at run time (checked in a fresh interpreter):
the stores and the pandas changelog model load without pyspark, a store-owner
worker without Altair or ipywidgets, Spark's Python workers (the Kafka source)
without pandas or Altair, a restore worker process without pandas, numpy or pyarrow.
"""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "statekit"

LAYERS = [
    ("statekit.errors", 0), ("statekit.validate", 0), ("statekit.atomic", 0),
    ("statekit.durations", 0), ("statekit._lazy", 0), ("statekit.processes", 0),
    ("statekit.deprecation", 0),
    ("statekit.ports", 0), ("statekit.cache", 0), ("statekit.java", 0),
    ("statekit.maven_jars", 0),
    ("statekit.model", 1), ("statekit.options", 1),
    ("statekit.kafka", 2), ("statekit.spark", 2), ("statekit.datasets", 2),
    ("statekit.spark_state", 3), ("statekit.inspect", 3), ("statekit.reference", 3),
    ("statekit.changelog", 4),
    ("statekit.query", 5), ("statekit.stores", 5), ("statekit.monitor", 5),
    ("statekit.processor", 5),
    ("statekit.restore", 6), ("statekit.standby", 6), ("statekit.kafka_streams", 6),
    ("statekit.serve", 7), ("statekit.live", 7), ("statekit.drills", 7),
    ("statekit.charts", 8),
    ("statekit.widgets", 9),
    ("statekit.demo", 10), ("statekit.doctor", 10), ("statekit.__main__", 10),
    ("statekit.workshop", 10),
]
#: A short title per layer (the architecture page's table is made from these and LAYERS).
LAYER_NAMES = {
    0: "rules, files and processes", 1: "descriptions", 2: "sources and engines",
    3: "reading state", 4: "the changelog",
    5: "the query, local stores, monitoring, your own processor, Kafka Streams",
    6: "restore and standby replicas", 7: "serving, attached queries, crash drills", 8: "charts",
    9: "widgets", 10: "entry points and the workshop",
}
#: Package ``__init__`` files only re-export their own modules (lazily, by name).
PACKAGE_INITS = {"statekit": 10}

#: Third-party packages only some layers may import (anywhere in the module, even lazily).
ONLY_IN = {
    "ipywidgets": ("statekit.widgets",),
    "anywidget": ("statekit.widgets",),
    "altair": ("statekit.charts", "statekit.widgets"),
    "fastapi": ("statekit.serve",),
    "uvicorn": ("statekit.serve",),
}
#: Modules that must not import pyspark at module level (they are pure pandas / Python).
NO_PYSPARK_AT_IMPORT = ("statekit.stores", "statekit.model", "statekit.changelog.log",
                        "statekit.changelog.arrow", "statekit.changelog.naming",
                        "statekit.changelog.compaction", "statekit.changelog.ledger",
                        "statekit.changelog.rounds", "statekit.changelog.fencing",
                        "statekit.changelog.topic_guard", "statekit.changelog.background",
                        "statekit.spark_state.checkpoint", "statekit.spark_state.changes",
                        "statekit.spark_state.statekit_files",
                        "statekit.spark_state.log_versions", "statekit.spark_state.store_log",
                        "statekit.model.query_spec", "statekit.validate", "statekit.atomic",
                        "statekit.kafka", "statekit.datasets", "statekit.restore.rebuild",
                        "statekit.options", "statekit.restore.partition",
                        "statekit.restore.readers", "statekit.restore.result",
                        "statekit.restore.compacted", "statekit.restore.partition_status",
                        "statekit.standby.replica", "statekit.drills.worker",
                        "statekit.restore.listener", "statekit.processor.layout",
                        "statekit.processor.fields", "statekit.errors")


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
        elif isinstance(node, ast.ImportFrom):
            module = _absolute(path, node)
            found.append((module, node.lineno))
            found += [(f"{module}.{alias.name}", node.lineno) for alias in node.names
                      if f"{module}.{alias.name}" in modules()]
        elif isinstance(node, ast.If) and top_level_only and not _is_type_checking(node):
            found += [(n, line) for n, line in _imports_in(node.body)]
    return found


def _absolute(path: Path, node: ast.ImportFrom) -> str:
    """The module a ``from ... import`` names, relative ones (``from . import x``) resolved."""
    if not node.level:
        return node.module
    package = module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    base = package[:len(package) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def _is_type_checking(node: ast.If) -> bool:
    return isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def _imports_in(body: list[ast.stmt]) -> list[tuple[str, int]]:
    out = []
    for node in body:
        if isinstance(node, ast.Import):
            out += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            out.append((node.module or "", node.lineno))
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


def test_every_layer_has_a_name():
    assert sorted(LAYER_NAMES) == sorted({number for _, number in LAYERS})


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


def test_no_package_cycle():
    """Packages (the folders under statekit/) import each other in one direction only."""
    edges: dict[str, set[str]] = {}
    for name, path in modules().items():
        source = _package(name)
        for target, _ in imports(path):
            if target.startswith("statekit.") and _package(target) != source:
                edges.setdefault(source, set()).add(_package(target))
    cycles = [f"{a} ⇄ {b}" for a, targets in edges.items() for b in targets
              if a < b and _reaches(edges, b, a)]
    assert not cycles, "package cycles: " + ", ".join(cycles)


def _package(module: str) -> str:
    return ".".join(module.split(".")[:2])


def _reaches(edges: dict[str, set[str]], start: str, goal: str) -> bool:
    seen, todo = set(), [start]
    while todo:
        node = todo.pop()
        if node == goal:
            return True
        if node not in seen:
            seen.add(node)
            todo += edges.get(node, ())
    return False


def test_lazy_exports_point_no_higher_than_their_package():
    """A package ``__init__``'s lazy name map is an import made later: it obeys the layers."""
    wrong = []
    for name, path in modules().items():
        if path.name != "__init__.py" or name in PACKAGE_INITS:
            continue
        for target in _lazy_targets(path):
            if layer(target) > layer(name):
                wrong.append(f"{name} (layer {layer(name)}) exports a name of {target} "
                             f"(layer {layer(target)})")
    assert not wrong, "\n".join(wrong)


def _lazy_targets(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    return {node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and node.value.startswith("statekit.") and " " not in node.value
            and node.value in modules()}


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
                          "statekit.changelog.log, statekit.spark_state.checkpoint; "
                          "from statekit.changelog import compact, materialize")
    assert "pyspark" not in loaded
    assert not {"altair", "ipywidgets"} & loaded


def test_a_store_owner_worker_loads_no_charts_widgets_or_spark():
    loaded = loaded_after("import statekit.drills.worker, statekit.standby.replica, "
                          "statekit.restore.rebuild; from statekit.restore import "
                          "restore_stores; from statekit.standby import StandbyReplica")
    assert not {"altair", "ipywidgets", "anywidget", "pyspark"} & loaded


def test_a_restore_worker_process_loads_no_pandas_numpy_or_pyarrow():
    """It writes raw bytes; importing pandas would double its start (``statekit._lazy``)."""
    loaded = loaded_after("import statekit.restore.worker, statekit.restore.readers, "
                          "statekit.restore.rebuild")
    assert not {"pandas", "numpy", "pyarrow", "pyspark", "altair"} & loaded


#: The Kafka source Spark's Python workers import (every module of it is checked)
KAFKA_SOURCE = "statekit.spark.kafka_source"


def test_spark_python_workers_load_the_source_without_pandas_or_altair():
    source = sorted(name for name in modules()
                    if name == KAFKA_SOURCE or name.startswith(KAFKA_SOURCE + "."))
    assert f"{KAFKA_SOURCE}.data_source" in source
    loaded = loaded_after(f"import {', '.join(source)}")
    assert not {"pandas", "altair", "ipywidgets"} & loaded


def test_subpackages_resolve_on_first_use():
    code = ("import statekit as sk; "
            "print(sk.spark_state.Checkpoint, sk.kafka.KafkaConnection, sk.datasets.GAME_SPEC, "
            "sk.model.QuerySpec, sk.query.start_query, sk.widgets.ChangelogScrubber, "
            "sk.changelog.Changelog, "
            "sk.restore.restore_stores, sk.stores.open_store, sk.charts.save_chart)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert "Checkpoint" in out.stdout and "QuerySpec" in out.stdout
