"""Showing and saving charts without a network: vl-convert for files, anywidget in Jupyter.

Example:
    >>> offline()                                                        # doctest: +SKIP
    >>> save_chart(chart, "out/state_rows")  # writes out/state_rows.html and .png  # doctest: +SKIP
    >>> stacked(input_chart(progress), state_rows_chart(progress))     # doctest: +SKIP
"""

from __future__ import annotations

from pathlib import Path

import altair as alt


def offline() -> bool:
    """Show charts in Jupyter with Vega from vl-convert's bundle (no network); True if so.

    Switches Altair's ``jupyter`` renderer (charts shown as cell outputs) and
    ``alt.JupyterChart`` (the widgets) to offline. If vl-convert cannot bundle Vega,
    nothing changes (Vega then comes from a CDN) and the answer is False.
    """
    try:
        alt.JupyterChart.enable_offline()
    except Exception:  # vl-convert missing or unable to bundle
        return False
    alt.renderers.enable("jupyter", offline=True)
    return True


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
