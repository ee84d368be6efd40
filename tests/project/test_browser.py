"""A real browser: JupyterLab runs the workshop notebooks that have widgets, in Chromium.

JupyterLab starts on 127.0.0.1 (a free port, a token, the project's kernel: the
Python running this test) on copies of the notebooks (JupyterLab saves what it
runs; the notebooks in git keep no outputs). Debian's Chromium
(``.ci/ensure-chromium`` installs it; ``STATEKIT_CHROMIUM`` points elsewhere) is
driven by Playwright for Python with ``executable_path``: no browser download.
For each notebook whose widget outlives its Run All — 03's changelog scrubber, 05's
drill panel, 06's live leaderboard, 08's dashboard (12 closes its dashboard when it
detaches, so nbmake runs it alone) — run all cells as a learner does
(solutions hidden: ``STATEKIT_SOLUTIONS=0``), then check that no cell errored, the
charts drew (SVG or canvas inside vega-embed) and every widget view rendered; then
*use* the widget after Run All — slide, press — and check that its view changes
(the widgets must outlive Run All), and reveal one hidden solution with its button.
Screenshots go to build/screenshots/ (git-ignored). JupyterLab and its kernels are
stopped at the end and the test checks that nothing it started is still running.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from helpers.chromium import chromium

from statekit.ports import free_port
from statekit.processes import descendants, is_alive, spawn, stop
from statekit.workshop.magic import ENV as SOLUTIONS_ENV

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ["03_changelog_and_compaction", "05_standby_and_failover", "06_interactive_queries",
             "08_monitoring_growth_and_ttl"]
SCREENSHOTS = ROOT / "build" / "screenshots"
#: Seconds one notebook may take to run all its cells in the browser (headless it takes ~1-3 min;
#: on this shared machine at load average 60 one took 9 minutes).
RUN_ALL_TIMEOUT = 900
#: Seconds a widget may take to show the effect of a press (05's drill runs a store owner,
#: kills it and restores a replacement).
WIDGET_TIMEOUT = 300

# Per test: starting JupyterLab and the page (module fixtures, first test), one run-all, and
# the widget's use.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(RUN_ALL_TIMEOUT + WIDGET_TIMEOUT + 600)]


def _get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status
    except OSError:
        return 0



@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab on 127.0.0.1 over copies of the notebooks: (base url, token)."""
    home = tmp_path_factory.mktemp("lab")
    work = home / "notebooks"
    work.mkdir()
    for stem in NOTEBOOKS:
        shutil.copy(ROOT / "notebooks" / f"{stem}.ipynb", work)
    settings = home / "settings"
    # Every cell stays in the page (JupyterLab 4 virtualises cells out of view by default);
    # no news pop-up.
    for plugin, values in {"notebook-extension/tracker": {"windowingMode": "none"},
                           "apputils-extension/notification": {"fetchNews": "false"}}.items():
        target = settings / "@jupyterlab" / f"{plugin}.jupyterlab-settings"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(values))
    port, token = free_port("127.0.0.1"), secrets.token_hex(16)
    env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(home / "runtime"),
               JUPYTERLAB_SETTINGS_DIR=str(settings),
               JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"),
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    env[SOLUTIONS_ENV] = "0"   # a learner's Run All: solutions stay hidden behind their button
    # The project's kernel: jupyter_client runs a kernelspec whose argv starts with "python"
    # with the server's own interpreter, which is this test's (the .venv's) Python.
    from jupyter_client.kernelspec import KernelSpecManager
    assert KernelSpecManager().get_kernel_spec("python3").argv[0] in ("python", sys.executable)
    log = (home / "jupyterlab.log").open("w")
    server = spawn([sys.executable, "-m", "jupyter", "lab", "--no-browser",
                    "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
                    "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
                    f"--ServerApp.root_dir={work}", "--LabApp.expose_app_in_browser=True",
                    "--ServerApp.allow_root=True"],
                   cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while _get(f"{base}/api/status?token={token}") != 200:
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail("JupyterLab did not start:\n"
                            + (home / "jupyterlab.log").read_text()[-3000:])
            time.sleep(0.5)
        yield base, token
    finally:
        # Shut the kernels down through the server, then the server itself; then nothing
        # that it started (kernels, their Spark JVMs and brokers) may still run.
        started = set(descendants(server.pid))
        for kernel in _kernels(base, token):
            _request(f"{base}/api/kernels/{kernel}?token={token}", "DELETE")
        stop(server, timeout=30)
        log.close()
        deadline = time.monotonic() + 60
        while any(is_alive(p) for p in started) and time.monotonic() < deadline:
            time.sleep(0.5)
        left = sorted(p for p in started if is_alive(p))
        for pid in left:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        assert not left, f"still running after JupyterLab stopped (now killed): {left}"


def _request(url: str, method: str) -> None:
    with contextlib.suppress(OSError):
        urllib.request.urlopen(urllib.request.Request(url, method=method), timeout=30).close()


def _kernels(base: str, token: str) -> list[str]:
    try:
        with urllib.request.urlopen(f"{base}/api/kernels?token={token}", timeout=10) as r:
            return [k["id"] for k in json.load(r)]
    except OSError:
        return []


@pytest.fixture(scope="module")
def browser():
    path = chromium()
    if path is None:
        pytest.skip("Chromium is not installed and .ci/ensure-chromium could not install it "
                    "(needs root and apt-get): `apt-get install chromium` or set "
                    "STATEKIT_CHROMIUM")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=path, headless=True,
                                              args=["--no-sandbox", "--disable-dev-shm-usage"])
        yield launched
        launched.close()


