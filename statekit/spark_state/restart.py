"""Spark's own restore after a restart, as a timeline: snapshot load, delta replay, first batch.

When a query restarts from its checkpoint, every state store partition is cold:
its first task loads the newest snapshot ``<= V`` (``V`` = the version to resume
from), opens RocksDB on it and replays the delta files (``N.changelog``) after it, up to ``V``. The
driver of a statekit Spark session logs that work (logger
``org.apache.spark.sql.execution.streaming.state``, see
``statekit.spark.session.state_store_log``); ``statekit.spark_state.store_log``
reads that log back, and this module makes of it:

- ``restart_timeline``: per partition, the phases of its first load in one run (from
  ``state_store_events``), plus the run's first batch (from the progress JSON statekit
  keeps), cross-checked with the files in the checkpoint
  (``statekit.spark_state.spark_files.restore_plan``);
- ``restart_summary``: one row per partition.

Example:
    >>> restart_timeline("/tmp/ck", state_store_log(), since=mark)   # doctest: +SKIP
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from statekit.errors import CheckpointError
from statekit.spark.object_store import ObjectPath, missing_error
from statekit.spark_state.checkpoint import Checkpoint
from statekit.spark_state.spark_files import restore_plan, state_files
from statekit.spark_state.store_log import REMEDY, state_store_events
from statekit.validate import require_columns

TIMELINE_COLUMNS = ["partition", "phase", "start", "end", "seconds", "detail", "operator_id",
                    "store", "run_id", "version", "snapshot_version", "delta_files",
                    "plan_snapshot_version", "plan_delta_files", "matches_plan"]
PHASES = ("load snapshot", "replay deltas", "first batch")
QUERY_ROW = -1  # ``partition`` of the query-wide 'first batch' row


# --- the progress of a run ------------------------------------------------------------------
def _progress(checkpoint: Path | ObjectPath) -> pd.DataFrame:
    """runId, batch, start, end and the first state operator's metrics of every report."""
    rows = []
    # statekit's progress recorder keeps them beside the checkpoint (statekit.query.running)
    for report in Checkpoint(checkpoint).progress_reports():
        ops = report.get("stateOperators") or [{}]
        duration = report.get("batchDuration",
                              (report.get("durationMs") or {}).get("triggerExecution"))
        rows.append((report.get("runId"), report.get("batchId"), report.get("timestamp"),
                     duration, ops[0].get("customMetrics") or {}))
    frame = pd.DataFrame(rows, columns=["run_id", "batch", "start", "ms", "metrics"])
    frame["start"] = pd.to_datetime(frame["start"], utc=True, format="ISO8601") \
        .dt.tz_localize(None).astype("datetime64[ns]")
    frame["end"] = frame["start"] + pd.to_timedelta(frame["ms"].astype("float64"), unit="ms")
    return frame.sort_values(["start", "batch"], ignore_index=True)


def _pick_run(progress: pd.DataFrame, loads: pd.DataFrame, run_id: str | None) -> str | None:
    if run_id is not None:
        return str(run_id)
    logged = set(loads["run_id"].dropna())
    runs = list(dict.fromkeys(progress["run_id"].dropna()))  # oldest first
    for run in reversed(runs):
        if run in logged:
            return run
    if runs:
        return runs[-1]
    named = loads["run_id"].dropna()
    return named.iloc[-1] if len(named) else None


# --- the timeline ---------------------------------------------------------------------------
def _first_load(events: pd.DataFrame) -> dict | None:
    """The first load of one store partition: its events by name (times and values)."""
    starts = events.index[events["event"] == "load start"]
    if not len(starts):
        return None
    start = events.loc[starts[0]]
    after = events.loc[starts[0]:]
    done = after[(after["event"] == "loaded") & (after["version"] == start["version"])]
    if len(done):
        after = after.loc[:done.index[0]]
    found = {"load start": start, "loaded": done.iloc[0] if len(done) else None}
    for event in ("load snapshot", "snapshot copied", "opened", "replay"):
        hits = after[after["event"] == event]
        found[event] = hits.iloc[0] if len(hits) else None
    found["replay files"] = after.loc[after["event"] == "replay file", "version"].tolist()
    return found


