"""Handouts: run every workshop notebook and write it as one self-contained HTML file.

A handout reads with no network and no Jupyter: no ``<script src>`` or
``<link href>`` points outside the file. Charts are drawn as SVG (vl-convert,
from the Vega-Lite spec each offline ``alt.JupyterChart`` carries in its widget
state); other widgets show as a note with their values, since a static page
cannot run them. Solutions stay out unless ``solutions=True`` (then the
``%%solution`` cells run: ``STATEKIT_SOLUTIONS=1`` in the kernel's environment).

A handout shows what the notebook means to show, nothing else: a build fails
(``HandoutFailed``, naming notebook, cell and first line) when a cell's output
holds a traceback (Python's or a Java stack), an error, or text on stderr —
unless the cell is tagged ``stderr`` (it shows stderr on purpose). A few lines
known to be harmless start-up chatter of the JVM and of Spark's Python workers
(``KNOWN_NOISE``, from ``statekit.spark.console``, which also keeps them out of a
live notebook) are dropped from the page instead.

From a shell (``make html``)::

    python -m statekit.workshop.handouts                # every notebook → build/handouts/
    python -m statekit.workshop.handouts notebooks/03_changelog_and_compaction.ipynb

Example:
    >>> external_urls('<script src="https://cdn.example/vega.js"></script><p>ok</p>')
    ['https://cdn.example/vega.js']
    >>> external_urls('<a href="https://spark.apache.org">docs</a>')  # links to read are fine
    []
    >>> unintended_output("x = 1 / 0  # Traceback (most recent call last):", stderr=False)
    >>> unintended_output("Traceback (most recent call last):", stderr=False)
    'Traceback (most recent call last):'
    >>> unintended_output("WARNING: Using incubator modules: jdk.incubator.vector", stderr=True)
    >>> unintended_output("12:00:01 ERROR MicroBatchExecution: aborting", stderr=True)
    '12:00:01 ERROR MicroBatchExecution: aborting'
"""

from __future__ import annotations

import argparse
import html
import re
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from statekit.errors import BadArgument, HandoutFailed
from statekit.spark.console import KNOWN_NOISE, harmless  # noqa: F401 - the one list

#: Where ``make html`` writes (git-ignored: ``build/``).
OUT_DIR = Path("build/handouts")
#: The notebooks of the series, next to the package in a source checkout.
NOTEBOOKS_DIR = Path(__file__).resolve().parents[2] / "notebooks"
#: Seconds one cell may run before the build stops with the cell named.
CELL_TIMEOUT = 600

_WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
_WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
# Tags that load something: <script src=...>, <link href=...>, <img src=...>, <iframe src=...>.
_LOADING = re.compile(
    r"<(script|link|img|iframe|embed|source)\b[^>]*?\b(?:src|href)\s*=\s*[\"']?"
    r"((?:https?:)?//[^\"'\s>]+)", re.IGNORECASE)
_CSS_IMPORT = re.compile(r"@import\s+(?:url\()?[\"']?((?:https?:)?//[^\"')\s]+)", re.IGNORECASE)

# The lab template less what it loads from CDNs: require.js, MathJax, Mermaid and the widget
# manager (widgets are drawn statically instead, see widgets_to_html).
_TEMPLATE = """{%- extends 'lab/index.html.j2' -%}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{%- block jupyter_widgets -%}{%- endblock jupyter_widgets -%}
"""


#: Cells tagged so show stderr on purpose (e.g. a warning the notebook explains).
STDERR_TAG = "stderr"
# A Python traceback's first line, or a Java stack frame ("\tat org.apache.spark.…(File:1)").
_TRACEBACK = re.compile(r"^(Traceback \(most recent call last\):|\s+at [\w$.<>]+\(.*\)$)",
                        re.MULTILINE)


#: What a widget (a chart among them) whose state the run did not keep shows in a handout.
NOT_DRAWN = "(widget: run the notebook to see it)"


def unintended_output(text: str, stderr: bool) -> str | None:
    """The first line of ``text`` that a handout must not show unasked, or None.

    On stderr every line that is not ``KNOWN_NOISE``; elsewhere a traceback's first line
    (Python) or a Java stack frame.
    """
    if stderr:
        return next((line for line in text.splitlines() if not harmless(line)), None)
    found = _TRACEBACK.search(text)
    return found.group(0).strip() if found else None


def _output_text(output: dict) -> str:
    if output.get("output_type") == "stream":
        return "".join(output.get("text", ""))
    data = output.get("data", {})
    return "".join(data.get("text/plain", "")) + "".join(data.get("text/html", ""))