#: The open notebook's code cells (execution count, outputs) and its kernel's status, read
#: from JupyterLab's own models (``expose_app_in_browser``).
_STATE = """() => {
  const panel = window.jupyterapp.shell.currentWidget;
  if (!panel || !panel.content || !panel.content.model) return null;
  const cells = panel.content.model.cells, code = [];
  for (let i = 0; i < cells.length; i++) {
    const cell = cells.get(i);
    if (cell.type !== 'code') continue;
    const errors = cell.outputs.toJSON().filter(o => o.output_type === 'error')
      .map(o => o.ename + ': ' + o.evalue);
    code.push({index: i, count: cell.executionCount, errors: errors});
  }
  const kernel = panel.sessionContext.session && panel.sessionContext.session.kernel;
  return {cells: code, status: kernel ? kernel.status : 'none'};
}"""

#: Widget views in outputs (ipywidgets and anywidget, e.g. an offline JupyterChart): the widget
#: manager renders each into an output panel with no data-mime-type (every mime renderer sets
#: one). How many there are, and which are empty or show an error instead of the widget.
_WIDGETS = """() => {
  const panel = window.jupyterapp.shell.currentWidget.node;
  const views = [...panel.querySelectorAll('.jp-OutputArea-output:not([data-mime-type])')];
  const broken = views.filter(v => !v.querySelector('.lm-Widget') || v.offsetHeight === 0
    || /Error displaying widget|Loading widget/.test(v.innerText));
  return {views: views.length, broken: broken.map(v => v.innerText.slice(0, 200))};
}"""


#: Run every cell once the notebook panel is ready (its document loaded, revealed, kernel
#: session ready): a command issued before that is silently dropped by JupyterLab.
_RUN_ALL = """async () => {
  const panel = window.jupyterapp.shell.currentWidget;
  await panel.context.ready;
  await panel.revealed;
  await panel.sessionContext.ready;
  window.jupyterapp.shell.activateById(panel.id);
  await window.jupyterapp.commands.execute('notebook:run-all-cells');
}"""


def _start_run_all(page, attempts: int = 3, wait: float = 30.0) -> dict:
    """Ask JupyterLab to run all cells until the kernel takes the first one (busy, or a
    cell has an execution count); a run-all that JupyterLab dropped is asked again."""
    for _ in range(attempts):
        page.evaluate(_RUN_ALL)
        started = time.monotonic()
        while time.monotonic() - started < wait:
            state = page.evaluate(_STATE)
            if state and (state["status"] == "busy"
                          or any(c["count"] is not None for c in state["cells"])):
                return state
            time.sleep(1)
    pytest.fail(f"JupyterLab never started running the cells ({attempts} run-all commands): "
                f"{page.evaluate(_STATE)}")


