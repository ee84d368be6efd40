"""Unbounded state: see it grow, and say why.

State that only grows ends in a full disk or a slow restore. Three shapes of
the same aggregate, one ``start_query`` option each, behave differently:

* ``window=None`` — a **running** aggregate per key: one row per key forever, so
  the state grows with every new key and nothing is ever removed;
* ``window=None, ttl="10 minutes"`` — the same with a **TTL** (Spark's
  ``transformWithState``): a key idle for the TTL (processing time) is removed;
* ``window=tumbling(...)`` with a watermark — **windowed**: a window is evicted
  once the watermark passes its end, so the state stays bounded while event time
  moves.

``arriving_users`` is a stream that makes the difference plain: a new user
every few events, each active for a few seconds of event time and never again.
``state_growth`` puts their progress side by side (the chart is
``statekit.charts.state_growth_chart``); ``growth_warning`` looks at one query's
recent batches and, when its state grew with nothing removed, names the cause.

Example:
    >>> import pandas as pd
    >>> progress = pd.DataFrame({"batch": range(6), "input_rows": [100] * 6,
    ...     "state_rows_total": [10, 20, 30, 40, 50, 60], "state_rows_removed": [0] * 6,
    ...     "watermark": pd.to_datetime(["2026-01-05 10:00"] * 6)})
    >>> from statekit.model.query_spec import QuerySpec
    >>> warning = growth_warning(progress, QuerySpec(keys=["player"], window=None))
    >>> warning.split(": ", 1)[0]
    'state grew in each of the last 5 batches (20 to 60 rows) and nothing was removed'
    >>> warning.split(": ", 1)[1].split(";")[0]
    'a running aggregate (no window) keeps every key forever'
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import pandas as pd

from statekit.datasets import Dataset
from statekit.model.query_spec import QuerySpec
from statekit.validate import require_columns, whole_number

COLUMNS = ["query", "batch", "input_rows", "state_rows_total", "state_rows_removed"]
SOURCE = "as StatefulQuery.progress() gives"


#: The JSON events' schema of ``arriving_users``.
USER_EVENT_SCHEMA = "user string, score long, ts timestamp"


def arriving_users(events: int = 3_000, per_user: int = 20,
                   start: str = "2026-01-05 10:00") -> Dataset:
    """A stream where a new user appears every ``per_user`` events and is never seen again:
    one event a second (event time), ``user`` ``u0000``, ``u0001``, ..., ``score`` 0–6.

    Keyed by user; ``schema`` is ``USER_EVENT_SCHEMA``. A running aggregate over it ends
    with ``events // per_user`` rows (one per user, rounded up), whatever the batching.

    Example:
        >>> ds = arriving_users(events=45, per_user=20)
        >>> ds.records["key"].nunique(), ds.records["key"].iloc[-1]
        (3, 'u0002')
    """
    events = whole_number(events, "events", minimum=1)
    per_user = whole_number(per_user, "per_user", minimum=1)
    base = pd.Timestamp(start, tz="UTC")
    ts = base + pd.to_timedelta(range(events), unit="s")
    users = [f"u{i // per_user:04d}" for i in range(events)]
    values = [json.dumps({"user": u, "score": i % 7, "ts": t.strftime("%Y-%m-%dT%H:%M:%SZ")})
              for i, (u, t) in enumerate(zip(users, ts, strict=True))]
    records = pd.DataFrame({"key": users, "value": values,
                            "timestamp": ts.asi8 // 1_000_000})
    return Dataset("arriving_users", records,
                   f"a new user every {per_user} events, one event a second",
                   USER_EVENT_SCHEMA)


def state_growth(progress: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Several queries' progress in one frame: ``query`` (the mapping's key), ``batch``,
    ``input_rows``, ``state_rows_total``, ``state_rows_removed``."""
    frames = []
    for label, frame in progress.items():
        require_columns(frame, COLUMNS[1:], f"progress of {label!r}", SOURCE)
        frames.append(frame[COLUMNS[1:]].assign(query=label))
    if not frames:
        return pd.DataFrame(columns=COLUMNS)
    return pd.concat(frames, ignore_index=True)[COLUMNS]


def growth_warning(progress: pd.DataFrame, spec: QuerySpec | None = None,
                   batches: int = 5) -> str | None:
    """A warning naming the cause when state grew in each of the last ``batches`` batches
    that had input, with nothing removed; None when the state looks bounded."""
    require_columns(progress, ("batch", "input_rows", "state_rows_total",
                               "state_rows_removed"), "progress", SOURCE)
    batches = whole_number(batches, "batches", minimum=2)
    busy = progress[progress["input_rows"] > 0].sort_values("batch")
    recent = busy.tail(batches)
    if len(recent) < batches:
        return None
    rows = recent["state_rows_total"].to_numpy()
    grew = (rows[1:] > rows[:-1]).all() and rows[-1] > rows[0]
    if not grew or recent["state_rows_removed"].sum() > 0:
        return None
    head = (f"state grew in each of the last {batches} batches ({rows[0]:,} to {rows[-1]:,} "
            f"rows) and nothing was removed: ")
    if spec is not None and spec.kind == "running" and spec.ttl is None:
        return head + ("a running aggregate (no window) keeps every key forever; bound it "
                       "with a TTL (ttl=\"...\") or aggregate per window with a watermark")
    if spec is not None and spec.ttl is not None:
        return head + (f"every key is updated within the TTL ({spec.ttl}) or new keys keep "
                       f"arriving; a shorter TTL bounds it sooner")
    if "watermark" in recent.columns:
        marks = pd.to_datetime(recent["watermark"])
        if marks.notna().all() and marks.nunique() == 1:
            return head + (f"the watermark has not moved for {batches} batches (it stays at "
                           f"{marks.iloc[-1]}): event time stalled — no newer events arrive, "
                           f"or, with several input streams, an idle one holds it back "
                           f"(spark.sql.streaming.multipleWatermarkPolicy=min) — so no "
                           f"window is evicted")
    if spec is not None and spec.window is not None:
        return head + (f"no window has closed yet: windows end only once the watermark "
                       f"(delay {spec.watermark}) passes their end")
    return head + "no state row has been removed"
