"""Pages generated at build time for statekit's docs (a Sphinx extension).

``docs/_generated/`` is emptied when the configuration is read and written anew at
``builder-inited`` (before autosummary writes its stubs there), so a renamed or removed module
leaves no stale page behind:

- ``openapi-<kind>.json`` and ``rest-api.md``: the REST service's OpenAPI schema, one per
  store kind, taken from the FastAPI app that ``statekit.serve.rest.app.create_app`` builds for a
  real serving instance (a real embedded broker and changelog topic; the instance is not
  started, so nothing is restored or served), rendered as a page of paths, methods,
  parameters and responses;
- ``layers.md``: the layer table, from ``LAYERS`` and ``LAYER_NAMES`` in
  ``tests/project/test_layers.py`` (the rules the tests enforce);
- ``public-api.md``: every name of ``statekit.__all__``, grouped (the "Options" group: every
  class of ``statekit.options``), linked to its reference;
- ``notebooks.md``: each notebook's title and first markdown cell (read with nbformat, never
  executed), linked to its rendered handout when ``make html`` has written
  ``build/handouts/<name>.html`` (copied into the site under ``handouts/``).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import re
import shutil
from collections.abc import Iterable
from pathlib import Path

from sphinx.util import logging

logger = logging.getLogger(__name__)
DOCS = Path(__file__).resolve().parents[1]
ROOT = DOCS.parent
GENERATED = DOCS / "_generated"
HANDOUTS = ROOT / "build" / "handouts"
#: What the site's handouts folder is staged from (``html_extra_path``).
EXTRA = GENERATED / "extra"

#: The store kinds the REST page documents, each with the query whose store it serves.
STORE_KINDS = ("window", "session", "key-value")


# --- helpers -----------------------------------------------------------------------------------
def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def cell(text: object) -> str:
    """``text`` made safe for one cell of a Markdown table."""
    return " ".join(str(text).split()).replace("|", "\\|")


def table(header: Iterable[str], rows: Iterable[Iterable[object]]) -> str:
    header = list(header)
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


# --- the layer table ---------------------------------------------------------------------------
def layer_rules():
    """``tests/project/test_layers.py`` as a module (its ``LAYERS`` and ``LAYER_NAMES``)."""
    path = ROOT / "tests" / "project" / "test_layers.py"
    spec = importlib.util.spec_from_file_location("statekit_docs_layer_rules", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def layers_page() -> str:
    rules = layer_rules()
    by_layer: dict[int, list[str]] = {}
    for prefix, number in rules.LAYERS:
        by_layer.setdefault(number, []).append(prefix)
    for module, number in rules.PACKAGE_INITS.items():
        by_layer.setdefault(number, []).append(f"{module}` (the package's `__init__`)")
    rows = [(number, rules.LAYER_NAMES[number], ", ".join(f"`{m}`" for m in modules))
            for number, modules in sorted(by_layer.items())]
    return table(["layer", "what", "modules (and everything under them)"], rows)


# --- the REST API ------------------------------------------------------------------------------
def openapi_schemas() -> dict[str, dict]:
    """The OpenAPI schema of a serving instance of each store kind (``STORE_KINDS``)."""
    from statekit.changelog import naming as naming
    from statekit.kafka.broker import EmbeddedBroker
    from statekit.kafka.topics import create_topic
    from statekit.model.query_spec import QuerySpec, session, tumbling
    from statekit.model.store_schema import StoreSchema
    from statekit.options.serve import GlobalTable
    from statekit.serve.instance import ServingInstance
    from statekit.serve.rest import create_app

    aggregates = ["count", "sum(score)", "max(score)"]
    specs = {"window": QuerySpec(keys=["player"], window=tumbling("10 minutes"),
                                 aggregates=aggregates),
             "session": QuerySpec(keys=["player"], window=session("3 minutes"),
                                  aggregates=aggregates),
             "key-value": QuerySpec(keys=["player"], window=None, aggregates=aggregates)}
    partitions, schemas = 4, {}
    with EmbeddedBroker() as broker:
        create_topic(broker.bootstrap_servers, "player-profiles", 1,
                     {"cleanup.policy": "compact"})
        players = GlobalTable("players", "player-profiles", ("player",), plain_keys=True)
        for kind in STORE_KINDS:
            spec, topic = specs[kind], f"{kind}-board-changelog"
            create_topic(broker.bootstrap_servers, topic, partitions,
                         naming.topic_config(spec.window is not None, 7 * 86_400_000))
            instance = ServingInstance(
                "i0", broker, topic, None, global_tables=[players],
                schema=StoreSchema(spec, {"player": "string"}, partitions))
            try:
                schemas[kind] = create_app(instance).openapi()
            finally:
                instance.close()
    return schemas


def type_of(schema: dict, components: dict) -> str:
    """A short description of a JSON schema (the whole of it is in the JSON file)."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"{name} (below)" if name in components else name
    if "anyOf" in schema or "oneOf" in schema:
        return " or ".join(dict.fromkeys(type_of(s, components)
                                         for s in schema.get("anyOf", schema.get("oneOf"))))
    kind = schema.get("type", "any")
    if kind == "object" and "properties" in schema:
        required = set(schema.get("required", ()))
        fields = ", ".join(f"{name}{'' if name in required else '?'}: "
                           f"{type_of(sub, components)}"
                           for name, sub in schema["properties"].items())
        return f"object {{{fields}}}"
    if kind == "array":
        return f"array of {type_of(schema.get('items', {}), components)}"
    facts = []
    if "enum" in schema:
        facts.append("one of " + ", ".join(str(v) for v in schema["enum"]))
    for name, word in (("minimum", "≥"), ("maximum", "≤"), ("exclusiveMinimum", ">"),
                       ("exclusiveMaximum", "<"), ("minLength", "length ≥"),
                       ("maxLength", "length ≤"), ("multipleOf", "a multiple of")):
        if name in schema:
            facts.append(f"{word} {schema[name]}")
    if "pattern" in schema:
        facts.append("in the grammar of its pattern")
    if "default" in schema:
        facts.append(f"default {json.dumps(schema['default'])}")
    return f"{kind} ({'; '.join(facts)})" if facts else str(kind)


