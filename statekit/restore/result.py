"""What a restore built: the stores by partition, a report, the events, the progress.

``restore_stores`` (``statekit.restore.rebuild``) returns a ``RestoreResult``: close it
(or use it in a ``with`` block) to close the stores. Partitions restore together, so
how long a restore took on the clock is ``wall_seconds``, not the sum of the report's
``seconds``.

Example:
    >>> t = pd.Timestamp("2026-01-05 10:00:00")
    >>> report = pd.DataFrame([[0, 0, 40, 40, 0.25, 160.0, t, t + pd.Timedelta("250ms")]],
    ...                       columns=REPORT_COLUMNS)
    >>> with RestoreResult({}, report) as result:
    ...     result.wall_seconds, len(result.table())
    (0.25, 0)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from statekit._lazy import pd
from statekit.stores import StateStore

REPORT_COLUMNS = ["partition", "start_offset", "end_offset", "records", "seconds",
                  "records_per_s", "started", "finished"]


def wall_seconds(report: pd.DataFrame) -> float:
    """How long a restore took on the clock: from the first partition's start to the last
    one's end. Partitions restore together (one consumer, all assigned), so the sum of their
    ``seconds`` overstates it.

    Example:
        >>> t = pd.Timestamp("2026-01-05 10:00:00")
        >>> report = pd.DataFrame({"seconds": [0.3, 0.25], "started": [t, t],
        ...                        "finished": [t + pd.Timedelta("300ms"),
        ...                                     t + pd.Timedelta("250ms")]})
        >>> wall_seconds(report)   # not 0.55
        0.3
    """
    if report.empty:
        return 0.0
    return float((report["finished"].max() - report["started"].min()).total_seconds())


@dataclass
class RestoreResult:
    """What a restore built: the stores by partition, a report, the listener events and each
    partition's last progress (``RestoreProgress.frame``: rates, offsets)."""

    stores: dict[int, StateStore]
    report: pd.DataFrame
    events: pd.DataFrame = field(default_factory=lambda: pd.DataFrame())
    progress: pd.DataFrame = field(default_factory=lambda: pd.DataFrame())

    @property
    def wall_seconds(self) -> float:
        """Seconds from the first partition's start to the last one's end (``wall_seconds``)."""
        return wall_seconds(self.report)

    def table(self) -> pd.DataFrame:
        """All partitions' contents in one frame (with ``partition``), like ``snapshot()``."""
        frames = [store.to_pandas().assign(partition=p) for p, store in self.stores.items()]
        frames = [f for f in frames if len(f)]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    def close(self) -> None:
        for store in self.stores.values():
            store.close()

    def __enter__(self) -> RestoreResult:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