def _range_text(first: int, last: int) -> str:
    return f"delta {first}" if first == last else \
        f"deltas {first}-{last} ({last - first + 1} files)"


def _plans(checkpoint: Path, loads: dict) -> dict:
    """(operator, partition) → (snapshot version or None, delta files, snapshot file name)."""
    plans, listings = {}, {}
    for (operator, store, partition), version in loads.items():
        if store != "default":
            continue
        if operator not in listings:
            try:
                listings[operator] = state_files(checkpoint, operator)
            except CheckpointError:
                listings[operator] = None
        files = listings[operator]
        if files is None:
            continue
        mine = files[files["partition"] == partition]
        if mine.empty:
            continue
        try:
            plan = restore_plan(mine, version)
        except CheckpointError:  # a file it needs was cleaned up since
            continue
        if len(plan):
            row = plan.iloc[0]
            snap = None if pd.isna(row["snapshot_version"]) else int(row["snapshot_version"])
            name = None if row["snapshot_file"] is None else Path(row["snapshot_file"]).name
            plans[(operator, partition)] = (snap, int(row["delta_files"]), name)
    return plans


def _partition_rows(key: tuple, load: dict, plan: tuple | None, run: str) -> list[dict]:
    operator, store, partition = key
    start, loaded = load["load start"], load["loaded"]
    snap_event, replay = load["load snapshot"], load["replay"]
    version = int(start["version"])
    end = loaded["time"] if loaded is not None else pd.NaT
    snapshot = None
    if snap_event is not None and int(snap_event["version"]) > 0:
        snapshot = int(snap_event["version"])
    if replay is not None:
        first, last = int(replay["from_version"]) + 1, int(replay["to_version"])
        replayed = len(load["replay files"]) or last - first + 1
    else:
        first = last = None
        replayed = 0 if snap_event is not None else None
    base = {"operator_id": operator, "store": store, "run_id": run, "version": version,
            "snapshot_version": snapshot, "delta_files": replayed,
            "plan_snapshot_version": plan[0] if plan else None,
            "plan_delta_files": plan[1] if plan else None,
            "matches_plan": (plan[0] == snapshot and plan[1] == replayed) if plan else None}
    rows = []
    if snap_event is not None:
        if snapshot is None:
            detail = "no snapshot: starts from an empty store (version 0)"
        else:
            name = plan[2] if plan and plan[0] == snapshot and plan[2] else f"{snapshot}.zip"
            detail = f"snapshot {snapshot} ({name})"
            copied = load["snapshot copied"]
            if copied is not None:
                detail += f": {int(copied['files'])} SST files, {int(copied['bytes']):,} bytes"
        rows.append({"partition": partition, "phase": "load snapshot", "start": start["time"],
                     "end": replay["time"] if replay is not None else end, "detail": detail,
                     **base})
    if replay is not None:
        rows.append({"partition": partition, "phase": "replay deltas",
                     "start": replay["time"], "end": end, "detail": _range_text(first, last),
                     **base})
    return rows


