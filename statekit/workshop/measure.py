"""Timings for the workshop's side-by-side figures: every call timed, p50 and p99 per kind.

A notebook asks one question several ways (a routed lookup, a scatter-gather, a
Spark snapshot, a database) and compares how long each takes. ``Timings`` times
each call and keeps ``(kind, seconds)`` rows; ``under_load`` makes the same calls
from several threads at once, as concurrent users would. The figures come from a
shared laptop: read the shapes, not the digits (``bench/`` measures properly).

Example:
    >>> timings = Timings()
    >>> timings.time("sum", sum, [1, 2, 3])
    6
    >>> timings.under_load("len", len, [("abc",)] * 20, threads=4)
    >>> timings.summary()["queries"].to_dict()
    {'sum': 1, 'len': 20}
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor

import pandas as pd

from statekit.validate import whole_number


class Timings:
    """``(kind, seconds)`` of every call made through it."""

    def __init__(self) -> None:
        self._rows: list[tuple[str, float]] = []
        self._lock = threading.Lock()

    def time(self, kind: str, ask: Callable, *args, **kwargs):
        """Call ``ask(*args, **kwargs)``, keep how long it took under ``kind``; its result."""
        started = time.perf_counter()
        result = ask(*args, **kwargs)
        took = time.perf_counter() - started
        with self._lock:
            self._rows.append((kind, took))
        return result

    def under_load(self, kind: str, ask: Callable, calls: Iterable[Sequence], threads: int = 8,
                   load: Callable[[threading.Event], object] | None = None) -> None:
        """``ask(*args)`` for each ``args`` in ``calls``, from ``threads`` threads at once, each
        call timed. ``load(stop)``, if given, runs on a thread of its own meanwhile (e.g.
        writers) until ``stop`` is set."""
        threads = whole_number(threads, "threads", minimum=1)
        stop = threading.Event()
        loader = None
        if load is not None:
            loader = threading.Thread(target=load, args=(stop,), name="statekit-load",
                                      daemon=True)
            loader.start()
        try:
            with ThreadPoolExecutor(max_workers=threads,
                                    thread_name_prefix="statekit-reader") as pool:
                list(pool.map(lambda args: self.time(kind, ask, *args), list(calls)))
        finally:
            stop.set()
            if loader is not None:
                loader.join()

    def frame(self) -> pd.DataFrame:
        """One row per call: ``kind``, ``seconds``."""
        with self._lock:
            return pd.DataFrame(list(self._rows), columns=["kind", "seconds"])

    def summary(self) -> pd.DataFrame:
        """Per kind, in the order first timed: ``queries``, ``p50 ms``, ``p99 ms``."""
        by_kind = self.frame().groupby("kind", sort=False)["seconds"]
        return pd.DataFrame({"queries": by_kind.size(), "p50 ms": by_kind.median() * 1e3,
                             "p99 ms": by_kind.quantile(0.99) * 1e3}).round(3)
