"""A live dashboard of anyone's running query, attached with ``statekit.attach``: per
stateful operator, its rows, rows removed (evicted by the watermark or expired by a TTL),
memory, the watermark, the flags of state that only grows, and each shipped part's
changelog lag.

``AttachedDashboard(live)`` is an ipywidgets box of offline ``alt.JupyterChart``s, a
status line (``Health.summary()``) and a table of flags and lags. Its thread
(``RefreshingBox``) reads ``live.health()`` every ``every`` seconds while the query runs:
the progress reports Spark already keeps, no Spark job, so it never competes with the
query for cores. Once the query stops it draws a last time and ends.

Example:
    >>> live = sk.attach(query, kafka=broker)          # doctest: +SKIP
    >>> board = AttachedDashboard(live, every=2.0)     # doctest: +SKIP
    >>> board                                          # shows it  # doctest: +SKIP
    >>> board.refresh().growing                        # one reading now  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import html
import time

import altair as alt
import ipywidgets as widgets
import pandas as pd

from statekit.charts.monitor import (
    input_chart,
    operator_memory_chart,
    operators_chart,
    watermark_chart,
)
from statekit.charts.output import offline
from statekit.errors import BadArgument
from statekit.widgets.refreshing import RefreshingBox, placeholder

PANELS = ("operators", "memory", "input", "watermark")


def flags_html(health) -> str:
    """The operators whose state only grows and each shipped part's changelog lag, as HTML
    (a ``statekit.live.health.Health``; empty parts are left out).

    Example:
        >>> from statekit.live.health import Health
        >>> grows = pd.DataFrame({"operator_id": [1], "operator": ["dedupe"], "rows": [40]})
        >>> empty = pd.DataFrame(columns=["part", "batches_behind"])
        >>> "1 dedupe: 40 rows" in flags_html(Health(3, True, empty, grows, grows, empty, empty))
        True
    """
    out = []
    if len(health.growing):
        items = "".join(f"<li>{html.escape(f'{_id(r.operator_id)} {r.operator}')}: "
                        f"{int(r.rows):,} rows</li>"
                        for r in health.growing.itertuples(index=False))
        out.append("<b>State that only grows</b> (no watermark or TTL removes rows, or the "
                   f"keys have no end):<ul>{items}</ul>")
    if len(health.changelog_lag):
        table = health.changelog_lag[["part", "topic", "committed", "shipped",
                                      "batches_behind"]]
        out.append("<b>Changelogs</b>" + table.to_html(index=False, border=0))
    return "".join(out)


def _id(value: object) -> str:
    return "?" if pd.isna(value) else str(int(value))


class AttachedDashboard(RefreshingBox):
    """Live per-operator charts of an ``AttachedQuery``, refreshed on a background thread.

    Args:
        live: what ``statekit.attach`` returned.
        every: seconds between refreshes.
        start: start the refresh thread at once (False: call ``start()`` or ``refresh()``).

    Attributes:
        health: the last ``statekit.live.health.Health`` read.
        charts: panel name → its ``alt.JupyterChart``.
        flags: the table of growth flags and changelog lags (``ipywidgets.HTML``).
    """

    def __init__(self, live, every: float = 2.0, *, start: bool = True):
        if not all(hasattr(live, a) for a in ("health", "is_active", "operator_progress")):
            raise BadArgument("live", type(live).__name__,
                              "an AttachedQuery (statekit.attach(query))")
        super().__init__(every, layout=widgets.Layout(width="100%"))
        self.live = live
        self.health = None
        self.offline = offline()
        self.button = widgets.Button(description="Refresh now", icon="refresh",
                                     tooltip="read the query's progress once, now")
        self.button.on_click(lambda _button: self._pressed())
        self.charts = {name: alt.JupyterChart(placeholder(f"{name}: waiting for a batch"))
                       for name in PANELS}
        self.flags = widgets.HTML()
        grid = widgets.GridBox(list(self.charts.values()), layout=widgets.Layout(
            grid_template_columns="repeat(auto-fill, minmax(620px, 1fr))",
            grid_gap="8px 16px", width="100%"))
        self.children = [self._controls(self.button), self.flags, grid]
        if start:
            self.start()

    def refresh(self):
        """Read ``live.health()`` once, now, on this thread; redraw; return it. A failure is
        shown in the status line (and kept in ``error``) and raised."""
        with self._lock:
            try:
                health = self.live.health()
                self._draw(health)
            except Exception as exc:
                self._failed(exc)
                raise
            self.health, self.error = health, None
            self.status.value = f"{time.strftime('%H:%M:%S')} · {health.summary()}"
            return health

    def _draw(self, health) -> None:
        if len(health.operators):
            self.charts["operators"].chart = operators_chart(health.operators)
            self.charts["memory"].chart = operator_memory_chart(health.operators)
        if len(health.progress):
            self.charts["input"].chart = input_chart(health.progress)
            self.charts["watermark"].chart = watermark_chart(health.progress)
        self.flags.value = flags_html(health)

    def _pressed(self) -> None:
        with contextlib.suppress(Exception):   # shown in the status line
            self.refresh()

    # --- the thread (RefreshingBox) ------------------------------------------------------------
    def _active(self) -> bool:
        return self.live.is_active

    def _refresh(self, final: bool) -> None:
        self.refresh()

    def _parts(self) -> list:
        return [*getattr(self, "charts", {}).values(), getattr(self, "button", None),
                getattr(self, "flags", None)]

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        batch = self.health.last_batch if self.health is not None else None
        return f"AttachedDashboard({self.live.name!r}, every={self.every}, batch={batch}, {state})"


def show_attached(live, every: float = 2.0) -> AttachedDashboard:
    """``AttachedDashboard(live, every)``, started: show it as a cell's last line."""
    return AttachedDashboard(live, every)
