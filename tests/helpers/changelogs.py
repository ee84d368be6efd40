"""Changelogs made by hand for the tests of the pandas compaction model and its charts:
one shaped like the reader's (``synthetic_changelog``), one written row by row (``log``)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from statekit.changelog.log import Changelog

T0 = pd.Timestamp("2026-01-05 10:00")
KEY_COLUMNS = ["player", "window_start", "window_end"]
VALUE_COLUMNS = ["count", "sum_score", "max_score"]


def synthetic_changelog(batches: int = 12, players: int = 6, partitions: int = 3,
                        batches_per_window: int = 4, p_update: float = 0.6,
                        seed: int = 0) -> Changelog:
    """A changelog shaped like the reader's: a tumbling-window count/sum/max per player.

    Each batch (trigger every 30 s) updates a random subset of players' current window;
    when a new window starts, every key of the previous window gets a tombstone (the
    watermark evicted it). Player ``i`` lives in partition ``i % partitions``.
    About ``batches * players * p_update`` records (1M for 2000, 1000, 0.45, 20).
    """
    rng = np.random.default_rng(seed)
    window = pd.Timedelta(minutes=10)
    updated = rng.random((batches, players)) < p_update
    b_put, p_put = np.nonzero(updated)
    w_put = b_put // batches_per_window
    # tombstones: at the first batch of window w, for every key of window w - 1 that was put
    seen = np.zeros((batches // batches_per_window + 1, players), dtype=bool)
    seen[w_put, p_put] = True
    w_dead, p_dead = np.nonzero(seen[:-1])
    b_dead = (w_dead + 1) * batches_per_window
    alive = b_dead < batches
    w_dead, p_dead, b_dead = w_dead[alive], p_dead[alive], b_dead[alive]
    frame = pd.DataFrame({
        "batch": np.r_[b_dead, b_put].astype("int64"),
        "p": np.r_[p_dead, p_put],
        "w": np.r_[w_dead, w_put],
        "tombstone": np.r_[np.ones(len(b_dead), bool), np.zeros(len(b_put), bool)],
    })
    frame["partition"] = (frame["p"] % partitions).astype("int32")
    # in a batch: tombstones of evicted windows first, then the puts, each in key order
    frame = frame.sort_values(["partition", "batch", "tombstone", "p", "w"],
                              ascending=[True, True, False, True, True], kind="stable")
    frame = frame.reset_index(drop=True)
    frame["offset"] = frame.groupby("partition").cumcount().astype("int64")
    frame["seq"] = frame.groupby(["partition", "batch"]).cumcount().astype("int64")
    frame["timestamp"] = (T0 + pd.to_timedelta(frame["batch"] * 30, unit="s")).astype(
        "datetime64[ns]")
    names = np.array([f"p{i:04d}" for i in range(players)], dtype=object)
    starts = [T0 + window * i for i in range(seen.shape[0])]
    iso = [s.strftime("%Y-%m-%dT%H:%M:%S.000Z") for s in starts]
    iso_end = [(s + window).strftime("%Y-%m-%dT%H:%M:%S.000Z") for s in starts]
    ids = frame["p"].to_numpy() * seen.shape[0] + frame["w"].to_numpy()
    uniq, inverse = np.unique(ids, return_inverse=True)
    texts = np.array([f'{{"player":"{names[u // seen.shape[0]]}",'
                      f'"window_start":"{iso[u % seen.shape[0]]}",'
                      f'"window_end":"{iso_end[u % seen.shape[0]]}"}}' for u in uniq],
                     dtype=object)
    frame["key"] = texts[inverse]
    frame["player"] = names[frame["p"].to_numpy()]
    frame["window_start"] = (T0 + window * frame["w"]).astype("datetime64[ns]")
    frame["window_end"] = frame["window_start"] + window
    score = pd.Series(rng.integers(0, 100, len(frame)), index=frame.index)
    puts = ~frame["tombstone"]
    by_key = frame.loc[puts, "key"]
    counts = puts[puts].groupby(by_key).cumsum()
    sums = score[puts].groupby(by_key).cumsum()
    maxes = score[puts].groupby(by_key).cummax()
    for name, values in (("count", counts), ("sum_score", sums), ("max_score", maxes)):
        frame[name] = pd.array([pd.NA] * len(frame), dtype="Int64")
        frame.loc[puts, name] = values.astype("int64")
    frame = frame[["partition", "offset", "timestamp", "batch", "seq", "tombstone", "key",
                   *KEY_COLUMNS, *VALUE_COLUMNS]]
    return Changelog(frame, "leaderboard-counts-changelog", KEY_COLUMNS, VALUE_COLUMNS,
                     int(frame["batch"].max()))


def log(rows: list[tuple]) -> pd.DataFrame:
    """A hand-written one-partition-or-more log: (partition, offset, minute, key, tombstone)."""
    frame = pd.DataFrame(rows, columns=["partition", "offset", "minute", "key", "tombstone"])
    frame["timestamp"] = (T0 + pd.to_timedelta(frame.pop("minute"), unit="min")).astype(
        "datetime64[ns]")
    frame["partition"] = frame["partition"].astype("int32")
    frame["offset"] = frame["offset"].astype("int64")
    frame["batch"] = frame["timestamp"].rank(method="dense").astype("int64") - 1
    frame["count"] = pd.array([None if t else 1 for t in frame["tombstone"]], dtype="Int64")
    return frame
