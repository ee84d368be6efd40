"""Handouts: a notebook executed and written as HTML that reads with no network."""

from __future__ import annotations

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from statekit.errors import BadArgument
from statekit.workshop import handouts

BARS = {"$schema": "https://vega.github.io/schema/vega-lite/v5.json",
        "data": {"values": [{"x": "a", "y": 3}, {"x": "b", "y": 1}]},
        "mark": "bar", "encoding": {"x": {"field": "x", "type": "nominal"},
                                    "y": {"field": "y", "type": "quantitative"}}}


def test_external_urls_finds_loads_not_links():
    page = ("<script src='https://cdn.jsdelivr.net/npm/vega@5'></script>"
            "<link rel=stylesheet href=\"//fonts.example/a.css\">"
            "<style>@import url('https://x.example/b.css');</style>"
            "<script>var inline = 1;</script><a href='https://kafka.apache.org'>read</a>"
            "<img src='data:image/png;base64,AAAA'>")
    assert handouts.external_urls(page) == ["https://cdn.jsdelivr.net/npm/vega@5",
                                            "//fonts.example/a.css", "https://x.example/b.css"]


def _widget_notebook():
    state = {
        "box": {"model_name": "VBoxModel", "state": {"children": ["IPY_MODEL_slider",
                                                                  "IPY_MODEL_chart"]}},
        "slider": {"model_name": "IntSliderModel", "state": {"description": "batch",
                                                             "value": 3}},
        "chart": {"model_name": "AnyModel", "state": {"spec": BARS}},
    }
    view = new_output("display_data", data={
        "application/vnd.jupyter.widget-view+json": {"model_id": "box", "version_major": 2,
                                                     "version_minor": 0},
        "text/plain": "VBox(...)"})
    nb = new_notebook(cells=[new_code_cell("w", outputs=[view])])
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": state}}
    return nb


def test_widgets_become_static_charts_and_notes():
    nb = _widget_notebook()
    assert handouts.widgets_to_html(nb) == 1
    body = nb.cells[0].outputs[0]["data"]["text/html"]
    assert "[batch: 3 — interactive in JupyterLab]" in body
    assert "<svg" in body and "mark-rect" in body  # the bars, drawn by vl-convert
    assert "widgets" not in nb.metadata


def test_solutions_stay_out_unless_asked():
    nb = new_notebook(cells=[new_markdown_cell("# 99 · A test"),
                             new_code_cell("answer = 'b'  # the secret", metadata={
                                 "tags": ["solution"], "jupyter": {"source_hidden": True}})])
    assert "the secret" not in handouts.to_html(nb)
    assert "the secret" in handouts.to_html(nb, solutions=True)
    assert handouts.external_urls(handouts.to_html(nb)) == []


def test_bad_paths_are_named(tmp_path):
    with pytest.raises(BadArgument, match="missing.ipynb"):
        handouts.execute(tmp_path / "missing.ipynb")
    with pytest.raises(BadArgument, match="NN_name.ipynb"):
        handouts.notebooks(tmp_path)


def test_the_series_is_found_in_order():
    stems = [p.stem for p in handouts.notebooks()]
    assert stems == sorted(stems) and "03_changelog_and_compaction" in stems


@pytest.mark.slow
@pytest.mark.timeout(480)
def test_a_notebook_becomes_a_self_contained_page_with_its_chart(tmp_path):
    source = tmp_path / "01_tiny.ipynb"
    nb = new_notebook(cells=[
        new_markdown_cell("# 1 · Tiny"),
        new_code_cell("import pandas as pd\nimport statekit as sk\n"
                      "sk.charts.offline()  # charts render without a network"),
        new_code_cell("import altair as alt\n"
                      "alt.Chart(pd.DataFrame({'player': ['ann', 'bob'], 'score': [7, 4]}))"
                      ".mark_bar().encode(x='player:N', y='score:Q')"),
    ])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nbformat.write(nb, source)

    [page_path] = handouts.build([source], tmp_path / "out", log=lambda _: None)

    page = page_path.read_text()
    assert page_path.name == "01_tiny.html"
    assert (tmp_path / "out" / "index.html").read_text().count("01_tiny.html") == 1
    assert handouts.external_urls(page) == []
    assert "<script src=" not in page.replace(" ", "")
    assert "vega" not in " ".join(handouts.external_urls(page))
    assert "handout-chart" in page and "mark-rect" in page  # the bar chart, as SVG
    assert ">ann<" in page and ">bob<" in page  # its axis labels


