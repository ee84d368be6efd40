"""Charts offline: the widget's JavaScript bundle made once per machine, then read back."""

from __future__ import annotations

import altair as alt
import pytest

from statekit.charts.output import offline, offline_bundle


@pytest.fixture()
def online(monkeypatch, tmp_path):
    """JupyterChart as a fresh interpreter has it (online), statekit's cache in tmp_path;
    both put back afterwards."""
    monkeypatch.setattr(alt.JupyterChart, "_esm", alt.JupyterChart._esm)
    monkeypatch.setattr(alt.JupyterChart, "_is_offline", False)
    for name in ("_active", "_active_name", "_options"):
        monkeypatch.setattr(alt.renderers, name, getattr(alt.renderers, name))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path / "statekit"


@pytest.fixture(scope="module")
def bundle() -> str:
    """What Altair's own ``enable_offline`` makes (vl-convert's bundle)."""
    saved = alt.JupyterChart._esm, alt.JupyterChart._is_offline
    alt.JupyterChart._is_offline = False
    try:
        alt.JupyterChart.enable_offline()
        return alt.JupyterChart._esm
    finally:
        alt.JupyterChart._esm, alt.JupyterChart._is_offline = saved


def test_the_offline_bundle_is_made_once_then_read_from_the_cache(online, bundle):
    assert offline() is True
    path = offline_bundle()
    assert path.parent == online and path.read_text() == bundle == alt.JupyterChart._esm
    assert alt.JupyterChart._is_offline and alt.renderers.active == "jupyter"
    # a later interpreter takes the widget's code from the file: mark it to see it used
    path.write_text(bundle + "\n// read from the cache\n")
    alt.JupyterChart._is_offline = False
    assert offline() is True
    assert alt.JupyterChart._esm.endswith("// read from the cache\n")


@pytest.mark.parametrize("damage", ["empty", "not utf-8", "a folder"])
def test_a_damaged_cache_entry_is_made_again_or_passed_by(online, bundle, damage):
    path = offline_bundle()
    path.parent.mkdir(parents=True)
    if damage == "empty":
        path.write_text("")
    elif damage == "not utf-8":
        path.write_bytes(b"\xff\xfe\x00garbage")
    else:
        path.mkdir()
    assert offline() is True
    assert alt.JupyterChart._is_offline and alt.JupyterChart._esm == bundle
    if damage != "a folder":  # a file that was wrong is replaced by the bundle
        assert path.read_text() == bundle


def test_the_bundle_is_named_by_the_versions_that_made_it(tmp_path):
    from importlib.metadata import version

    path = offline_bundle(tmp_path)
    assert path.parent == tmp_path
    assert path.name == (f"altair-{alt.__version__}-vl-convert-"
                         f"{version('vl-convert-python')}.js")
