"""What an attached handle hears of its query's progress: the reports the session's listener
hands it (``statekit.spark.progress_listener``) with what Spark's ``recentProgress`` still
holds, as frames (``progress``, ``operator_progress``, ``watermark_lag``), growth flags
(``growing_operators``) and all of them at once (``health``).

``FollowedProgress`` is a mixin of ``AttachedQuery`` (``statekit.live.handle``), which
follows the query and keeps ``_reports`` under ``_reports_lock``; each report also wakes
the handle's changelog writers (``changelogs``: a batch committed, ship it now).

Example:
    >>> live = sk.attach(query)                                   # doctest: +SKIP
    >>> live.health().summary()                                   # doctest: +SKIP
    'batch 12 · running · 0 dedupe: 40 rows, 1.0 MiB (only grows)'
"""

from __future__ import annotations

import contextlib
import json
import threading

import pandas as pd

from statekit.live.health import Health, growing_operators, operator_frame, watermark_lag
from statekit.spark_state.progress import progress_frame
from statekit.validate import batch_id


class FollowedProgress:
    """The progress verbs of an attached handle, read from the reports it heard."""

    _reports: dict[int, dict]
    _reports_lock: threading.Lock
    changelogs: dict  # part -> ChangelogWriter (statekit.live.shipped_parts)

    def _hear(self, progress) -> None:
        """One report from the session's listener (on Spark's listener thread)."""
        data = json.loads(progress.json)
        with self._reports_lock:
            self._reports[int(data["batchId"])] = data
        for writer in list(self.changelogs.values()):
            writer.wake()  # a batch committed: its changelogs ship it now

    def _report_dicts(self) -> dict[int, dict]:
        """Every report heard, with what ``recentProgress`` still holds (a report Spark
        gave before this handle followed the query, or one a Connect listener missed)."""
        with contextlib.suppress(Exception):  # a stopped Connect query may no longer answer
            for report in self.query.recentProgress:
                data = json.loads(report.json) if hasattr(report, "json") else dict(report)
                with self._reports_lock:
                    self._reports.setdefault(int(data["batchId"]), data)
        with self._reports_lock:
            return dict(self._reports)

    def _reports_in_order(self) -> list[dict]:
        """Every report kept, by batch (Spark's ``recentProgress`` read once)."""
        kept = self._report_dicts()
        return [kept[b] for b in sorted(kept)]

    def progress(self) -> pd.DataFrame:
        """One row per batch Spark reported since this session saw the query (its
        ``recentProgress``, and every report since attaching): rows in, state rows over all
        operators, durations, watermark (``statekit.spark_state.progress`` columns)."""
        self._require_attached()
        return progress_frame(self._reports_in_order())

    def operator_progress(self) -> pd.DataFrame:
        return self._operator_frame(self._reports_in_order())

    def _operator_frame(self, reports: list[dict]) -> pd.DataFrame:
        """One row per batch and stateful operator, from Spark's reports
        (``statekit.live.health.operator_frame``): ``batch``, ``operator_id``, ``position``,
        ``operator`` (Spark's name), ``rows``, ``rows_updated``, ``rows_removed`` (evicted or
        expired), ``dropped_by_watermark``, ``memory_bytes``, ``commit_ms``.

        Spark lists a batch's operators in plan order, which is the order of their ids; the
        ids come from the state metadata where the names agree (NA otherwise)."""
        self._require_attached()
        frame = operator_frame(reports)
        names = {}
        if self.checkpoint.committed_batches() and self.checkpoint.operator_ids():
            names = {p.operator_id: p.operator for p in self._part_list()}
        same = all(names.get(pos) == name for pos, name in
                   zip(frame["position"], frame["operator"], strict=True))
        ids = frame["position"] if same and names else pd.array([pd.NA] * len(frame),
                                                                dtype="Int64")
        frame.insert(1, "operator_id", pd.array(ids, dtype="Int64"))
        return frame

    def growing_operators(self, batches: int = 3) -> pd.DataFrame:
        """The operators whose state only grew over the last ``batches`` batches (rows never
        down, up overall, none removed): ``operator_id``, ``operator``, ``rows`` now. Such
        state has no watermark or TTL to bound it, or keys without end."""
        return _growing(self.operator_progress(), batch_id(batches, "batches"))

    def watermark_lag(self) -> pd.DataFrame:
        """Per batch, how far the watermark trails the latest event time Spark saw
        (``statekit.live.health.watermark_lag``)."""
        self._require_attached()
        return watermark_lag(self._reports_in_order())

    def health(self, batches: int = 3) -> Health:
        """Progress, operators, growth flags, watermark lag and changelog lag, read at once
        from the same reports (what the live dashboard draws; ``Health.summary()`` says it
        in a line)."""
        self._require_attached()
        batches = batch_id(batches, "batches")
        active, last = self.is_active, self.last_batch
        reports = self._reports_in_order()
        operators = self._operator_frame(reports)
        return Health(last, active, progress_frame(reports), operators,
                      _growing(operators, batches), watermark_lag(reports),
                      self.changelog_lag())


def _growing(operators: pd.DataFrame, batches: int) -> pd.DataFrame:
    """``growing_operators`` of an operator frame, as rows: ``operator_id``, ``operator``,
    ``rows`` at the last batch."""
    flagged = growing_operators(operators, batches)
    last = operators[operators["position"].isin(flagged)].groupby("position").tail(1)
    return last[["operator_id", "operator", "rows"]].reset_index(drop=True)
