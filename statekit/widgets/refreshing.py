"""A widget box that refreshes itself on a background thread while its query runs.

``RefreshingBox`` owns the thread every live widget needs: refresh every ``every`` seconds
while the query is active, one last refresh (``final=True``) once it has stopped, then
end; ``stop()`` ends it sooner, ``wait()`` waits for it to end by itself. A refresh that
fails is shown in the status line and kept in ``error``; the next one may work. A
subclass says what one refresh does (``_refresh(final)``) and whether its query still
runs (``_active()``).

Example:
    >>> class Clock(RefreshingBox):
    ...     def _active(self):
    ...         return False           # "stopped": one final refresh, then the thread ends
    ...     def _refresh(self, final):
    ...         self.status.value = f"final: {final}"
    >>> box = Clock(every=0.1).start()
    >>> box.wait(10), box.status.value
    (True, 'final: True · the query has stopped: final view')
"""

from __future__ import annotations

import contextlib
import threading
import time

import altair as alt
import ipywidgets as widgets
import pandas as pd

from statekit.errors import BadArgument, StatekitError
from statekit.validate import non_negative_number


def placeholder(text: str) -> alt.Chart:
    """A grey note where a chart will be (a live widget's panel before its first batch)."""
    return alt.Chart(pd.DataFrame({"note": [text]})).mark_text(color="#888888").encode(
        text="note:N").properties(width=480, height=60)


class RefreshingBox(widgets.VBox):
    """A VBox with a status line and a refresh thread; ``every``: seconds between refreshes."""

    def __init__(self, every: float, children=(), **kwargs):
        self._stop = threading.Event()   # first: close() (also from __del__) needs them
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        every = non_negative_number(every, "every", unit="seconds")
        if every <= 0:
            raise BadArgument("every", every, "a number of seconds > 0")
        self.every = float(every)
        self.error: Exception | None = None
        self.status = widgets.Label(value="not refreshed yet")
        super().__init__(list(children), **kwargs)

    def _controls(self, button: widgets.Button) -> widgets.HBox:
        """The button beside the status line, laid out so neither is clipped: the button keeps
        its width ("Refresh now", not "Refresh…") and the status line takes the rest, its
        text wrapping instead of ending in an ellipsis."""
        button.layout = widgets.Layout(flex="0 0 auto", width="auto")
        self.status.layout = widgets.Layout(flex="1 1 auto", width="auto", min_width="0")
        self.status.add_class("statekit-status")
        wrap = widgets.HTML("<style>.statekit-status, .statekit-status * {white-space: normal "
                            "!important; overflow: visible !important; text-overflow: clip "
                            "!important; height: auto !important}</style>",
                            layout=widgets.Layout(width="0px", height="0px"))
        return widgets.HBox([button, self.status, wrap],
                            layout=widgets.Layout(align_items="center", width="100%"))

    # --- what a subclass says -----------------------------------------------------------------
    def _active(self) -> bool:
        """True while the watched query runs."""
        raise NotImplementedError

    def _refresh(self, final: bool) -> None:
        """One refresh on the thread (``final``: the query has stopped; this is the last)."""
        raise NotImplementedError

    def _failed(self, exc: Exception) -> None:
        """Show a refresh's failure in the status line (and keep it in ``error``)."""
        self.error = exc
        self.status.value = (f"{time.strftime('%H:%M:%S')} · could not refresh: "
                             f"{type(exc).__name__}: {exc}")

    # --- the thread -------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        """True while the refresh thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    def start(self):
        """Refresh every ``every`` seconds on a daemon thread until the query stops."""
        if self.running:
            return self
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(self._stop,),
                                        name=f"statekit-{type(self).__name__}", daemon=True)
        self._thread.start()
        return self

    def _run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            ended = not self._active()
            with contextlib.suppress(Exception):   # shown in the status line; next try may work
                self._refresh(ended)
            if ended:
                self.status.value += " · the query has stopped: final view"
                return
            stop.wait(self.every)

    def stop(self, timeout: float = 120.0) -> None:
        """Stop the thread and wait for it (a refresh under way ends first)."""
        if not hasattr(self, "_stop"):   # refused in __init__ before the thread's parts
            return
        self._stop.set()
        thread = self._thread
        if thread is None or thread is threading.current_thread():
            return
        thread.join(timeout)
        if thread.is_alive():
            raise StatekitError(f"the {type(self).__name__} thread did not end within "
                                f"{timeout:.0f} s (a refresh is hanging)")
        self._thread = None

    def wait(self, timeout: float = 120.0) -> bool:
        """Wait until the refresh thread ends by itself (after the query stopped and the final
        refresh); True when it has ended, False after ``timeout`` seconds."""
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        return not self.running

    def _parts(self) -> list:
        """The child widgets ``close()`` closes (besides the status line)."""
        return []

    def close(self, keep_view: bool = True) -> None:
        """Stop the thread. With ``keep_view`` (the default) the last drawing stays on the page,
        its buttons disabled and the status line saying so: a closed ipywidget disappears from
        the notebook, and a reader scrolling back wants the dashboard the text talks about.
        ``keep_view=False`` closes the child widgets and the box too (their views go)."""
        self.stop()
        if keep_view:
            for child in self._parts():
                if isinstance(child, widgets.Button):
                    child.disabled = True
            status = getattr(self, "status", None)
            if status is not None and "closed" not in status.value:
                status.value += " · closed: the last view"
            return
        for child in [*self._parts(), getattr(self, "status", None)]:
            if child is not None:
                child.close()
        super().close()
