"""A live leaderboard: the top-k rows of a window, asked of the serving instances again and again.

While a Spark query keeps writing its state (and the changelog keeps the serving
instances current), ``LiveLeaderboard`` asks a ``ServingClient`` for the ``k``
largest ``by`` of one window every ``every`` seconds on a background thread, and
shows them as ranked bars (``statekit.charts.serving.leaderboard_chart``) with a
status line naming the window and, per partition, the instance that answered,
its role and the batch its store reflected.

Example:
    >>> board = LiveLeaderboard(cluster.client(), k=5, by="sum_score", query=query)
    ...                                                                  # doctest: +SKIP
    >>> board            # shows the chart and the status line          # doctest: +SKIP
    >>> board.start()    # refresh every second on a thread             # doctest: +SKIP
    >>> board.stop()     # or board.close(): the thread is joined       # doctest: +SKIP
    >>> board.refresh()  # one synchronous update (tests, headless runs)  # doctest: +SKIP
    QueryResult(top_k, 5 rows, 3 partitions, batch 41)
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Protocol

import altair as alt
import ipywidgets as widgets

from statekit.charts.output import offline
from statekit.charts.serving import leaderboard_chart
from statekit.errors import BadArgument, StatekitError
from statekit.serve.client import ServingClient
from statekit.serve.ranking import top
from statekit.serve.results import QueryResult
from statekit.serve.routing.key_times import time_ms
from statekit.stores.key_layout import MAX_TIME_MS, ms_to_iso
from statekit.validate import non_negative_number, whole_number

#: The largest board drawn (a top-k query itself allows more).
MAX_K = 1000


class _Query(Protocol):
    """What the board reads of a running query (a ``StatefulQuery``)."""

    @property
    def last_batch(self) -> int: ...

    @property
    def is_active(self) -> bool: ...


def _describe(result: QueryResult, window: str | None, spark_batch: int | None) -> str:
    """The status line: the window, and who answered for each partition at which batch."""
    if window is None:
        shown = "no window in the store yet"
    else:
        shown = (f"window from {window[:10]} {window[11:19]} UTC: {len(result.rows)} rows, "
                 f"as of batch {result.batch}")
    who = ", ".join(
        f"p{a.partition} {a.instance} ({a.role}, batch {a.batch}"
        + (f", {a.lag_batches} behind" if a.lag_batches else "") + ")"
        for a in result.partitions)
    parts = [time.strftime("%H:%M:%S"), shown]
    if who:
        parts.append(f"answered by {who}")
    if result.missing:
        parts.append(f"partitions {result.missing} missing (no live holder)")
    if spark_batch is not None:
        parts.append(f"Spark at batch {spark_batch}")
    return " · ".join(parts)


class LiveLeaderboard(widgets.VBox):
    """The ``k`` largest ``by`` of a window, kept current from the serving instances.

    Args:
        client: a ``ServingClient`` (``cluster.client()``) of a windowed store.
        window: the window's start (text, ``Timestamp`` or epoch ms); None follows the
            latest window — the largest ``window_start`` the store holds.
        k: rows on the board (1 to 1000).
        by: the value column ranked (default: the store's first value column).
        every: seconds between refreshes on the thread (``start``).
        query: the running ``StatefulQuery`` (optional): the status names its last
            batch beside the batch the answer reflects, and the thread makes one last
            refresh and ends once the query has stopped.

    The latest window is found with ``client.fetch_all(since, end of time)`` where
    ``since`` is the latest window start seen by the previous refresh: after the first
    refresh only the rows of the newest window(s) travel, not the whole store as
    ``client.all()`` would send each time, and the board is ranked from those same rows
    (with the ranking of ``top_k``), so one scatter-gather per refresh gives both the
    window and its leaders, all as of the batches its report names. A given ``window``
    is asked with ``client.top_k``. If the window seen last is gone (evicted by the
    watermark), the next refresh looks through every window again.

    Attributes:
        chart: the ``alt.JupyterChart`` (its ``.spec`` is the Vega-Lite dict shown).
        status: the ``ipywidgets.Label`` under it.
        result: the last ``QueryResult`` (rows and one report row per partition).
        window_start: the start of the window shown (ISO text), None before the first.
        error: the exception of the last refresh that failed (None after a good one).
    """

    def __init__(self, client: ServingClient, window: object | None = None, k: int = 10,
                 by: str | None = None, every: float = 1.0, *, query: _Query | None = None):
        self._stop = threading.Event()   # first: close() (also from __del__) needs them
        self._thread: threading.Thread | None = None
        schema = getattr(client, "schema", None)
        if schema is None or not callable(getattr(client, "top_k", None)):
            raise BadArgument("client", type(client).__name__,
                              "a ServingClient (ServingCluster.client() or ServingClient(urls))")
        spec = schema.spec
        if not spec.windowed:
            raise BadArgument("store", f"{client.store!r} (a {spec.kind} store)",
                              "a store of tumbling or hopping windows: a leaderboard ranks "
                              "the rows of one window")
        values = [c for c in spec.value_columns if c != "window_end"]
        by = values[0] if by is None else by
        if by not in values:
            raise BadArgument("leaderboard by", by, values)
        self.client, self.by = client, by
        self.key_columns = list(spec.keys)  # ``keys`` is a Widget attribute
        self.k = whole_number(k, "k", minimum=1, maximum=MAX_K)
        every = non_negative_number(every, "every", unit="seconds")
        if every <= 0:
            raise BadArgument("every", every, "a number of seconds > 0")
        self.every = float(every)
        self.window = None if window is None else ms_to_iso(time_ms(window, "window"))
        self.query = query
        self.result: QueryResult | None = None
        self.window_start: str | None = None
        self.error: Exception | None = None
        self._since = 0        # epoch ms: the latest window start seen
        self._lock = threading.Lock()
        self.offline = offline()
        self.status = widgets.Label(value="not refreshed yet: press Refresh, or call refresh() "
                                          "or start()")
        self.button = widgets.Button(description="Refresh", icon="refresh",
                                     tooltip="ask the serving instances again, now")
        self.button.on_click(self._pressed)
        self.chart = alt.JupyterChart(leaderboard_chart([], by, keys=self.key_columns))
        super().__init__([self.chart, widgets.HBox([self.button, self.status])])

    # --- one update -----------------------------------------------------------------------
    def _latest(self) -> tuple[QueryResult, str | None]:
        """The top ``k`` of the latest window and the window, from one scatter-gather."""
        found = self.client.fetch_all(self._since, MAX_TIME_MS)
        if not found.rows and self._since:   # the window seen last is gone: look again
            self._since = 0
            found = self.client.fetch_all(0, MAX_TIME_MS)
        if not found.rows:
            return QueryResult("top_k", [], found.partitions, found.missing), None
        latest = max(row["window_start"] for row in found.rows)   # ISO text sorts as time
        self._since = time_ms(latest, "window_start")
        rows = top((r for r in found.rows if r["window_start"] == latest), self.k, self.by,
                   self.key_columns)
        return QueryResult("top_k", rows, found.partitions, found.missing), latest

    def refresh(self) -> QueryResult:
        """Ask the serving instances once, now; update the chart and the status; return the
        answer. A failure is shown in the status line (and in ``error``) and raised."""
        with self._lock:
            spark_batch = self.query.last_batch if self.query is not None else None
            try:
                if self.window is None:
                    result, window = self._latest()
                else:
                    result, window = self.client.top_k(self.window, self.k, self.by), \
                        self.window
            except Exception as exc:
                self.error = exc
                self.status.value = (f"{time.strftime('%H:%M:%S')} · could not refresh: "
                                     f"{type(exc).__name__}: {exc}")
                raise
            self.result, self.window_start, self.error = result, window, None
            subtitle = None if window is None else (
                f"as of batch {result.batch}" + (" (a standby answered for some partitions)"
                                                 if result.from_standby else ""))
            self.chart.chart = leaderboard_chart(result.rows, self.by, keys=self.key_columns,
                                                 subtitle=subtitle)
            self.status.value = _describe(result, window, spark_batch)
            return result

    def _pressed(self, _button) -> None:
        with contextlib.suppress(Exception):  # shown in the status line
            self.refresh()

    # --- the thread -------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        """True while the refresh thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> LiveLeaderboard:
        """Refresh every ``every`` seconds on a background thread (until ``stop``)."""
        if self.running:
            return self
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(self._stop,),
                                        name="statekit-leaderboard", daemon=True)
        self._thread.start()
        return self

    def _run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            ended = self.query is not None and not self.query.is_active
            with contextlib.suppress(Exception):  # shown in the status line; next try may work
                self.refresh()
            if ended:          # that was the query's final state
                self.status.value += " · the query has stopped: final board"
                return
            stop.wait(self.every)

    def stop(self, timeout: float | None = None) -> None:
        """Stop the thread and wait for it to end (a refresh under way finishes first).

        ``timeout`` defaults to enough for a refresh whose every call times out.
        """
        self._stop.set()
        thread = self._thread
        if thread is None or thread is threading.current_thread():
            return
        limit = timeout if timeout is not None else 30.0 + 4 * float(
            getattr(self.client, "timeout", 5.0))
        thread.join(limit)
        if thread.is_alive():
            raise StatekitError(f"the leaderboard thread did not end within {limit:.0f} s "
                                "(a query to the serving instances is hanging)")
        self._thread = None

    def close(self) -> None:
        """Stop the thread, then close the widget and its chart and status line."""
        self.stop()
        for child in (getattr(self, "chart", None), getattr(self, "status", None),
                      getattr(self, "button", None)):
            if child is not None:
                child.close()
        super().close()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        shown = self.window_start or self.window or "the latest window"
        return f"LiveLeaderboard(top {self.k} by {self.by}, {shown}, {state})"
