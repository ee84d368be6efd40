"""A live dashboard of a running query: batches, input, state rows, RocksDB memory, the
changelog against its compaction, the watermark and the top rows of the store.

``Dashboard(query)`` is an ipywidgets box of offline ``alt.JupyterChart``s and a status
line. A daemon thread refreshes it every ``every`` seconds while the query runs, so the
kernel stays free; once the query stops it makes one last refresh (snapshot included)
and ends. ``stop()`` ends it sooner; ``refresh()`` makes one update now, on the
caller's thread, and returns what it read (a ``statekit.monitor.Reading``).

What a refresh reads, and what it costs (``statekit.monitor.Monitor``): the progress
reports (new files only), the RocksDB metrics derived from them, the changelog topic
(only records appended since the last refresh) — cheap — and a snapshot of the store
for the top-N view, a Spark job that competes with the query for the same cores, so
it is taken at most every ``snapshot_every`` seconds and only after a new batch.
``costs`` holds the seconds of each part of the last refresh.

Example:
    >>> board = Dashboard(query, every=1.0, top=10)   # starts refreshing  # doctest: +SKIP
    >>> board                                          # shows it          # doctest: +SKIP
    >>> board.refresh().progress.tail(1)               # one update now     # doctest: +SKIP
    >>> board.stop()                                   # or let the query end  # doctest: +SKIP
    >>> query.close(); board.wait()       # a last refresh, then it ends  # doctest: +SKIP
    >>> show_dashboard(query)                          # the same, one call  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import time

import altair as alt
import ipywidgets as widgets

from statekit.charts.monitor import (
    changelog_growth_chart,
    input_chart,
    memory_chart,
    watermark_chart,
)
from statekit.charts.output import offline
from statekit.charts.progress import state_rows_chart
from statekit.charts.serving import leaderboard_chart
from statekit.errors import BadArgument
from statekit.monitor.watch import Monitor, Reading
from statekit.widgets.refreshing import RefreshingBox, placeholder

PANELS = ("input", "state", "memory", "changelog", "watermark", "top")
#: Each panel's plot width (px): two panels side by side fit a JupyterLab output area of
#: about 1,100 px with their axes and legends; a narrower one puts them one under the other.
PANEL_WIDTH = 380


def _mib(value: float) -> str:
    return f"{value / 2**20:,.1f} MiB"


class Dashboard(RefreshingBox):
    """Live charts of a ``StatefulQuery``, refreshed on a background thread.

    Args:
        query: the ``StatefulQuery`` to watch.
        every: seconds between refreshes.
        top: rows in the top-N view of the store.
        by: the value ranked in the top-N view (default: the first aggregate).
        snapshot_every: seconds between two snapshots of the store (default: 10 ×
            ``every``, at least 5 s).
        start: start the refresh thread at once (False: call ``start()`` or ``refresh()``).

    Attributes:
        reading: the last ``statekit.monitor.Reading`` (progress, metrics, changelog
            counts, top rows, with the batch they reflect).
        charts: panel name → its ``alt.JupyterChart``.
        status: the status line (``ipywidgets.Label``).
        costs: seconds each part of the last refresh took (progress, metrics,
            changelog, snapshot when one was taken, charts, total).
        error: the exception of the last refresh that failed (None after a good one).
    """

    def __init__(self, query, every: float = 1.0, top: int = 10, by: str | None = None,
                 snapshot_every: float | None = None, *, start: bool = True):
        if not all(hasattr(query, a) for a in ("checkpoint", "spec", "snapshot", "is_active")):
            raise BadArgument("query", type(query).__name__,
                              "a StatefulQuery (statekit.start_query(...))")
        super().__init__(every, layout=widgets.Layout(width="100%"))
        if snapshot_every is None:
            snapshot_every = max(10 * self.every, 5.0)
        self.query = query
        self.monitor = Monitor(query, top=top, by=by, snapshot_every=snapshot_every)
        self.reading: Reading | None = None
        self.costs: dict[str, float] = {}
        self.offline = offline()
        self.button = widgets.Button(description="Refresh now", icon="refresh",
                                     tooltip="read the query once, now (snapshot included)")
        self.button.on_click(self._pressed)
        self.charts = {name: alt.JupyterChart(placeholder(f"{name}: waiting for a batch"))
                       for name in PANELS}
        grid = widgets.GridBox(list(self.charts.values()), layout=widgets.Layout(
            grid_template_columns=f"repeat(auto-fill, minmax({PANEL_WIDTH + 140}px, 1fr))",
            grid_gap="8px 16px", width="100%"))
        self.children = [self._controls(self.button), grid]
        if start:
            self.start()

    # --- one update -------------------------------------------------------------------------
    def _show(self, panel: str, chart: alt.TopLevelMixin) -> None:
        if isinstance(chart, alt.Chart | alt.LayerChart):   # a concat sizes its parts itself
            chart = chart.properties(width=PANEL_WIDTH)
        self.charts[panel].chart = chart

    def _draw(self, reading: Reading) -> None:
        progress, metrics = reading.progress, reading.metrics
        if len(progress):
            self._show("input", input_chart(progress))
            self._show("state", state_rows_chart(progress))
            self._show("watermark", watermark_chart(progress))
        if len(metrics) and "memory_used" in set(metrics["metric"]):
            self._show("memory", memory_chart(metrics))
        if reading.changelog is not None and len(reading.changelog):
            self._show("changelog", changelog_growth_chart(reading.changelog))
        elif reading.changelog is None:
            self._show("changelog", placeholder("the query keeps no changelog"))
        if reading.top is not None:
            self._show("top", leaderboard_chart(
                reading.top, self.monitor.by, keys=list(self.query.spec.keys),
                title=f"Top {self.monitor.top} rows by {self.monitor.by}",
                subtitle=f"store as of batch {reading.top_batch}"))

    def _describe(self, reading: Reading) -> str:
        parts = [time.strftime("%H:%M:%S"), f"batch {reading.last_batch}",
                 "running" if reading.active else "stopped"]
        if len(reading.progress):
            last = reading.progress.iloc[-1]
            parts.append(f"{int(last['state_rows_total']):,} state rows")
            if "state_memory_bytes" in last:
                parts.append(f"RocksDB {_mib(float(last['state_memory_bytes']))}")
        if reading.changelog is not None and len(reading.changelog):
            end = reading.changelog.iloc[-1]
            parts.append(f"changelog {int(end['log_records']):,} records "
                         f"({int(end['compacted']):,} after compaction)")
        if reading.top_batch is not None:
            parts.append(f"top {self.monitor.top} as of batch {reading.top_batch}")
        cost = f"refresh {self.costs.get('total', 0):.2f} s"
        if "snapshot" in reading.costs:
            cost += f" (snapshot {reading.costs['snapshot']:.2f} s)"
        parts.append(cost)
        return " · ".join(parts)

    def refresh(self, snapshot: bool | None = True) -> Reading:
        """Read the query once, now, on this thread; redraw; return the ``Reading``.

        ``snapshot``: True (default) also takes a snapshot for the top-N view; None takes
        one when due (``snapshot_every``, new batch: what the thread does); False never.
        A failure is shown in the status line (and kept in ``error``) and raised.
        """
        with self._lock:
            start = time.perf_counter()
            try:
                reading = self.monitor.poll(snapshot=snapshot)
                drawn = time.perf_counter()
                self._draw(reading)
            except Exception as exc:
                self._failed(exc)
                raise
            end = time.perf_counter()
            self.costs = {**reading.costs, "charts": end - drawn, "total": end - start}
            self.reading, self.error = reading, None
            self.status.value = self._describe(reading)
            return reading

    def _pressed(self, _button) -> None:
        with contextlib.suppress(Exception):  # shown in the status line
            self.refresh(snapshot=True)

    # --- the thread (RefreshingBox) ------------------------------------------------------------
    def _active(self) -> bool:
        return self.query.is_active

    def _refresh(self, final: bool) -> None:
        self.refresh(snapshot=True if final else None)

    def _parts(self) -> list:
        return [*getattr(self, "charts", {}).values(), getattr(self, "button", None)]

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        batch = self.reading.last_batch if self.reading is not None else None
        return f"Dashboard({self.query.name!r}, every={self.every}, batch={batch}, {state})"


def show_dashboard(query, every: float = 1.0, top: int = 10, **options) -> Dashboard:
    """One call: a ``Dashboard`` of ``query``, refreshing (show it as a cell's last value)."""
    return Dashboard(query, every=every, top=top, start=True, **options)