@pytest.mark.timeout(300)
def test_a_failing_notebook_is_named_and_the_others_are_written(tmp_path):
    for stem, code in {"01_fine": "print('state', 41)", "02_broken": "1 / 0"}.items():
        nb = new_notebook(cells=[new_markdown_cell(f"# {stem}"), new_code_cell(code)])
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                     "language": "python"}
        nbformat.write(nb, tmp_path / f"{stem}.ipynb")
    said = []

    with pytest.raises(handouts.HandoutFailed, match=r"02_broken.ipynb: ZeroDivisionError"):
        handouts.build(handouts.notebooks(tmp_path), tmp_path / "out", log=said.append)

    assert "state 41" in (tmp_path / "out" / "01_fine.html").read_text()
    assert not (tmp_path / "out" / "02_broken.html").exists()
    assert any(line.startswith("FAILED") and "02_broken" in line for line in said)


# ------------------------------------------------------- what a handout must not show unasked
def _executed(outputs, tags=()):
    cell = new_code_cell("x", outputs=outputs)
    if tags:
        cell.metadata["tags"] = list(tags)
    return new_notebook(cells=[new_markdown_cell("# t"), cell])


def _stderr(text):
    return new_output("stream", name="stderr", text=text)


def test_stderr_and_tracebacks_are_problems_named_by_cell():
    said = handouts.output_problems(_executed([_stderr("12:01:03 ERROR WriteToDataSourceV2Exec: "
                                                       "aborting\n")]))
    assert said == ["cell 1: stderr: 12:01:03 ERROR WriteToDataSourceV2Exec: aborting"]
    printed = new_output("stream", name="stdout", text="Traceback (most recent call last):\n"
                                                      '  File "x", line 1\nZeroDivisionError\n')
    assert handouts.output_problems(_executed([printed])) == [
        "cell 1: a traceback: Traceback (most recent call last):"]
    java = new_output("execute_result", data={"text/plain": "Py4JJavaError: boom\n\tat org."
                                                            "apache.spark.sql.Dataset.show("
                                                            "Dataset.scala:1)\n"})
    assert "a traceback: at org.apache.spark.sql.Dataset.show" in handouts.output_problems(
        _executed([java]))[0]
    error = new_output("error", ename="ValueError", evalue="bad", traceback=[])
    assert handouts.output_problems(_executed([error])) == ["cell 1: ValueError: bad"]


def test_harmless_output_passes_and_known_noise_is_dropped():
    fine = new_output("stream", name="stdout", text="ChangelogError · the store was restored "
                                                    "from another topic\n")
    noise = _stderr('WARNING: Using incubator modules: jdk.incubator.vector\nSetting default '
                    'log level to "WARN".\nStarting Streaming TransformWithStateInPandas Python '
                    "worker.\n\n")
    nb = _executed([fine, noise])
    assert handouts.output_problems(nb) == []
    assert nb.cells[1].outputs == [fine]  # the noise is gone from the page
    meant = _executed([_stderr("UserWarning: shown on purpose\n")], tags=["stderr"])
    assert handouts.output_problems(meant) == []
    assert meant.cells[1].outputs[0]["text"] == "UserWarning: shown on purpose\n"


@pytest.mark.timeout(300)
def test_a_notebook_with_stray_stderr_fails_its_build_and_solutions_run_only_when_asked(
        tmp_path):
    cells = {
        "01_stray": [new_code_cell("import sys\nprint('12:00 ERROR Executor: lost', "
                                   "file=sys.stderr)")],
        "02_quiz": [new_code_cell("from statekit import workshop\nprint('learner cell')"),
                    new_code_cell("%%solution 00.1\nprint('SOLVED ' + 'b')\n"
                                  "workshop.check('00.1', 'b').require()",
                                  metadata={"tags": ["solution"],
                                            "jupyter": {"source_hidden": True}})],
    }
    for stem, body in cells.items():
        nb = new_notebook(cells=[new_markdown_cell(f"# {stem}"), *body])
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                     "language": "python"}
        nbformat.write(nb, tmp_path / f"{stem}.ipynb")
    said = []

    with pytest.raises(handouts.HandoutFailed, match=r"01_stray.ipynb: shows what it did not "
                                                     r"mean to:\n    cell 1: stderr: 12:00 "
                                                     r"ERROR Executor: lost"):
        handouts.build(handouts.notebooks(tmp_path), tmp_path / "out", log=said.append)

    assert "12:00 ERROR" in (tmp_path / "out" / "01_stray.html").read_text()  # written, named
    learner = (tmp_path / "out" / "02_quiz.html").read_text()
    assert "learner cell" in learner and "SOLVED" not in learner and "%%solution" not in learner
    executed = handouts.execute(tmp_path / "02_quiz.ipynb")   # a learner's Run All
    shown = str(executed.cells[2].outputs)
    assert "SOLVED" not in shown and "HiddenSolution" in shown
    [page] = handouts.build([tmp_path / "02_quiz.ipynb"], tmp_path / "teacher", solutions=True,
                            log=said.append)
    assert "SOLVED b" in page.read_text()


def test_a_widget_without_its_state_is_named_not_drawn():
    nb = _widget_notebook()
    nb.metadata.pop("widgets")   # a run that kept no widget state: nothing to draw
    assert handouts.NOT_DRAWN in handouts.to_html(nb)
