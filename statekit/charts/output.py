"""Showing and saving charts without a network: vl-convert for files, anywidget in Jupyter.

Example:
    >>> offline()                                                        # doctest: +SKIP
    >>> save_chart(chart, "out/state_rows")  # writes out/state_rows.html and .png  # doctest: +SKIP
"""

from __future__ import annotations

from pathlib import Path

import altair as alt


def offline() -> None:
    """Render charts in Jupyter with Vega bundled locally (no CDN), via Altair's JupyterChart."""
    alt.renderers.enable("jupyter", offline=True)


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