def restart_timeline(
    checkpoint: str | os.PathLike,
    log_path: str | os.PathLike,
    since: int = 0,
    run_id: str | None = None,
) -> pd.DataFrame:
    """How one run of a query restored its state: per partition, the phases of its first load.

    Args:
        checkpoint: the query's checkpoint (progress reports are read from
            ``<checkpoint>/_statekit/progress``; state files from ``<checkpoint>/state``).
        log_path: the state store log of the session that ran it (``state_store_log()``).
        since: byte offset in the log where the restart began (its size just before).
        run_id: the run to show; by default the latest run of the checkpoint that loaded
            state in the log (else the latest run in the log).

    One row per (partition, phase): ``load snapshot`` (from the task asking for the
    version to the start of the replay: find, copy and open the snapshot), ``replay
    deltas`` (replay the delta files after the snapshot, up to the version), and one
    ``first batch`` row with ``partition == -1`` (the run's first batch, from its progress
    report: start = its trigger time, end = start + batchDuration). Columns: ``partition``,
    ``phase``, ``start``, ``end`` (naive UTC; NaT when the load did not finish),
    ``seconds``, ``detail``, ``operator_id``, ``store``, ``run_id``, ``version`` (the
    version loaded), ``snapshot_version`` (NA: no snapshot, an empty store), ``delta_files``
    (replayed), ``plan_snapshot_version`` / ``plan_delta_files`` (what
    ``restore_plan`` reads from the files now; NA when they are gone) and ``matches_plan``.
    ``attrs``: ``run_id``, ``checkpoint``, ``log_path``, ``since``, ``version``,
    ``first_batch``, ``progress_metrics`` (the first batch's RocksDB metrics).

    Raises:
        CheckpointError: the log holds no state load of the run (names the log, the run and
            what to do).

    Example:
        >>> mark = os.path.getsize(state_store_log())                    # doctest: +SKIP
        >>> query = start_query(..., checkpoint=ck); query.wait_for_batches(1)  # doctest: +SKIP
        >>> restart_timeline(ck, state_store_log(), since=mark)          # doctest: +SKIP
    """
    root = Checkpoint(checkpoint).path
    if not root.is_dir():
        raise missing_error(root)
    events = state_store_events(log_path, since)
    progress = _progress(root)
    run = _pick_run(progress, events[events["event"] == "load start"], run_id)
    mine = events[events["run_id"] == run] if run is not None else events.iloc[:0]
    if not (mine["event"] == "load start").any():
        others = sorted(set(events.loc[events["event"] == "load start", "run_id"].dropna()))
        where = f"{str(log_path)!r}" + (f" (from byte {since})" if since else "")
        raise CheckpointError(
            f"the state store log {where} holds no state store load of run {run or '(none)'} "
            f"of checkpoint {str(root)!r}; runs that loaded state there: "
            f"{', '.join(others) or 'none'}. To see a restore, {REMEDY}")
    mine = mine.sort_values("time", kind="stable").reset_index(drop=True)
    loads = {}
    for key, group in mine.groupby(["operator_id", "store", "partition"], sort=True):
        load = _first_load(group)
        if load is not None:
            loads[key] = load
    plans = _plans(root, {key: int(load["load start"]["version"])
                          for key, load in loads.items()})
    rows = [row for key, load in loads.items()
            for row in _partition_rows(key, load, plans.get((key[0], key[2])), run)]
    batches = progress[progress["run_id"] == run]
    first = batches.sort_values("batch").iloc[0] if len(batches) else None
    if first is not None:
        rows.append({"partition": QUERY_ROW, "phase": "first batch", "start": first["start"],
                     "end": first["end"], "detail": f"batch {int(first['batch'])}",
                     "run_id": run})
    timeline = pd.DataFrame(rows, columns=TIMELINE_COLUMNS)
    timeline["start"] = pd.to_datetime(timeline["start"]).astype("datetime64[ns]")
    timeline["end"] = pd.to_datetime(timeline["end"]).astype("datetime64[ns]")
    timeline["seconds"] = (timeline["end"] - timeline["start"]).dt.total_seconds()
    timeline = timeline.astype({
        "partition": "int64", "operator_id": "Int64", "version": "Int64",
        "snapshot_version": "Int64", "delta_files": "Int64",
        "plan_snapshot_version": "Int64", "plan_delta_files": "Int64",
        "matches_plan": "boolean"})
    order = timeline["phase"].map({p: i for i, p in enumerate(PHASES)})
    timeline = timeline.assign(_order=order).sort_values(
        ["partition", "_order", "start"], ignore_index=True).drop(columns="_order")
    versions = sorted({int(load["load start"]["version"]) for load in loads.values()})
    timeline.attrs = {
        "run_id": run, "checkpoint": str(root), "log_path": str(log_path), "since": int(since),
        "version": versions[0] if len(versions) == 1 else versions,
        "first_batch": None if first is None else int(first["batch"]),
        "progress_metrics": {} if first is None else {
            k: v for k, v in first["metrics"].items()
            if k.startswith("rocksdb") or k.startswith("SnapshotLastUploaded")}}
    return timeline