def parameter_rows(operation: dict, components: dict) -> list[tuple]:
    rows = []
    for p in operation.get("parameters", []):
        schema = p.get("schema") or next(iter(p.get("content", {}).values()), {}).get("schema", {})
        if "content" in p:
            schema = {**schema, "type": schema.get("type", "object")}
        rows.append((f"`{p['name']}`", p["in"], "yes" if p.get("required") else "no",
                     type_of(schema, components), p.get("description", "")))
    return rows


def response_rows(operation: dict) -> list[tuple]:
    return [(status, answer.get("description", ""), ", ".join(answer.get("content", {})) or "—")
            for status, answer in operation.get("responses", {}).items()]


def rest_page(schemas: dict[str, dict]) -> str:
    """Every operation once, with the store kinds that serve it; then the schemas."""
    operations: dict[tuple[str, str], tuple[dict, list[str]]] = {}
    for kind, schema in schemas.items():
        for path, methods in schema["paths"].items():
            for method, operation in methods.items():
                key = (path, method)
                if key not in operations:
                    operations[key] = (operation, [])
                operations[key][1].append(kind)
    components: dict = {}
    for schema in schemas.values():
        components.update(schema.get("components", {}).get("schemas", {}))

    out = ["## Schemas as JSON\n",
           "The OpenAPI documents this page was made from, one per store kind (each "
           "instance serves its own at `/openapi.json`):\n"]
    out += [f"- {{download}}`{kind} store <_generated/openapi-{kind}.json>`" for kind in schemas]
    out.append("\n## Operations\n")
    for (path, method), (operation, kinds) in operations.items():
        title = operation.get("summary") or operation.get("operationId", path)
        out.append(f"### `{method.upper()} {path}`\n")
        out.append(f"**{title}.** {operation.get('description', '').strip()}".strip() + "\n")
        every = len(kinds) == len(schemas)
        out.append("Served by " + ("every store kind" if every else
                                   "the " + " and ".join(kinds) + " stores") + ".\n")
        rows = parameter_rows(operation, components)
        if rows:
            out.append(table(["parameter", "in", "required", "type", "what"], rows))
        body = operation.get("requestBody")
        if body:
            content = body.get("content", {})
            schema = next(iter(content.values()), {}).get("schema", {})
            out.append(f"Request body ({', '.join(content)}): {type_of(schema, components)}.\n")
        out.append(table(["status", "meaning", "content"], response_rows(operation)))
    out.append("## Response and body schemas\n")
    for name, schema in sorted(components.items()):
        out.append(f"### {name}\n")
        if schema.get("description"):
            out.append(schema["description"].strip() + "\n")
        required = set(schema.get("required", ()))
        rows = [(f"`{field}`", type_of(sub, components), "yes" if field in required else "no",
                 sub.get("description", ""))
                for field, sub in schema.get("properties", {}).items()]
        if rows:
            out.append(table(["field", "type", "required", "what"], rows))
    return "\n".join(out)