def _run_all(page, base: str, token: str, stem: str) -> dict:
    # A workspace of its own, reset: only this notebook opens (the default workspace would
    # also restore the tabs of notebooks tested before, their widgets dead with their kernels).
    page.goto(f"{base}/lab/workspaces/test-{stem}/tree/{stem}.ipynb?reset&token={token}",
              timeout=120_000)
    page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell.currentWidget "
                           "&& window.jupyterapp.shell.currentWidget.sessionContext "
                           "&& window.jupyterapp.shell.currentWidget.sessionContext.session "
                           "&& window.jupyterapp.shell.currentWidget.sessionContext.session"
                           ".kernel && window.jupyterapp.shell.currentWidget.sessionContext"
                           ".session.kernel.status === 'idle'", timeout=180_000, polling=500)
    deadline = time.monotonic() + RUN_ALL_TIMEOUT
    state = _start_run_all(page)
    while time.monotonic() < deadline:
        time.sleep(2)
        state = page.evaluate(_STATE)
        done = all(c["count"] is not None for c in state["cells"])
        failed = any(c["errors"] for c in state["cells"])
        if state["status"] == "idle" and (done or failed):
            return state
    pytest.fail(f"{stem}: cells still running after {RUN_ALL_TIMEOUT} s: {state}")


def _view_of(control):
    """The output area holding a widget control: the widget's whole view."""
    return control.locator("xpath=ancestor::div[contains(@class, 'jp-OutputArea-output')][1]")


def _wait_for_change(view, before: str, timeout: float, until: str | None = None) -> str:
    """The view's text once it differs from ``before`` (and, if given, contains ``until``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        now = view.inner_text()
        if now != before and (until is None or until in now):
            return now
        time.sleep(0.5)
    pytest.fail(f"the widget's view did not change in {timeout:.0f} s"
                + (f" to show {until!r}" if until else "") + f"; it shows: {before[:400]!r}")


def _press(panel, name: str, timeout: float = 60, until: str | None = None) -> str:
    """Press the (first) button called ``name``; the widget's view text after it changed."""
    button = panel.get_by_role("button", name=name).first
    button.scroll_into_view_if_needed(timeout=30_000)
    view = _view_of(button)
    before = view.inner_text()
    time.sleep(1.1)   # status lines carry the time to the second: a refresh must show anew
    button.click()
    return _wait_for_change(view, before, timeout, until)


def _reveal_every_solution(panel, stem: str) -> None:
    """Press each "Show and run the solution" button, after Run All, as a learner would: each
    solution shows its code and its verdict, and the verdict is right (a solution that reads a
    name a later cell rebound raises, or judges its own answer wrong)."""
    buttons = panel.get_by_role("button", name="Show and run the solution")
    for i in range(buttons.count()):
        button = buttons.nth(i)
        button.scroll_into_view_if_needed(timeout=30_000)
        view = _view_of(button)
        before = view.inner_text()
        button.click()
        shown = _wait_for_change(view, before, 180, until=": ")
        deadline = time.monotonic() + 180
        while not re.search(r"\b\d\d\.\d+ [^\n]*: (right|wrong|not answered)", shown) \
                and "Error" not in shown and time.monotonic() < deadline:
            time.sleep(0.5)
            shown = view.inner_text()
        assert "workshop.check(" in shown, f"{stem}: solution {i + 1} shows no code: {shown!r}"
        assert re.search(r"\b\d\d\.\d+ [^\n]*: right\b", shown), (
            f"{stem}: solution {i + 1}, revealed after Run All, is not judged right: "
            f"{shown[-600:]!r}")


def _batch_shown(text: str) -> str:
    return re.search(r"After batch (\d+):", text).group(1)