def output_problems(nb) -> list[str]:
    """What the executed ``nb`` shows that it did not mean to: one line per problem, naming
    the cell (its index) and the first offending line. Drops ``KNOWN_NOISE`` lines from
    stderr outputs (and outputs left empty) as it goes."""
    problems = []
    for index, cell in enumerate(nb.cells):
        if cell.get("cell_type") != "code":
            continue
        allowed = STDERR_TAG in cell.get("metadata", {}).get("tags", [])
        kept = []
        for output in cell.get("outputs", []):
            kind = output.get("output_type")
            stderr = kind == "stream" and output.get("name") == "stderr"
            if stderr and not allowed:
                lines = "".join(output.get("text", "")).splitlines(keepends=True)
                output["text"] = "".join(line for line in lines if not harmless(line.rstrip("\n")))
                if not output["text"]:
                    continue
            kept.append(output)
            if kind == "error":
                problems.append(f"cell {index}: {output.get('ename')}: {output.get('evalue')}")
                continue
            if allowed:
                continue
            line = unintended_output(_output_text(output), stderr)
            if line is not None:
                where = "stderr" if stderr else "a traceback"
                problems.append(f"cell {index}: {where}: {line[:200]}")
        cell["outputs"] = kept
    return problems


def external_urls(page: str) -> list[str]:
    """URLs that ``page`` would load from the network (scripts, styles, images, frames).

    Plain ``<a href>`` links are not loads: a handout may point to further reading.
    """
    return [m.group(2) for m in _LOADING.finditer(page)] + _CSS_IMPORT.findall(page)


def notebooks(folder: str | Path = NOTEBOOKS_DIR) -> list[Path]:
    """The series' notebooks in ``folder``, in order (``NN_name.ipynb``)."""
    found = sorted(p for p in Path(folder).glob("[0-9][0-9]_*.ipynb"))
    if not found:
        raise BadArgument("notebooks folder", str(folder), "a folder with NN_name.ipynb files")
    return found


def execute(path: str | Path, timeout: int = CELL_TIMEOUT, kernel_name: str = "python3",
            solutions: bool = False):
    """Run the notebook at ``path`` top to bottom in its folder; the executed notebook.

    Widget state is kept (``widgets_to_html`` draws it). A failing cell raises
    nbclient's ``CellExecutionError`` naming the cell and the error. ``solutions``: run the
    ``%%solution`` cells too (else they only show their button, as for a learner).
    """
    import os

    import nbformat
    from nbclient import NotebookClient

    from statekit.workshop.magic import ENV

    path = Path(path)
    if path.suffix != ".ipynb" or not path.is_file():
        raise BadArgument("notebook", str(path), "an existing .ipynb file")
    nb = nbformat.read(path, as_version=4)
    env = {**os.environ, ENV: "1" if solutions else "0"}
    NotebookClient(nb, timeout=timeout, kernel_name=kernel_name, store_widget_state=True,
                   resources={"metadata": {"path": str(path.parent.resolve())}}).execute(env=env)
    return nb


def _svg(spec: dict) -> str:
    import vl_convert as vlc

    schema = str(spec.get("$schema", ""))
    if "/vega/" in schema and "vega-lite" not in schema:
        return vlc.vega_to_svg(spec)
    return vlc.vegalite_to_svg(spec)


def _widget_html(model_id: str, state: dict, seen: frozenset = frozenset()) -> str:
    """One widget (and its children) as static HTML: charts as SVG, controls as a note."""
    model = state.get(model_id)
    if model is None or model_id in seen:
        return ""
    values = model.get("state", {})
    seen = seen | {model_id}
    spec = values.get("spec")
    if isinstance(spec, dict) and spec:
        return f"<div class='handout-chart'>{_svg(spec)}</div>"
    children = values.get("children")
    if isinstance(children, list):
        return "".join(_widget_html(str(c).removeprefix("IPY_MODEL_"), state, seen)
                       for c in children)
    name = model.get("model_name", "widget")
    if name == "HTMLModel":
        return f"<div>{values.get('value', '')}</div>"
    if name in ("LabelModel", "TextModel", "HTMLMathModel"):
        return f"<div>{html.escape(str(values.get('value', '')))}</div>"
    if name == "OutputModel":
        return "".join(_output_html(o) for o in values.get("outputs", []))
    label = html.escape(str(values.get("description") or name.removesuffix("Model")))
    shown = f": {html.escape(str(values['value']))}" if "value" in values else ""
    return (f"<div class='handout-widget' style='color:#57606a;font-style:italic'>"
            f"[{label}{shown} — interactive in JupyterLab]</div>")


def _output_html(output: dict) -> str:
    data = output.get("data", {})
    if "text/html" in data:
        return "".join(data["text/html"])
    if "image/svg+xml" in data:
        return "".join(data["image/svg+xml"])
    text = output.get("text") or data.get("text/plain", "")
    return f"<pre>{html.escape(''.join(text))}</pre>"


