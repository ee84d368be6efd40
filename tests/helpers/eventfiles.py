"""JSON event files for the attach tests of tests/live (one file a batch, written in order)."""

from __future__ import annotations

import datetime as dt
import json
import os
import time
from pathlib import Path

import pandas as pd

T0 = dt.datetime(2026, 1, 1, 12, 0)
FILES = 6
T_WRITTEN = time.time() - 600
EVENTS = "event_id string, player string, item string, score long, ts timestamp"


def in_order(path: Path, i: int) -> None:
    """File ``i`` modified ``i`` seconds after the first: Spark's file source takes new
    files by modification time, and files written in the same instant in any order."""
    stamp = T_WRITTEN + i
    os.utime(path, (stamp, stamp))


def write_events(folder: Path, files: int = FILES) -> pd.DataFrame:
    """12 events a file, 4 players, 3 items; from the second file on, the first 2 events of
    the file before are sent again (a duplicate across batches)."""
    folder.mkdir(parents=True)
    written = []
    for i in range(files):
        rows = [{"event_id": f"e{i}-{k}", "player": f"p{k % 4}", "item": f"i{(i + k) % 3}",
                 "score": i * 10 + k,
                 "ts": (T0 + dt.timedelta(minutes=5 * i, seconds=10 * k)).isoformat()}
                for k in range(12)]
        again = [dict(r) for r in written[-12:][:2]]
        tmp = folder / f".e{i:02d}"
        tmp.write_text("".join(json.dumps(r) + "\n" for r in rows + again))
        tmp.rename(folder / f"e{i:02d}.json")
        in_order(folder / f"e{i:02d}.json", i)
        written += rows
    frame = pd.DataFrame(written)
    frame["ts"] = pd.to_datetime(frame["ts"])
    return frame