# --- per partition --------------------------------------------------------------------------
def restart_summary(timeline: pd.DataFrame) -> pd.DataFrame:
    """One row per restored partition: what it loaded and how long it took.

    Columns: ``partition``, ``operator_id``, ``store``, ``version``, ``snapshot_version``,
    ``delta_files``, ``load_seconds`` (snapshot), ``replay_seconds``,
    ``restore_seconds`` (both), ``first_batch_seconds`` (the run's first batch, restore
    included, from its trigger to its commit), ``matches_plan``.

    Example:
        >>> t0 = pd.Timestamp("2026-11-22 08:50:26")
        >>> s = pd.Timedelta(seconds=1)
        >>> timeline = pd.DataFrame({"partition": [-1, 0, 0],
        ...     "phase": ["first batch", "load snapshot", "replay deltas"],
        ...     "start": [t0 - s, t0, t0 + s / 2], "end": [t0 + 2 * s, t0 + s / 2, t0 + s],
        ...     "snapshot_version": pd.array([None, 8, 8], dtype="Int64"),
        ...     "delta_files": pd.array([None, 1, 1], dtype="Int64")})
        >>> timeline["seconds"] = (timeline["end"] - timeline["start"]).dt.total_seconds()
        >>> restart_summary(timeline)[["partition", "snapshot_version", "restore_seconds",
        ...                            "first_batch_seconds"]]
           partition  snapshot_version  restore_seconds  first_batch_seconds
        0          0                 8              1.0                  3.0
    """
    require_columns(timeline, ("partition", "phase", "start", "end", "seconds"),
                    "restart timeline", "as restart_timeline() gives")
    columns = ["partition", "operator_id", "store", "version", "snapshot_version",
               "delta_files", "load_seconds", "replay_seconds", "restore_seconds",
               "first_batch_seconds", "matches_plan"]
    first = timeline[timeline["phase"] == "first batch"]
    batch_seconds = float(first["seconds"].iloc[0]) if len(first) else float("nan")
    parts = timeline[(timeline["partition"] != QUERY_ROW) & (timeline["phase"] != "first batch")]
    keys = [c for c in ("operator_id", "store", "partition") if c in parts.columns]
    rows = []
    for key, group in parts.groupby(keys, sort=True, dropna=False):
        values = dict(zip(keys, key if isinstance(key, tuple) else (key,), strict=True))
        seconds = group.groupby("phase")["seconds"].sum(min_count=1)
        load = seconds.get("load snapshot", np.nan)
        replay = seconds.get("replay deltas", 0.0 if "load snapshot" in seconds else np.nan)
        row = {**values, "load_seconds": load, "replay_seconds": replay,
               "restore_seconds": np.nan if group["end"].isna().any() else
               (group["end"].max() - group["start"].min()).total_seconds(),
               "first_batch_seconds": batch_seconds}
        for column in ("version", "snapshot_version", "delta_files", "matches_plan"):
            if column in group.columns:
                row[column] = group[column].iloc[0]
        rows.append(row)
    computed = ("partition", "load_seconds", "replay_seconds", "restore_seconds",
                "first_batch_seconds")
    summary = pd.DataFrame(rows, columns=[c for c in columns
                                          if c in computed or c in parts.columns])
    for column, dtype in (("partition", "int64"), ("operator_id", "Int64"),
                          ("version", "Int64"), ("snapshot_version", "Int64"),
                          ("delta_files", "Int64"), ("matches_plan", "boolean"),
                          ("load_seconds", "float64"), ("replay_seconds", "float64"),
                          ("restore_seconds", "float64"), ("first_batch_seconds", "float64")):
        if column in summary.columns:
            summary[column] = summary[column].astype(dtype)
    summary.attrs = {k: v for k, v in timeline.attrs.items() if k in ("run_id", "checkpoint")}
    return summary.reset_index(drop=True)
