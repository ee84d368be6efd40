"""A checkpoint summed up for a person: one table, the data of a few charts, and flags.

``describe(view)`` (``CheckpointView.describe()``) reads the offset and commit logs and the
state of the last few committed batches, then flags what looks wrong (the rules:
``statekit.inspect.flags``). Each flag is computed from what the checkpoint holds, and its
message names the evidence:

- ``stalled_watermark`` — from the offset log (the watermark each batch ran with) and the
  last commit (the watermark it handed on): the watermark has not moved for
  ``stall_batches`` batches in a row that read new data. Only for queries with an event-time
  watermark (some batch ran with a watermark after 1970-01-01); a query without one has
  nothing to stall, and unbounded state there shows as ``growing_state``.
- ``growing_state`` — from state row counts after each batch read (Spark's ``statestore``
  reader) and, where Spark offers one, the change feed: over the batches read, rows never
  fell and rose at ``growth_batches`` batches or more, and nothing was deleted (a part with
  no change feed — a join side, timers, RocksDB without changelog checkpointing — is judged
  from its counts alone, and the message says so).
- ``skewed_partition`` — from the row counts per partition after the last batch read: one
  partition holds at least ``skew_share`` of the rows and at least twice an even share
  (``1 / partitions``), with ``skew_min_rows`` rows or more in all.
- damaged files — one flag per problem ``statekit.spark_state.integrity.checkpoint_problems``
  finds, named after its kind (``not_a_folder``, ``commit_log_gap``, ``offset_log_gap``,
  ``missing_state``, ``missing_partition``, ``missing_delta``, ``no_checksum``,
  ``corrupt_file``), its message naming the file or folder (and what to do, for Spark's
  log files). Every log and state file is read once for this. A part whose state then
  cannot be read is left out of the table (``notes`` say why); the flags still stand.
- ``slow_commit`` — the checkpoint does not record how long a state commit took (Spark
  writes no timing into its logs or state files), so this flag needs progress reports:
  pass ``progress`` (``query.recentProgress``, a list of progress dicts or a frame from
  ``statekit.spark_state.progress.progress_frame``); a batch is flagged when its state operators'
  ``commitTimeMs`` is at least ``commit_share`` of its ``triggerExecution`` time. Without
  progress, ``Description.notes`` says the flag was not checked.

A ``Description`` holds data only (this layer draws nothing): ``table``, ``flags``,
``rows`` (rows per partition per batch, what the charts draw), ``watermarks`` and ``notes``.
In Jupyter it shows its flags and table; ``statekit.charts.inspect.describe_chart(d)``
draws its charts (rows per partition, state rows per batch, skew across partitions).

Example:
    >>> d = open_checkpoint("/tmp/ck").describe(batches=10)             # doctest: +SKIP
    >>> [f.name for f in d.flags]                                        # doctest: +SKIP
    ['stalled_watermark', 'growing_state']
    >>> print(d.flags[0].message)                                        # doctest: +SKIP
    the watermark stayed at 2026-01-05 10:00:00 for the last 6 batches that read data ...
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pandas as pd

from statekit.errors import BadArgument, CheckpointError, StatekitError
from statekit.inspect.flags import (
    Flag,
    growing_state,
    skewed_partition,
    slow_commits,
    stalled_watermark,
)
from statekit.spark_state.integrity import checkpoint_problems, is_stateful
from statekit.spark_state.progress import progress_frame
from statekit.validate import whole_number

if TYPE_CHECKING:
    from statekit.inspect.part_views import StateView
    from statekit.inspect.view import CheckpointView

TABLE_COLUMNS = ["operator_id", "operator", "kind", "part", "partitions", "first_batch",
                 "batch", "rows_first", "rows", "deletes", "largest_partition",
                 "largest_share", "state_file_bytes", "flags"]
ROW_COLUMNS = ["operator_id", "part", "batch", "partition", "rows"]
WATERMARK_COLUMNS = ["batch", "committed", "new_data", "watermark", "next_watermark"]

@dataclass
class Description:
    """What ``CheckpointView.describe()`` found (data only; see the module's docstring).

    Attributes:
        checkpoint: the checkpoint's path.
        table: one row per operator part read (``TABLE_COLUMNS``).
        flags: what looks wrong (``Flag`` objects), empty when nothing does.
        rows: state rows per partition after each batch read (``ROW_COLUMNS``; partitions
            with no row have 0), the data behind the charts.
        watermarks: per batch of the offset log: ``batch``, ``committed``, ``new_data``,
            ``watermark``, ``next_watermark``.
        progress: the progress frame used for ``slow_commit`` (None when not given).
        notes: what was not checked, and why.
    """

    checkpoint: str
    table: pd.DataFrame
    flags: list[Flag]
    rows: pd.DataFrame
    watermarks: pd.DataFrame
    progress: pd.DataFrame | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def flag_names(self) -> list[str]:
        """The flags' names, in order (one per operator flagged)."""
        return [f.name for f in self.flags]

    def __repr__(self) -> str:
        lines = [f"Description of {self.checkpoint!r}: {len(self.table)} state part(s), "
                 f"{len(self.flags)} flag(s)"]
        lines += [f"  ! {f}" for f in self.flags]
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        if self.flags:
            items = "".join(f"<li><b>{html.escape(f.name)}</b> "
                            f"({'query' if f.operator is None else f'operator {f.operator}'})"
                            f": {html.escape(f.message)}</li>" for f in self.flags)
            flags = (f"<p style='color:#b35900'>&#9888; {len(self.flags)} flag(s)</p>"
                     f"<ul>{items}</ul>")
        else:
            flags = "<p style='color:#1a7f37'>&#10003; no flags</p>"
        notes = "".join(f"<p><i>note: {html.escape(n)}</i></p>" for n in self.notes)
        return (f"<div><p><b>Checkpoint</b> <code>{html.escape(self.checkpoint)}</code></p>"
                f"{flags}{self.table.to_html(index=False)}{notes}</div>")

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict[str, str]:
        return {"text/plain": repr(self), "text/html": self._repr_html_()}


def _positive(value: object, what: str) -> int:
    return whole_number(value, what, minimum=1)


def _share(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise BadArgument(what, value, "a number above 0 and at most 1")
    return float(value)


def _progress(progress: object) -> pd.DataFrame | None:
    """A progress frame (``progress_frame``'s columns) from what the caller gave."""
    if progress is None:
        return None
    if isinstance(progress, pd.DataFrame):
        frame = progress
    elif isinstance(progress, Iterable) and not isinstance(progress, (str, bytes, dict)):
        reports = []
        for report in progress:
            if isinstance(report, dict):
                reports.append(report)
            elif hasattr(report, "jsonValue"):  # pyspark's StreamingQueryProgress
                reports.append(report.jsonValue())
            else:
                raise BadArgument("progress report", type(report).__name__,
                                  "a progress dict or StreamingQueryProgress")
        frame = progress_frame(reports)
    else:
        raise BadArgument("progress", type(progress).__name__,
                          "query.recentProgress, a list of progress dicts, a frame from "
                          "progress_frame, or None")
    missing = [c for c in ("batch", "duration_ms", "state_commit_ms") if c not in frame]
    if missing:
        raise BadArgument("progress frame columns", sorted(frame.columns),
                          "a frame from statekit.spark_state.progress.progress_frame (needs batch, "
                          "duration_ms, state_commit_ms)")
    return frame


def _watermarks(view: CheckpointView) -> pd.DataFrame:
    batches = view.batches()
    return batches[WATERMARK_COLUMNS + ["watermark_ms", "next_watermark_ms"]].copy()


def _parts_to_count(view: CheckpointView) -> pd.DataFrame:
    """The parts whose rows are counted: a join's sides (not its four raw stores), every
    part of the other operators."""
    states = view.states()
    raw_join_stores = (states["kind"] == "join") & (states["what"] == "store")
    return states[~raw_join_stores].reset_index(drop=True)


def _batches_to_read(view: CheckpointView, state: StateView, batches: int) -> list[int]:
    committed = view.retained_batches()
    span = state.batch_span
    if span is not None:
        committed = [b for b in committed if span[0] <= b <= span[1]]
    return committed[-batches:]


def _deletes(state: StateView, chosen: list[int]) -> int | None:
    if len(chosen) < 2 or state.part.changes_limit() is not None:
        return None
    try:
        counts = state.change_counts(chosen[1], chosen[-1])
    except StatekitError:
        return None
    return int(counts.loc[counts["change"] == "delete", "records"].sum())


def _file_bytes(view: CheckpointView) -> dict[tuple[int, str], int]:
    try:
        files = view.state_files()
    except CheckpointError:
        return {}
    return {(int(o), str(s)): int(b) for (o, s), b in
            files.groupby(["operator_id", "store"])["bytes"].sum().items()}


def describe(view: CheckpointView, batches: int = 10, stall_batches: int = 3,
             growth_batches: int = 3, skew_share: float = 0.5, skew_min_rows: int = 20,
             commit_share: float = 0.5, progress: object = None) -> Description:
    """Sum up ``view``'s checkpoint: see the module's docstring for each flag.

    Args:
        batches: how many of the last committed batches to read state of (>= 1).
        stall_batches: data batches in a row with an unmoved watermark that make
            ``stalled_watermark`` (>= 1).
        growth_batches: batches with more rows (and none with fewer) that make
            ``growing_state`` (>= 1).
        skew_share: the share of rows one partition must hold for ``skewed_partition``.
        skew_min_rows: below this many rows, no part is called skewed.
        commit_share: the share of a batch's time a state commit must take for
            ``slow_commit``.
        progress: progress reports (``query.recentProgress``, a list of progress dicts, or
            a ``progress_frame``) for ``slow_commit``; None skips that flag (noted).
    """
    batches = _positive(batches, "batches")
    stall_batches = _positive(stall_batches, "stall_batches")
    growth_batches = _positive(growth_batches, "growth_batches")
    skew_min_rows = whole_number(skew_min_rows, "skew_min_rows", minimum=0)
    skew_share = _share(skew_share, "skew_share")
    commit_share = _share(commit_share, "commit_share")
    progress_data = _progress(progress)

    flags: list[Flag] = [Flag(p.kind, p.operator_id, str(p), p.path)
                         for p in checkpoint_problems(view.checkpoint,
                                                      is_stateful(view.checkpoint))]
    notes: list[str] = []
    try:
        watermarks = _watermarks(view)
    except CheckpointError as exc:
        notes.append(f"the offset and commit logs could not be read: {exc}")
        watermarks = pd.DataFrame(columns=[*WATERMARK_COLUMNS, "watermark_ms",
                                           "next_watermark_ms"])
    stalled = stalled_watermark(watermarks, stall_batches)
    if stalled is not None:
        flags.append(stalled)

    operators_read = True
    try:
        operators = view.operators()
    except CheckpointError as exc:
        notes.append(f"the stateful operators could not be read: {exc}")
        operators = pd.DataFrame(columns=["operator_id", "partitions", "store"])
        operators_read = False
    partitions_of = {int(o): int(p) for o, p in
                     operators.groupby("operator_id")["partitions"].first().items()}
    file_bytes = _file_bytes(view)
    table_rows, row_frames = [], []
    for _, part in (_parts_to_count(view).iterrows() if len(operators) else []):
        operator_id = int(part["operator_id"])
        try:
            state = view.state(part["name"], operator_id)
            chosen = _batches_to_read(view, state, batches)
            counted = state.partition_rows(chosen) if chosen else None
        except CheckpointError as exc:
            notes.append(f"operator {operator_id} {part['what']} {part['name']!r} not read: "
                         f"{exc}")
            continue
        if counted is None:
            notes.append(f"operator {operator_id} {part['what']} {part['name']!r}: no "
                         f"committed batch of its state is retained; not read")
            continue
        partitions = partitions_of[operator_id]
        grid = pd.MultiIndex.from_product([chosen, range(partitions)],
                                          names=["batch", "partition"])
        counted = (counted.set_index(["batch", "partition"])["rows"]
                   .reindex(grid, fill_value=0).reset_index())
        counted.insert(0, "part", str(part["name"]))
        counted.insert(0, "operator_id", operator_id)
        row_frames.append(counted)
        totals = counted.groupby("batch")["rows"].sum()
        deletes = _deletes(state, chosen)
        last = counted[counted["batch"] == chosen[-1]]
        found = [f for f in (growing_state(part, totals, deletes, growth_batches),
                             skewed_partition(part, last, partitions, skew_share,
                                              skew_min_rows)) if f is not None]
        flags += found
        top = last.sort_values(["rows", "partition"], ascending=[False, True]).iloc[0]
        total = int(totals.iloc[-1])
        table_rows.append({
            "operator_id": operator_id, "operator": part["operator"], "kind": part["kind"],
            "part": str(part["name"]), "partitions": partitions, "first_batch": chosen[0],
            "batch": chosen[-1], "rows_first": int(totals.iloc[0]), "rows": total,
            "deletes": deletes, "largest_partition": int(top["partition"]),
            "largest_share": round(int(top["rows"]) / total, 3) if total else None,
            "state_file_bytes": file_bytes.get((operator_id, str(part["store"]))),
            "flags": ", ".join(f.name for f in found)})
    if stalled is not None:
        for row in table_rows:
            row["flags"] = ", ".join(n for n in ("stalled_watermark", row["flags"]) if n)

    if progress_data is None:
        notes.append("slow_commit not checked: the checkpoint does not record how long state "
                     "commits took; pass progress=query.recentProgress (Spark's progress "
                     "reports: stateOperators[].commitTimeMs)")
    else:
        slow = slow_commits(progress_data, commit_share)
        if slow is not None:
            flags.append(slow)
    if operators_read and operators.empty and not any(f.name == "missing_state" for f in flags):
        notes.append("the query keeps no state: only its logs were read")

    table = pd.DataFrame(table_rows, columns=TABLE_COLUMNS).astype(
        {"deletes": "Int64", "state_file_bytes": "Int64"})
    rows = (pd.concat(row_frames, ignore_index=True) if row_frames
            else pd.DataFrame(columns=ROW_COLUMNS))
    return Description(view.path, table, flags, rows[ROW_COLUMNS],
                       watermarks[WATERMARK_COLUMNS], progress_data, notes)