# --- the notebooks -----------------------------------------------------------------------------
def notebook_intro(path: Path) -> tuple[str, str]:
    """A notebook's title and the rest of its first markdown cell (headings made bold)."""
    import nbformat

    notebook = nbformat.read(path, as_version=4)
    first = next((c.source for c in notebook.cells if c.cell_type == "markdown"), "")
    lines = first.splitlines()
    title = path.stem
    if lines and lines[0].startswith("# "):
        title, lines = lines[0][2:].strip(), lines[1:]
    body = [re.sub(r"^#+\s+(.*)$", r"**\1**", line) for line in lines]
    return title, "\n".join(body).strip()


def notebooks_page(handouts: dict[str, Path]) -> str:
    out = []
    if handouts:
        out.append("Each notebook below links to its handout: the notebook executed by "
                   "`make html`, in one self-contained HTML file (charts inline, no network "
                   "needed).\n")
    else:
        out.append("```{note}\nThe rendered notebooks are not part of this build: run "
                   "`make html` (it executes every notebook into a self-contained HTML "
                   "handout under `build/handouts/`), then `make docs` again to include "
                   "them here.\n```\n")
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        title, intro = notebook_intro(path)
        out.append(f"## {title}\n")
        link = (f'<a href="handouts/{path.stem}.html">the handout ({path.stem}.html)</a>'
                if path.stem in handouts else "")
        out.append(f"`notebooks/{path.name}`" + (f" — {link}" if link else "") + "\n")
        out.append(intro + "\n")
    return "\n".join(out)


def stage_handouts() -> dict[str, Path]:
    """Copy ``build/handouts/*.html`` to where ``html_extra_path`` takes them from."""
    found = sorted(HANDOUTS.glob("*.html")) if HANDOUTS.is_dir() else []
    staged = {}
    for source in found:
        target = EXTRA / "handouts" / source.name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
        staged[source.stem] = target
    return staged


# --- the public API -------------------------------------------------------------------------
#: The groups of the public API's table, in order, each with what picks its names.
PUBLIC_GROUPS = ("Functions", "Handles", "Describing a query", "Options", "Kafka and standbys",
                 "Results and readers", "Errors", "Subpackages")


def public_group(name: str, obj: object) -> str:
    """The group of ``statekit.<name>`` in the public API's table."""
    import inspect

    from statekit.errors import StatekitError

    if inspect.ismodule(obj):
        return "Subpackages"
    if inspect.isclass(obj) and issubclass(obj, BaseException):
        return "Errors" if issubclass(obj, StatekitError) else "Results and readers"
    if getattr(obj, "__module__", "").startswith("statekit.options."):
        return "Options"   # every option class, and the parts they carry, from one package
    if name.endswith("Query") or name == "QueryHandle":
        return "Handles"
    if name in ("QuerySpec", "Aggregate", "WindowSpec", "tumbling", "hopping", "session"):
        return "Describing a query"
    if inspect.isfunction(obj):
        return "Functions"
    if name in ("EmbeddedBroker", "StandbyReplica", "KafkaConnection", "TopicRef"):
        return "Kafka and standbys"
    return "Results and readers"


