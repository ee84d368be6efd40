"""Spark's offset and commit logs as pandas frames: batches, their sources' offsets, commits.

Read straight from the files (``Checkpoint`` knows where they are), with no Spark.

Example:
    >>> import tempfile
    >>> ck = Checkpoint(tempfile.mkdtemp())
    >>> (ck.path / "offsets").mkdir(); (ck.path / "commits").mkdir()
    >>> _ = (ck.path / "offsets" / "0").write_text(
    ...     'v1\\n{"batchWatermarkMs":0,"batchTimestampMs":1767607200000,"conf":{}}\\n'
    ...     '{"logOffset":0}\\n-')
    >>> _ = (ck.path / "commits" / "0").write_text('v1\\n{"nextBatchWatermarkMs":5000}')
    >>> batches(ck)[["batch", "committed", "new_data", "timestamp", "watermark"]]
       batch  committed  new_data           timestamp  watermark
    0      0       True      True 2026-01-05 10:00:00 1970-01-01
    >>> sources(ck)[["batch", "source", "offset", "parsed"]]
       batch  source           offset            parsed
    0      0       0  {"logOffset":0}  {'logOffset': 0}
    1      0       1             None              None
"""

from __future__ import annotations

import json

import pandas as pd

from statekit.spark_state.checkpoint import Checkpoint

BATCH_COLUMNS = ["batch", "committed", "new_data", "timestamp", "watermark", "next_watermark",
                 "timestamp_ms", "watermark_ms", "next_watermark_ms", "sources",
                 "offset_log_version"]
SOURCE_COLUMNS = ["batch", "source", "offset", "parsed"]
COMMIT_COLUMNS = ["batch", "next_watermark", "next_watermark_ms"]


def _times(frame: pd.DataFrame, pairs: dict[str, str]) -> pd.DataFrame:
    for name, ms in pairs.items():
        frame[name] = pd.to_datetime(frame[ms], unit="ms").astype("datetime64[ns]")
    return frame


def batches(checkpoint: Checkpoint) -> pd.DataFrame:
    """One row per batch of the offset log (planned ones too), ascending.

    Columns: ``batch``, ``committed`` (its commit file exists), ``new_data`` (its sources'
    offsets differ from the previous batch's: it read input; False for a no-data batch, which
    Spark runs to move the watermark on and evict state; NA for the first batch retained,
    whose predecessor's offsets are gone, unless it is batch 0), ``timestamp`` (the trigger
    time, ``batchTimestampMs``), ``watermark`` (the event-time watermark the batch ran with,
    ``batchWatermarkMs``), ``next_watermark`` (the one its commit handed to the next batch;
    NaT when not committed), the same three in milliseconds (``*_ms``, nullable ``Int64``),
    ``sources`` (how many sources the batch has offsets for), ``offset_log_version``.
    Times are naive UTC.
    """
    committed = set(checkpoint.committed_batches())
    rows = []
    previous: tuple[int, list] | None = None
    for batch in checkpoint.offset_batches():
        version, meta, offsets = checkpoint.offset_log(batch)
        commit = checkpoint.commit_metadata(batch) if batch in committed else {}
        if previous is not None and previous[0] == batch - 1:
            new_data = [_parse(o) for o in offsets] != previous[1]
        else:
            new_data = any(o is not None for o in offsets) if batch == 0 else None
        previous = (batch, [_parse(o) for o in offsets])
        rows.append({"batch": batch, "committed": batch in committed, "new_data": new_data,
                     "timestamp_ms": meta.get("batchTimestampMs"),
                     "watermark_ms": meta.get("batchWatermarkMs"),
                     "next_watermark_ms": commit.get("nextBatchWatermarkMs"),
                     "sources": sum(o is not None for o in offsets),
                     "offset_log_version": version})
    frame = pd.DataFrame(rows, columns=[c for c in BATCH_COLUMNS if c not in
                                        ("timestamp", "watermark", "next_watermark")])
    frame = frame.astype({"batch": "int64", "committed": bool, "new_data": "boolean",
                          "timestamp_ms": "Int64",
                          "watermark_ms": "Int64", "next_watermark_ms": "Int64",
                          "sources": "int64", "offset_log_version": "int64"})
    frame = _times(frame, {"timestamp": "timestamp_ms", "watermark": "watermark_ms",
                           "next_watermark": "next_watermark_ms"})
    return frame[BATCH_COLUMNS]


def sources(checkpoint: Checkpoint) -> pd.DataFrame:
    """One row per (batch, source) of the offset log: the offset each source had read up to.

    Columns: ``batch``, ``source`` (the source's position in the query, 0-based), ``offset``
    (its JSON text as Spark wrote it; None where Spark wrote ``-``: no offset yet),
    ``parsed`` (that JSON as Python objects; the text itself when it is not JSON).
    """
    rows = []
    for batch in checkpoint.offset_batches():
        _, _, offsets = checkpoint.offset_log(batch)
        for source, text in enumerate(offsets):
            rows.append((batch, source, text, _parse(text)))
    frame = pd.DataFrame(rows, columns=SOURCE_COLUMNS)
    return frame.astype({"batch": "int64", "source": "int64", "offset": object,
                         "parsed": object})


def _parse(text: str | None) -> object:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def commits(checkpoint: Checkpoint) -> pd.DataFrame:
    """One row per committed batch: ``batch``, ``next_watermark`` (naive UTC) and
    ``next_watermark_ms`` (the watermark the commit handed to the next batch)."""
    rows = [(b, checkpoint.commit_metadata(b).get("nextBatchWatermarkMs"))
            for b in checkpoint.committed_batches()]
    frame = pd.DataFrame(rows, columns=["batch", "next_watermark_ms"]).astype(
        {"batch": "int64", "next_watermark_ms": "Int64"})
    return _times(frame, {"next_watermark": "next_watermark_ms"})[COMMIT_COLUMNS]
