"""Showing and saving charts without a network: vl-convert for files, anywidget in Jupyter.

Example:
    >>> offline()                                                        # doctest: +SKIP
    >>> save_chart(chart, "out/state_rows")  # writes out/state_rows.html and .png  # doctest: +SKIP
    >>> stacked(input_chart(progress), state_rows_chart(progress))     # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import altair as alt

from statekit.atomic import write_atomic
from statekit.cache import cache_dir


def offline() -> bool:
    """Show charts in Jupyter with Vega from vl-convert's bundle (no network); True if so.

    Switches Altair's ``jupyter`` renderer (charts shown as cell outputs) and
    ``alt.JupyterChart`` (the widgets) to offline. vl-convert builds the widget's
    JavaScript bundle in about 2 s; it is kept in statekit's cache (``offline_bundle``),
    so a notebook after the first starts without that wait. If vl-convert cannot bundle
    Vega, nothing changes (Vega then comes from a CDN) and the answer is False.
    """
    try:
        _enable_offline_widgets()
    except Exception:  # vl-convert missing or unable to bundle
        return False
    alt.renderers.enable("jupyter", offline=True)
    return True


def offline_bundle(cache: str | Path | None = None) -> Path:
    """The cached file of ``alt.JupyterChart``'s offline JavaScript bundle, named by the
    Altair and vl-convert versions that made it (a new version makes a new one).

    Example:
        >>> offline_bundle("/tmp/c").name.startswith(f"altair-{alt.__version__}-vl-convert-")
        True
    """
    from importlib.metadata import version

    folder = Path(cache) if cache is not None else cache_dir()
    return folder / f"altair-{alt.__version__}-vl-convert-{version('vl-convert-python')}.js"


def _enable_offline_widgets() -> None:
    """``alt.JupyterChart.enable_offline()``, its bundle read from the cache when there,
    written there when made. Altair keeps the bundle in ``JupyterChart._esm``; if a
    later Altair stops doing so, its own ``enable_offline`` runs uncached."""
    widget = alt.JupyterChart
    if getattr(widget, "_is_offline", False):
        return
    if not hasattr(widget, "_esm"):
        widget.enable_offline()
        return
    path = offline_bundle()
    try:
        cached = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        cached = ""
    if cached:
        widget._esm, widget._is_offline = cached, True
        return
    widget.enable_offline()
    with contextlib.suppress(OSError):  # a cache that cannot be written is only slower
        write_atomic(path, widget._esm)  # (its folder made there; DiskFull is an OSError)


def save_chart(chart: alt.TopLevelMixin, path: str | Path, formats=("html", "png")) -> list[Path]:
    """Write ``chart`` as self-contained HTML (Vega inlined) and PNG; returns the paths."""
    base = Path(path)
    base.parent.mkdir(parents=True, exist_ok=True)
    written = []
    for fmt in formats:
        target = base.with_suffix(f".{fmt}")
        if fmt == "html":
            chart.save(str(target), format="html", inline=True)
        else:
            chart.save(str(target), format=fmt, scale_factor=2 if fmt == "png" else 1)
        written.append(target)
    return written


def stacked(*charts: alt.TopLevelMixin) -> alt.VConcatChart:
    """``charts`` one under the other, each with its own colour legend and scale.

    Altair's ``a & b`` shares colour scales across the charts: two charts that colour
    different things ("input rows" in one, "updated" in the other) end up with one merged
    legend that names a colour of the one after the other. Here every scale is
    independent.

    Example:
        >>> a = alt.Chart().mark_point().encode(color=alt.value("red"))
        >>> stacked(a, a).to_dict()["resolve"]["scale"]["color"]
        'independent'
    """
    return alt.vconcat(*charts).resolve_scale(color="independent", shape="independent",
                                              size="independent", opacity="independent")
