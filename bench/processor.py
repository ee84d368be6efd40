"""A statekit.processor session processor vs the same sessions in plain applyInPandasWithState.

Both run the same logic over the same input, in the same Spark session, one after the
other (alternating, after a warm-up round):

- **processor**: ``statekit.processor.examples.SessionTracker`` (a session store over a
  transformWithState map state; 30-minute gap; event time, watermark 10 minutes) through
  ``start_processor``;
- **baseline**: the same sessions in ``applyInPandasWithState``: per player, the open
  session (start, end, events, total score) in a ``GroupState`` with an event-time
  timeout at its end + the gap; a run of events within the gap extends it, a later one
  starts a new session; the sessions a batch changed are returned, as the processor does.

Input: R game events (``player``, ``game``, ``score``, ``ts``) for P players in parquet
files read as a file stream, one file a micro-batch; event time 1 s apart (each player's
events P s apart), with a one-hour pause every 20 events per player, so sessions close.
Each path is timed from start to the end of an ``availableNow`` run (wall), and by its
batches' own time (Spark's ``triggerExecution`` summed: the work, without the query's start,
which is less noisy on a shared machine) and by the CPU seconds of the JVM and Python
processes (the least noisy); records per second = R / seconds, medians of the repeats.
Ratio = processor / baseline (**target >= 1.0**). Both paths' output row counts are
reported and must agree (the same sessions).

    python -m bench.processor --records 100000 --players 1000 --files 5 --repeats 3
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

import pandas as pd

from bench.common import (
    cpu_by_kind,
    cpu_snapshot,
    median,
    print_table,
    session,
    verdict,
    write_result,
)
from bench.results import Figure, Run

GAP = "30 minutes"
GAP_MS = 30 * 60_000
WATERMARK = "10 minutes"
BASE = pd.Timestamp("2026-01-05 08:00")
SCHEMA = "player string, game string, score bigint, ts timestamp"
OUTPUT = ("player string, session_start timestamp, session_end timestamp, events bigint, "
          "total_score bigint")
STATE = "session_start bigint, session_end bigint, events bigint, total_score bigint"


def write_input(folder: Path, records: int, players: int, files: int) -> None:
    """``records`` events in ``files`` parquet files, in event-time order."""
    i = pd.RangeIndex(records)
    per_player = i // players  # the player's event number
    ts = BASE + pd.to_timedelta(i, unit="s") + pd.to_timedelta(per_player // 20, unit="h")
    frame = pd.DataFrame({"player": [f"p{k:04d}" for k in i % players],
                          "game": [f"g{k}" for k in i % 7], "score": (i % 100).astype("int64"),
                          "ts": ts.tz_localize("UTC")})  # UTC-adjusted: Spark's timestamp
    folder.mkdir(parents=True)
    size = -(-records // files)
    for n in range(files):
        frame.iloc[n * size:(n + 1) * size].to_parquet(folder / f"part-{n:04d}.parquet",
                                                       coerce_timestamps="us")


def sessions_with_state(key, frames, state):
    """The baseline: SessionTracker's logic with the open session in a GroupState."""
    if state.hasTimedOut:
        state.remove()
        return
    current = list(state.get) if state.exists else None
    rows = pd.concat(list(frames), ignore_index=True).sort_values("ts", kind="stable")
    ms = rows["ts"].astype("int64") // 1_000_000
    run = (ms.diff() > GAP_MS).cumsum()
    changed = []
    for _, part in rows.groupby(run, sort=True):
        start, end = int(ms[part.index].iloc[0]), int(ms[part.index].iloc[-1])
        count, total = len(part), int(part["score"].fillna(0).sum())
        if current is not None and start - current[1] <= GAP_MS and current[0] - end <= GAP_MS:
            current = [min(start, current[0]), max(end, current[1]), current[2] + count,
                       current[3] + total]
        else:
            current = [start, end, count, total]
        changed.append(current)
    state.update(tuple(current))
    state.setTimeoutTimestamp(current[1] + GAP_MS)
    yield pd.DataFrame({
        "player": key[0],
        "session_start": pd.to_datetime([c[0] for c in changed], unit="ms"),
        "session_end": pd.to_datetime([c[1] for c in changed], unit="ms"),
        "events": [c[2] for c in changed], "total_score": [c[3] for c in changed]})


def _stream(spark, folder: Path):
    return (spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1)
            .parquet(str(folder)))


def _output_rows(query) -> int:
    """Rows the query returned, as its sink reported them."""
    return sum(p["sink"].get("numOutputRows", 0) for p in query.recentProgress)


def _figures(query, seconds: float, cpu_before: dict) -> dict:
    """Wall seconds (start to end), the batches' own seconds (Spark's ``triggerExecution``
    summed over every batch: the work, without the query's start and its idle waits) and
    the CPU seconds of this process and its children (the JVM, Spark's Python workers)."""
    reports = query.recentProgress
    cpu = cpu_by_kind(cpu_before, cpu_snapshot())
    return {"seconds": seconds, "output_rows": _output_rows(query), "batches": len(reports),
            "batch_seconds": sum(p["durationMs"].get("triggerExecution", 0)
                                 for p in reports) / 1000,
            "cpu_seconds": sum(cpu.values()), "cpu_by_kind": cpu}