def public_api_page() -> str:
    """Every name of ``statekit.__all__``, grouped, each linked to where the reference
    documents it and with the first line of its docstring: the public API at a glance."""
    import inspect

    import statekit

    groups: dict[str, list[tuple[str, str]]] = {g: [] for g in PUBLIC_GROUPS}
    for name in statekit.__all__:
        obj = getattr(statekit, name)
        if inspect.ismodule(obj):
            link, home = f"{{py:mod}}`statekit.{name}`", obj.__name__
        else:
            home = f"{obj.__module__}.{obj.__qualname__}"
            role = "py:class" if inspect.isclass(obj) else "py:func"
            link = f"{{{role}}}`{name} <{home}>`"
        doc = (inspect.getdoc(obj) or "").strip().split("\n\n")[0].replace("\n", " ")
        groups[public_group(name, obj)].append((link, doc))
    out = []
    for group, rows in groups.items():
        if rows:
            out.append(f"### {group}\n\n" + table(["`statekit.`", "what it is"], rows))
    return "\n".join(out)


# --- Sphinx ------------------------------------------------------------------------------------
def generate(app) -> None:
    """Write every generated page and file (``add_handouts`` emptied the folder first)."""
    write(GENERATED / "layers.md", layers_page())
    schemas = openapi_schemas()
    for kind, schema in schemas.items():
        write(GENERATED / f"openapi-{kind}.json", json.dumps(schema, indent=2) + "\n")
    write(GENERATED / "rest-api.md", rest_page(schemas))
    handouts = {path.stem: path for path in (EXTRA / "handouts").glob("*.html")}
    write(GENERATED / "notebooks.md", notebooks_page(handouts))
    write(GENERATED / "public-api.md", public_api_page())


def add_handouts(app, config) -> None:
    """Stage the handouts (when ``make html`` wrote any): the site's folder ``handouts/``."""
    shutil.rmtree(GENERATED, ignore_errors=True)
    GENERATED.mkdir()
    if stage_handouts():
        config.html_extra_path = [*config.html_extra_path, str(EXTRA)]


def unresolved_statekit_name(app, env, node, contnode) -> None:
    """A written page names a statekit module or object the API reference does not have: a
    warning (an error under ``-W``), so a renamed or removed module cannot leave a stale name.
    (The reference's own pages may name private bases and type variables it leaves out.)"""
    target, page = node.get("reftarget", ""), node.get("refdoc", "")
    if node.get("refdomain") == "py" and target.split(".")[0] == "statekit" and \
            not page.startswith("_generated/"):
        logger.warning("%s names %s, which is not in the API reference (renamed or removed?)",
                       node.get("refdoc", "?"), target, location=node)


#: the character ``keep_colons`` puts first: nothing to see, and no colon for napoleon to read
ZERO_WIDTH = "\u200b"


def keep_colons(app, what, name, obj, options, lines: list[str]) -> None:
    """An attribute's or property's docstring whose first line holds a colon ("The checkpoint
    folder: Spark's logs ...") is read by napoleon as "type: description", which shows the
    words before the colon as a bogus "Type:" field; a first line without a colon (an
    invisible one put before it) keeps the sentence whole. Runs before napoleon."""
    if what not in ("attribute", "data", "property"):
        return
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is not None and ":" in lines[first]:
        lines.insert(first, ZERO_WIDTH)


def setup(app):
    app.connect("missing-reference", unresolved_statekit_name)
    # napoleon turns docstrings into fields at priority 500: this runs before it
    app.connect("autodoc-process-docstring", keep_colons, priority=400)
    app.connect("config-inited", add_handouts)
    # before autosummary (priority 500) writes its stubs into _generated/api
    app.connect("builder-inited", generate, priority=100)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