def widgets_to_html(nb) -> int:
    """Replace every widget view output of ``nb`` by static HTML; how many were replaced.

    Drops the widget state from the metadata (so no widget manager is loaded).
    """
    state = nb.metadata.pop("widgets", {}).get(_WIDGET_STATE, {}).get("state", {})
    replaced = 0
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            view = output.get("data", {}).get(_WIDGET_VIEW)
            if view is None:
                continue
            body = _widget_html(view.get("model_id", ""), state)
            output["data"] = {"text/html": body or f"<i>{NOT_DRAWN}</i>"}
            replaced += 1
    return replaced


def _reason(exc: Exception) -> str:
    """One line on why a notebook failed: the cell's exception, else the error itself."""
    if getattr(exc, "ename", None):  # nbclient's CellExecutionError
        return f"{exc.ename}: {exc.evalue}"
    return f"{type(exc).__name__}: {exc}"


def to_html(nb, solutions: bool = False) -> str:
    """The executed notebook ``nb`` as one self-contained HTML page."""
    from jinja2 import DictLoader
    from nbconvert import HTMLExporter
    from traitlets.config import Config

    widgets_to_html(nb)
    config = Config()
    if not solutions:
        config.TagRemovePreprocessor.remove_cell_tags = {"solution"}
        config.TagRemovePreprocessor.enabled = True
    exporter = HTMLExporter(config=config, template_name="lab", embed_images=True,
                            extra_loaders=[DictLoader({"handout.html.j2": _TEMPLATE})],
                            template_file="handout.html.j2")
    page, _ = exporter.from_notebook_node(nb)
    return page


def build(paths: Iterable[str | Path] | None = None, out_dir: str | Path = OUT_DIR,
          solutions: bool = False, timeout: int = CELL_TIMEOUT,
          log: Callable[[str], None] = print) -> list[Path]:
    """Run each notebook (all of the series by default) and write ``<stem>.html`` to ``out_dir``.

    Also writes ``index.html`` linking them. A notebook that raises is reported and
    skipped; one that shows a traceback or stderr it did not mean to (``output_problems``)
    is written and reported; ``HandoutFailed`` names them all at the end. ``BadArgument``
    if a page would still load something from the network.
    """
    from statekit.atomic import write_atomic

    chosen = [Path(p) for p in paths] if paths else notebooks()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written, failed = [], {}
    for path in chosen:
        started = time.monotonic()
        try:
            nb = execute(path, timeout=timeout, solutions=solutions)
        except BadArgument:
            raise
        except Exception as exc:  # noqa: BLE001 - a failing notebook must not stop the others
            failed[path.name] = _reason(exc)
            log(f"FAILED {path}: {failed[path.name]}")
            continue
        problems = output_problems(nb)
        page = to_html(nb, solutions=solutions)
        if NOT_DRAWN in page:
            problems.append(f"{page.count(NOT_DRAWN)} widget(s) or chart(s) not drawn inline")
        if problems:
            failed[path.name] = "shows what it did not mean to:\n    " + "\n    ".join(problems)
            log(f"FAILED {path}: {failed[path.name]}")
        loads = external_urls(page)
        if loads:
            raise BadArgument(f"handout of {path.name}", loads[0],
                              "no network loads (inline the script or draw the chart as SVG)")
        target = out / f"{path.stem}.html"
        write_atomic(target, page)
        written.append(target)
        log(f"{target}  ({len(page) / 1e6:.1f} MB, {time.monotonic() - started:.0f} s)")
    links = "".join(f"<li><a href='{p.name}'>{html.escape(p.stem)}</a></li>" for p in written)
    write_atomic(out / "index.html", "<!doctype html><meta charset='utf-8'><title>statekit "
               f"workshop</title><h1>statekit workshop handouts</h1><ul>{links}</ul>")
    if failed:
        raise HandoutFailed("notebooks that failed to run (their handouts are missing):\n"
                            + "\n".join(f"  {name}: {why}" for name, why in failed.items()))
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m statekit.workshop.handouts",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", help="notebooks to build (default: all)")
    parser.add_argument("--out", default=str(OUT_DIR), help="output folder (%(default)s)")
    parser.add_argument("--solutions", action="store_true", help="keep the solution cells")
    parser.add_argument("--timeout", type=int, default=CELL_TIMEOUT,
                        help="seconds per cell (%(default)s)")
    args = parser.parse_args(argv)
    try:
        written = build(args.notebooks or None, args.out, args.solutions, args.timeout)
    except HandoutFailed as failed:
        print(failed, file=sys.stderr)
        return 1
    print(f"{len(written)} handouts in {args.out}/ (open index.html)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