def run_processor(spark, folder: Path, work: Path) -> dict:
    from statekit.processor import start_processor
    from statekit.processor.examples import SessionTracker

    name = f"processor_{time.monotonic_ns()}"
    cpu_before, start = cpu_snapshot(), time.perf_counter()
    query = start_processor(_stream(spark, folder), SessionTracker(gap=GAP), keys="player",
                            event_time="ts", watermark=WATERMARK, spark=spark, name=name,
                            checkpoint=str(work / name), trigger="available-now")
    query.query.awaitTermination()
    seconds = time.perf_counter() - start
    if query.query.exception() is not None:
        raise RuntimeError(str(query.query.exception())[:2000])
    return _figures(query.query, seconds, cpu_before)


def run_baseline(spark, folder: Path, work: Path) -> dict:
    from pyspark.sql.streaming.state import GroupStateTimeout

    name = f"baseline_{time.monotonic_ns()}"
    cpu_before, start = cpu_snapshot(), time.perf_counter()
    frame = (_stream(spark, folder).withWatermark("ts", WATERMARK).groupBy("player")
             .applyInPandasWithState(sessions_with_state, OUTPUT, STATE, "Update",
                                     GroupStateTimeout.EventTimeTimeout))
    query = (frame.writeStream.queryName(name).outputMode("update").format("noop")
             .option("checkpointLocation", str(work / name)).trigger(availableNow=True)
             .start())
    query.awaitTermination()
    seconds = time.perf_counter() - start
    if query.exception() is not None:
        raise RuntimeError(str(query.exception())[:2000])
    return _figures(query, seconds, cpu_before)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m bench.processor", description=__doc__)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--players", type=int, default=1000)
    parser.add_argument("--files", type=int, default=5, help="files = micro-batches")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workdir", help="keep input and checkpoints here")
    args = parser.parse_args(argv)
    work = Path(args.workdir or tempfile.mkdtemp(prefix="statekit-bench-processor-"))
    started = Run("processor")
    spark = session()
    load_at_start = os.getloadavg()[0]  # the machine may be shared: the figures say how loaded
    try:
        folder = work / "input"
        if not folder.exists():
            write_input(folder, args.records, args.players, args.files)
        runs: dict[str, list[dict]] = {"processor": [], "baseline": []}
        for round_ in range(args.repeats + 1):  # round 0 warms both up, and is not counted
            for path, fn in (("processor", run_processor), ("baseline", run_baseline)):
                result = fn(spark, folder, work)
                if round_:
                    runs[path].append(result)
        rate = {p: args.records / median([r["seconds"] for r in rs]) for p, rs in runs.items()}
        batch_rate = {p: args.records / median([r["batch_seconds"] for r in rs])
                      for p, rs in runs.items()}
        cpu_rate = {p: args.records / median([r["cpu_seconds"] for r in rs])
                    for p, rs in runs.items()}
        ratio = rate["processor"] / rate["baseline"]
        batch_ratio = batch_rate["processor"] / batch_rate["baseline"]
        cpu_ratio = cpu_rate["processor"] / cpu_rate["baseline"]
        outputs = {p: sorted({r["output_rows"] for r in rs}) for p, rs in runs.items()}
        figures = {"records": args.records, "players": args.players, "files": args.files,
                   "repeats": args.repeats, "runs": runs, "records_per_s": rate,
                   "batch_records_per_s": batch_rate, "records_per_cpu_s": cpu_rate,
                   "ratio": ratio, "batch_ratio": batch_ratio, "cpu_ratio": cpu_ratio,
                   "output_rows": outputs,
                   "load_average_1min": {"start": load_at_start, "end": os.getloadavg()[0]}}
        write_result(started, [
            Figure("applyInPandasWithState, wall", rate["baseline"], "records/s"),
            Figure("statekit.processor, wall", rate["processor"], "records/s",
                   baseline="applyInPandasWithState, wall", ratio=ratio, target="ratio >= 1.0"),
            Figure("applyInPandasWithState, in batches", batch_rate["baseline"], "records/s"),
            Figure("statekit.processor, in batches", batch_rate["processor"], "records/s",
                   baseline="applyInPandasWithState, in batches", ratio=batch_ratio,
                   target="ratio >= 1.0"),
            Figure("applyInPandasWithState, per CPU-second", cpu_rate["baseline"], "records"),
            Figure("statekit.processor, per CPU-second", cpu_rate["processor"], "records",
                   baseline="applyInPandasWithState, per CPU-second", ratio=cpu_ratio),
            # every run must give the same rows; the most any run gave
            Figure("applyInPandasWithState: output rows", max(outputs["baseline"]), "rows"),
            Figure("statekit.processor: output rows", max(outputs["processor"]), "rows"),
        ], figures)
        print_table(f"processor vs applyInPandasWithState: {args.records:,} events, "
                    f"{args.players:,} players, {args.files} batches (medians)", [
                        ("processor records/s (wall; in batches)",
                         f"{rate['processor']:,.0f}; {batch_rate['processor']:,.0f}"),
                        ("applyInPandasWithState records/s (wall; in batches)",
                         f"{rate['baseline']:,.0f}; {batch_rate['baseline']:,.0f}"),
                        ("output rows (processor, baseline)",
                         f"{outputs['processor']}, {outputs['baseline']}"),
                        ("ratio, wall", verdict(ratio, ">= 1.0", ratio >= 1.0)),
                        ("ratio, in batches", verdict(batch_ratio, ">= 1.0",
                                                      batch_ratio >= 1.0)),
                        ("records per CPU-second (processor, baseline)",
                         f"{cpu_rate['processor']:,.0f}, {cpu_rate['baseline']:,.0f}: "
                         f"{cpu_ratio:.2f}"),
                        ("load average, 1 min (start, end)",
                         f"{load_at_start:.1f}, {os.getloadavg()[0]:.1f} on "
                         f"{os.cpu_count()} cores")])
        return figures
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