def _slide_the_scrubber(panel) -> None:
    handle = panel.get_by_role("slider").first
    handle.scroll_into_view_if_needed(timeout=30_000)
    view = _view_of(handle)
    before = _batch_shown(view.inner_text())
    chart = view.locator(".vega-embed").first
    drawn = chart.screenshot(timeout=30_000)
    deadline = time.monotonic() + 60
    while _batch_shown(view.inner_text()) == before:   # one batch back: summary and chart follow
        assert time.monotonic() < deadline, f"the slider did not move off batch {before}"
        handle.focus()
        handle.press("ArrowLeft")
        time.sleep(3)
    while chart.screenshot(timeout=30_000) == drawn:   # the chart is drawn anew
        assert time.monotonic() < deadline + 60, "the scrubber's chart did not change"
        time.sleep(1)


def _run_a_drill(panel) -> None:
    for scenario in ("no standby", "stale standby"):   # one scenario keeps it short
        panel.get_by_role("checkbox", name=scenario).first.uncheck()
    after = _press(panel, "Run failover drill", WIDGET_TIMEOUT, until="done:")
    assert "all correct: True" in after, after[:400]


#: What a learner does with each notebook's widget after Run All, and what must change.
USE = {
    "03_changelog_and_compaction": _slide_the_scrubber,
    "05_standby_and_failover": _run_a_drill,
    "06_interactive_queries": lambda panel: _press(panel, "Refresh", until="answered by"),
    "08_monitoring_growth_and_ttl": lambda panel: _press(panel, "Refresh now", 180,
                                                         until="top 10 as of batch"),
}


@pytest.mark.parametrize("stem", NOTEBOOKS)
def test_a_notebook_runs_in_jupyterlab_and_draws_its_charts_and_widgets(lab, browser, stem):
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    base, token = lab
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        state = _run_all(page, base, token, stem)
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / f"{stem}.png"))
        errors = {c["index"]: c["errors"] for c in state["cells"] if c["errors"]}
        not_run = [c["index"] for c in state["cells"] if c["count"] is None]
        assert not errors, f"{stem}: cells raised: {errors}"
        assert not not_run, f"{stem}: cells that never ran: {not_run}"

        # Charts: vega-embed drew each one (SVG or canvas); offline, so no CDN was needed.
        panel = page.locator("#" + page.evaluate("() => window.jupyterapp.shell.currentWidget.id"))
        panel.locator(".vega-embed svg, .vega-embed canvas").first.wait_for(state="attached",
                                                                           timeout=120_000)
        charts = panel.locator(".vega-embed").all()
        for n, chart in enumerate(charts):
            if not chart.is_visible():  # e.g. a widget's chart replaced by its next refresh
                continue
            with contextlib.suppress(PlaywrightTimeout):  # screenshots are artifacts only
                chart.scroll_into_view_if_needed(timeout=10_000)
                chart.screenshot(path=str(SCREENSHOTS / f"{stem}-chart-{n + 1}.png"),
                                 timeout=10_000)
        drawn = panel.locator(".vega-embed svg.marks, .vega-embed canvas.marks").count()
        assert charts and drawn == len(charts), f"{stem}: {drawn} of {len(charts)} charts drawn"

        # Widget views (ipywidgets and anywidget, the charts' JupyterChart included) rendered.
        widgets = page.evaluate(_WIDGETS)
        assert widgets["views"] >= 1, f"{stem}: no widget view rendered"
        assert not widgets["broken"], f"{stem}: widget views not rendered: {widgets['broken']}"

        # Solutions stayed hidden in Run All; a button shows and runs one on demand.
        assert panel.get_by_role("button", name="Show and run the solution").count() >= 3
        solved = re.compile(r"\b\d\d\.\d+ [^\n]*: right\b")   # a verdict "right"
        assert not solved.search(panel.inner_text()), f"{stem}: a solution ran in Run All"
        _reveal_every_solution(panel, stem)

        # The widget outlived Run All: using it changes what it shows.
        USE[stem](panel)
        page.screenshot(path=str(SCREENSHOTS / f"{stem}-used.png"))
    finally:
        page.close()
        for kernel in _kernels(base, token):  # the next notebook gets the machine to itself
            _request(f"{base}/api/kernels/{kernel}?token={token}", "DELETE")
