"""How each stateful operator of an attached query is doing, batch by batch: pure functions
from Spark's progress reports to frames and flags.

Spark reports, per batch, one entry per stateful operator (``stateOperators``): rows held,
rows updated, rows removed (evicted by the watermark, or expired by a TTL), rows dropped as
late, memory. ``operator_frame`` turns them into one row per (batch, operator);
``growing_operators`` flags an operator whose state only grows (rows never down over the
last batches, up overall, and nothing removed: no watermark, or a key space without end),
the classic cause of a state store that fills a disk; ``watermark_lag`` is how far the
watermark trails the latest event time Spark saw.

Example:
    >>> reports = [{"batchId": b, "eventTime": {"max": "2026-01-01T12:10:00.000Z",
    ...             "watermark": "2026-01-01T12:00:00.000Z"},
    ...             "stateOperators": [{"operatorName": "dedupe", "numRowsTotal": 10 * (b + 1),
    ...                                 "numRowsRemoved": 0, "memoryUsedBytes": 100}]}
    ...            for b in range(4)]
    >>> frame = operator_frame(reports)
    >>> frame[["batch", "operator", "rows"]].tail(2).values.tolist()
    [[2, 'dedupe', 30], [3, 'dedupe', 40]]
    >>> growing_operators(frame)
    [0]
    >>> watermark_lag(reports)["lag_s"].tolist()
    [600.0, 600.0, 600.0, 600.0]
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from statekit.spark_state.times import iso_times

OPERATOR_COLUMNS = ["batch", "position", "operator", "rows", "rows_updated", "rows_removed",
                    "dropped_by_watermark", "memory_bytes", "commit_ms"]
_FIELDS = {"rows": "numRowsTotal", "rows_updated": "numRowsUpdated",
           "rows_removed": "numRowsRemoved", "dropped_by_watermark": "numRowsDroppedByWatermark",
           "memory_bytes": "memoryUsedBytes", "commit_ms": "commitTimeMs"}


def operator_frame(reports: Iterable[Mapping]) -> pd.DataFrame:
    """One row per batch and stateful operator, from progress reports (dicts, Spark's JSON):
    ``batch``, ``position`` (the operator's place in the report), ``operator`` (Spark's
    name), then ``OPERATOR_COLUMNS``' counts (nullable integers: NA where Spark left one out).
    """
    rows = []
    for report in reports:
        for position, op in enumerate(report.get("stateOperators") or []):
            rows.append([report["batchId"], position, op.get("operatorName"),
                         *(op.get(field) for field in _FIELDS.values())])
    frame = pd.DataFrame(rows, columns=OPERATOR_COLUMNS)
    frame = frame.astype({c: "Int64" for c in OPERATOR_COLUMNS if c != "operator"})
    return frame.drop_duplicates(["batch", "position"], keep="last").sort_values(
        ["batch", "position"], ignore_index=True)


def growing_operators(frame: pd.DataFrame, batches: int = 3) -> list[int]:
    """Positions of the operators whose rows never fell over the last ``batches`` batches that
    reported them, rose over them, and had nothing removed (``operator_frame``'s frame)."""
    flagged = []
    for position, rows in frame.groupby("position", sort=True):
        last = rows.sort_values("batch").tail(batches + 1)
        if len(last) < batches + 1:
            continue
        steps = last["rows"].diff().iloc[1:]
        removed = int(last["rows_removed"].iloc[1:].fillna(0).sum())
        if (steps >= 0).all() and steps.sum() > 0 and removed == 0:
            flagged.append(int(position))
    return flagged


def watermark_lag(reports: Sequence[Mapping]) -> pd.DataFrame:
    """Per batch: ``batch``, ``max_event_time``, ``watermark``, ``lag_s`` (seconds the
    watermark trails the latest event time seen in the batch; NA without either)."""
    batches = [r["batchId"] for r in reports]
    times = [r.get("eventTime") or {} for r in reports]
    frame = pd.DataFrame({"batch": pd.array(batches, dtype="Int64"),
                          "max_event_time": iso_times([t.get("max") for t in times]),
                          "watermark": iso_times([t.get("watermark") for t in times])})
    frame["lag_s"] = (frame["max_event_time"] - frame["watermark"]).dt.total_seconds()
    return frame


@dataclass(frozen=True)
class Health:
    """One reading of an attached query, all from the same progress reports
    (``AttachedQuery.health()``; what its live dashboard draws).

    Attributes:
        last_batch: the last committed batch when read.
        active: whether the query was running.
        progress: one row per batch (``statekit.spark_state.progress`` columns).
        operators: one row per batch and operator (``AttachedQuery.operator_progress``).
        growing: the operators whose state only grew (``operator_id``, ``operator``,
            ``rows``), see ``growing_operators``.
        watermark_lag: per batch, seconds the watermark trails the latest event time.
        changelog_lag: per shipped part, batches its changelog is behind (no rows when
            nothing is shipped).
    """

    last_batch: int
    active: bool
    progress: pd.DataFrame
    operators: pd.DataFrame
    growing: pd.DataFrame
    watermark_lag: pd.DataFrame
    changelog_lag: pd.DataFrame

    def summary(self) -> str:
        """One line: the batch, and per operator its rows and memory at the last batch it
        reported, flagged when it only grows; the changelogs' lag.

        Example:
            >>> ops = pd.DataFrame({"batch": [3], "operator_id": [0], "operator": ["dedupe"],
            ...                     "rows": [40], "memory_bytes": [2**20]})
            >>> empty = pd.DataFrame()
            >>> lag = pd.DataFrame({"part": ["0/default"], "batches_behind": [1]})
            >>> for line in Health(3, True, empty, ops, ops, empty, lag).summary().split(" · "):
            ...     print(line)
            batch 3
            running
            0 dedupe: 40 rows, 1.0 MiB (only grows)
            changelogs: 1 batch behind at most
        """
        parts = [f"batch {self.last_batch}", "running" if self.active else "stopped"]
        flagged = set(self.growing["operator_id"].dropna().astype(int)) if len(
            self.growing) else set()
        if len(self.operators):
            last = self.operators.sort_values("batch").groupby("operator_id", dropna=False).tail(1)
            for row in last.itertuples(index=False):
                ident = "?" if pd.isna(row.operator_id) else int(row.operator_id)
                text = f"{ident} {row.operator}: {_count(row.rows)} rows"
                if not pd.isna(row.memory_bytes):
                    text += f", {int(row.memory_bytes) / 2**20:,.1f} MiB"
                if ident in flagged:
                    text += " (only grows)"
                parts.append(text)
        if len(self.changelog_lag):
            behind = int(self.changelog_lag["batches_behind"].max())
            parts.append(f"changelogs: {behind} batch{'es' if behind != 1 else ''} behind "
                         f"at most")
        return " · ".join(parts)


def _count(value: object) -> str:
    return "?" if pd.isna(value) else f"{int(value):,}"
