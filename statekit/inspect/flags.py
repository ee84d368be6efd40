"""What looks wrong in a checkpoint, each a ``Flag`` naming its evidence: a stalled watermark,
state that only grows, a skewed partition, slow commits (and damaged files, by their kind).

``statekit.inspect.describe`` gathers the data and runs these rules; its docstring says
what each flag means.

Example:
    >>> import pandas as pd
    >>> progress = pd.DataFrame({"batch": [3], "duration_ms": [100], "state_commit_ms": [80]})
    >>> slow_commits(progress, commit_share=0.5).name
    'slow_commit'
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from statekit.spark_state.problems import PROBLEM_KINDS

FLAG_NAMES = ("stalled_watermark", "growing_state", "skewed_partition", "slow_commit",
              *PROBLEM_KINDS)


@dataclass(frozen=True)
class Flag:
    """Something that looks wrong: its ``name`` (one of ``FLAG_NAMES``), the operator it is
    about (None for the whole query: the watermark, commit times) and the evidence."""

    name: str
    operator: int | None
    message: str
    #: the file or folder at fault (damaged-file flags), else None
    path: str | None = None

    def __str__(self) -> str:
        where = "query" if self.operator is None else f"operator {self.operator}"
        return f"{self.name} ({where}): {self.message}"


def stalled_watermark(watermarks: pd.DataFrame, stall_batches: int) -> Flag | None:
    """``stalled_watermark`` from the offset log's watermarks (see the module's docstring)."""
    committed = watermarks[watermarks["committed"]]
    if committed.empty or not (committed["watermark_ms"].fillna(0) > 0).any() and not (
            committed["next_watermark_ms"].fillna(0) > 0).any():
        return None
    data = committed[committed["new_data"].fillna(True).astype(bool)]
    if data.empty:
        return None
    # the watermark each data batch ran with, then the one the last commit handed on
    seen = [*data["watermark_ms"].fillna(0).astype("int64"),
            int(committed["next_watermark_ms"].fillna(0).iloc[-1])]
    still = 0
    for before, after in zip(seen[-2::-1], seen[:0:-1], strict=True):
        if before != after:
            break
        still += 1
    if still < stall_batches:
        return None
    since = list(data["batch"])[-still] if still <= len(data) else int(data["batch"].iloc[0])
    mark = pd.to_datetime(seen[-1], unit="ms")
    last = int(committed["batch"].iloc[-1])
    return Flag("stalled_watermark", None,
                f"the watermark stayed at {mark} for the last {still} batches that read data "
                f"(batches {since}..{last}; offset log batchWatermarkMs and the last commit's "
                f"nextBatchWatermarkMs): no window or key older than it can be evicted, so "
                f"state keeps everything since; check the event-time column of the input")


def growing_state(part: pd.Series, totals: pd.Series, deletes: int | None,
                  growth_batches: int) -> Flag | None:
    """``growing_state`` from one part's row totals per batch (index: batch) and its deletes
    over those batches (None when Spark gives no change feed for it)."""
    if len(totals) < 2:
        return None
    steps = totals.diff().dropna()
    rising = int((steps > 0).sum())
    if (steps < 0).any() or rising < growth_batches or (deletes or 0) > 0:
        return None
    first, last = totals.index[0], totals.index[-1]
    removed = ("the change feed has 0 deletes over those batches" if deletes is not None
               else "rows never fell (Spark gives no change feed for this part, so deletes "
                    "were not counted)")
    return Flag("growing_state", int(part["operator_id"]),
                f"{part['what']} {part['name']!r}: state rows rose at {rising} of the "
                f"{len(steps)} batches read, {int(totals.iloc[0]):,} → {int(totals.iloc[-1]):,} "
                f"(batches {first}..{last}), and {removed}: nothing is removed, so state grows "
                f"without bound")


def skewed_partition(part: pd.Series, last: pd.DataFrame, partitions: int, skew_share: float,
                     skew_min_rows: int) -> Flag | None:
    """``skewed_partition`` from one part's rows per partition after its last batch read."""
    total = int(last["rows"].sum())
    if partitions < 2 or total < skew_min_rows:
        return None
    top = last.sort_values(["rows", "partition"], ascending=[False, True]).iloc[0]
    share = int(top["rows"]) / total
    if share < skew_share or share < 2 / partitions:
        return None
    return Flag("skewed_partition", int(part["operator_id"]),
                f"{part['what']} {part['name']!r}: partition {int(top['partition'])} holds "
                f"{int(top['rows']):,} of {total:,} rows ({share:.0%}) after batch "
                f"{int(top['batch'])}; an even spread over {partitions} partitions is "
                f"{1 / partitions:.0%} each: one task does most of the state work")


def slow_commits(progress: pd.DataFrame, commit_share: float) -> Flag | None:
    """``slow_commit`` from progress reports (state commit time against batch time)."""
    frame = progress.dropna(subset=["duration_ms", "state_commit_ms"])
    frame = frame[frame["duration_ms"] > 0]
    share = frame["state_commit_ms"] / frame["duration_ms"]
    slow = frame[share >= commit_share]
    if slow.empty:
        return None
    worst = slow.loc[(slow["state_commit_ms"] / slow["duration_ms"]).idxmax()]
    batches = ", ".join(str(int(b)) for b in slow["batch"][:10])
    more = f" (and {len(slow) - 10} more)" if len(slow) > 10 else ""
    return Flag("slow_commit", None,
                f"in {len(slow)} of {len(frame)} batches ({batches}{more}) the state commit "
                f"took {commit_share:.0%} or more of the batch (progress: stateOperators "
                f"commitTimeMs against durationMs.triggerExecution); worst: batch "
                f"{int(worst['batch'])}, {int(worst['state_commit_ms'])} of "
                f"{int(worst['duration_ms'])} ms")

