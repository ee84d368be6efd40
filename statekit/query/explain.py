"""Why does a key hold its value? Every input record of that key, batch by batch: the ones
that counted, the ones that did not and why, and the value after each batch.

``explain_key(query, key)`` reads, for a statekit query over a Kafka topic:

1. the key's **state** now (its rows in the last committed snapshot, one per window);
2. its **history**: every put and delete of the key in Spark's change feed, batch by batch:
   the value after each batch that changed it;
3. the **records**: each retained batch's input offsets (Spark's offset log) read back from
   Kafka (or, for a streaming DataFrame of text lines, the files its source logged for the
   batch: ``topic`` is then the file and ``offset`` the line number), parsed as the query
   parses them, and kept where the key matches; each record with
   ``counted`` and, where it did not count, ``why_not``: malformed (the reason
   ``parse_events`` gives) or late (its window had ended when the batch's watermark passed);
4. the value **reproduced**: the aggregates recomputed by pandas from the records that counted,
   beside the state (``agrees``).

So "why is count 7" is answered by the 7 records and the batches that brought them.

Example:
    >>> why = query.explain({"player": "p7"}, window="2026-01-05 10:00")   # doctest: +SKIP
    >>> why.records[["batch", "offset", "score", "counted", "why_not"]]     # doctest: +SKIP
    >>> why.agrees                                                          # doctest: +SKIP
    True
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from statekit.errors import BadArgument, StatekitError
from statekit.kafka.offsets import log_starts
from statekit.query.input_replay import (
    FILE_RAW_SCHEMA,
    RAW_SCHEMA,
    batch_files,
    read_batches,
    read_file_batches,
    recorded_start,
)
from statekit.reference.aggregates import windowed_reference
from statekit.spark_state.progress import input_ranges, kafka_offsets, late_watermark_ms
from statekit.spark_state.state_reader import to_pandas

if TYPE_CHECKING:
    from statekit.query.stateful import StatefulQuery

RECORD_COLUMNS = ["batch", "topic", "partition", "offset", "timestamp"]
WINDOW = ["window_start", "window_end"]


@dataclass(frozen=True)
class KeyExplanation:
    """Why a key holds its value.

    Attributes:
        key: the key's columns and values (with ``window_start`` when one window was asked).
        state: the key's rows in the last committed snapshot (one per window).
        history: the key's changes in Spark's change feed: ``batch``, ``change``, the
            window, the values after the batch (a delete: none).
        records: one row per input record of the key (per window it falls in): ``batch``,
            ``topic``, ``partition``, ``offset``, ``timestamp`` (Kafka's), the event's
            fields, the window, ``counted`` and ``why_not`` (``malformed: ...``,
            ``late: ...``; None where it counted).
        reproduced: the aggregates recomputed by pandas from the records that counted, one
            row per window of ``state``.
        batches: the first and last batch read.
        gone: batches whose records are no longer all in Kafka (retention): the
            explanation is partial there.
    """

    key: dict
    state: pd.DataFrame
    history: pd.DataFrame
    records: pd.DataFrame
    reproduced: pd.DataFrame
    value_columns: list[str]
    batches: tuple[int, int]
    gone: list[int]

    @property
    def agrees(self) -> bool:
        """The records that counted reproduce the state, window by window (floats within
        1e-9 relative)."""
        if len(self.state) != len(self.reproduced):
            return False
        for column in self.value_columns:
            a = pd.to_numeric(self.state[column], errors="coerce").to_numpy(dtype=float)
            b = pd.to_numeric(self.reproduced[column], errors="coerce").to_numpy(dtype=float)
            if not np.allclose(a, b, rtol=1e-9, atol=0.0, equal_nan=True):
                return False
        return True

    @property
    def partial(self) -> bool:
        return bool(self.gone)

    def not_counted(self) -> pd.DataFrame:
        """The records that did not count, with ``why_not``."""
        return self.records[~self.records["counted"]].reset_index(drop=True)

    def __repr__(self) -> str:
        key = ", ".join(f"{k}={v!r}" for k, v in _shown(self.key).items())
        counted = int(self.records["counted"].sum())
        why = self.records["why_not"].dropna().str.split(":").str[0].value_counts()
        missed = ", ".join(f"{n} {kind}" for kind, n in why.items()) or "none missed"
        verdict = "the counted records reproduce the state" if self.agrees else \
            "the counted records do NOT reproduce the state"
        gone = (f"; PARTIAL: the input of batches {self.gone} is no longer all in Kafka"
                if self.gone else "")
        return (f"KeyExplanation({key}: {len(self.records)} records in batches "
                f"{self.batches[0]}..{self.batches[1]}, {counted} counted, {missed}; "
                f"{verdict}{gone})")


def explain_key(query: StatefulQuery, key: object, window: object = None) -> KeyExplanation:
    """Why ``key`` (and ``window``, a window start, when given) holds its value in
    ``query``'s state: see the module docstring.

    Raises:
        BadArgument: a key the state does not hold (the nearest keys named), a window of a
            running aggregate, a session window query; StatekitError: a query that reads
            neither a Kafka topic nor text files (its input cannot be read again).
    """
    spec = query.spec
    if spec.kind == "session":
        raise BadArgument("query", query.name, "a time-window or running aggregation (a "
                          "session's records are not explained yet: a session merges as "
                          "records arrive)")
    if window is None and isinstance(key, Mapping):
        window = key.get("window_start")   # the key as a snapshot row names it
    wanted = _key(key, list(spec.keys))
    if window is not None:
        if spec.kind == "running":
            raise BadArgument("window", window, "None: a running aggregate has no windows")
        wanted["window_start"] = _window_start(window)
    if query._input is None and not (query._file_input and batch_files(query.checkpoint)):
        raise StatekitError(f"query {query.name!r} reads neither a Kafka topic nor text files, "
                            f"so statekit cannot read its input again to explain a key")
    last = query.last_batch
    if last < 0:
        raise StatekitError(f"query {query.name!r} has committed no batch yet")
    snapshot = query.snapshot(batch=last)
    state = _matching(snapshot, wanted).sort_values(spec.key_columns, ignore_index=True)
    if state.empty:
        raise BadArgument("key", _shown(wanted), "a key the state holds after batch "
                          f"{last}; nearest: {_nearest(snapshot, wanted)}")
    first = query.reader.batch_range()[0]
    history = _history(query, wanted, first, last)
    records, gone = _records(query, wanted, first, last)
    values = [a.name for a in spec.aggregates]
    reproduced = _reproduce(records, spec, state)
    return KeyExplanation(wanted, state, history, records, reproduced, values, (first, last),
                          gone)


def _key(key: object, names: list[str]) -> dict:
    if isinstance(key, Mapping):
        missing = [n for n in names if n not in key]
        extra = [k for k in key if k not in names and k != "window_start"]
        if missing or extra:
            raise BadArgument("key", dict(key), f"a value for each group key: {names}")
        return {n: key[n] for n in names}
    if len(names) == 1:
        return {names[0]: key}
    raise BadArgument("key", key, f"a dict with a value for each group key: {names}")


def _window_start(window: object) -> pd.Timestamp:
    """A window's start as the state holds it (naive UTC); BadArgument for what is not a
    time."""
    try:
        start = pd.Timestamp(window)
    except (TypeError, ValueError):
        start = None
    if start is None or start is pd.NaT:
        raise BadArgument("window", window, "a window's start: a timestamp, or text like "
                                            "'2013-01-04 10:00' (UTC)")
    return start.tz_convert("UTC").tz_localize(None) if start.tzinfo is not None else start


def _shown(wanted: dict) -> dict:
    return {k: (str(v) if isinstance(v, pd.Timestamp) else v) for k, v in wanted.items()}


def _matching(frame: pd.DataFrame, wanted: dict) -> pd.DataFrame:
    mask = pd.Series(True, index=frame.index)
    for name, value in wanted.items():
        column = frame[name]
        mask &= column.isna() if value is None or (isinstance(value, float)
                                                   and np.isnan(value)) else column == value
    return frame[mask]


def _nearest(snapshot: pd.DataFrame, wanted: dict) -> str:
    """The keys the state holds nearest ``wanted`` (by their text), at most five."""
    names = list(wanted)
    held = snapshot[names].drop_duplicates().astype(str).agg(" / ".join, axis=1).tolist()
    text = " / ".join(str(v) for v in wanted.values())
    close = difflib.get_close_matches(text, held, n=5, cutoff=0.0)
    return "; ".join(close) if close else "(the state is empty)"


def _history(query: StatefulQuery, wanted: dict, first: int, last: int) -> pd.DataFrame:
    feed = query.reader.changes_frame(first, last)
    return _matching(to_pandas(_where_key(feed, wanted), nullable_ints=True), wanted) \
        .sort_values(["batch", "partition"], ignore_index=True)


def _where_key(frame: DataFrame, wanted: dict) -> DataFrame:
    for name, value in wanted.items():
        if name in frame.columns:
            frame = frame.where(F.col(f"`{name}`").eqNullSafe(F.lit(value)))
    return frame


def _batch_ranges(query: StatefulQuery, first: int, last: int
                  ) -> dict[int, tuple[dict, int | None]]:
    """Batch → (its Kafka input ranges, the watermark its late events are judged by). Batch
    0 starts where ``start_query`` recorded (``input_replay.record_start``); a checkpoint
    without that record is taken to start at each partition's log start now."""
    out = {}
    for batch in range(first, last + 1):
        ranges = input_ranges(query.checkpoint, batch)
        if ranges is None and batch == 0:
            ends = {}
            for text in query.checkpoint.offset_log(0)[2]:
                ends.update(kafka_offsets(text) or {})
            starts = recorded_start(query.checkpoint) or {}
            unrecorded = [part for part in ends if part not in starts]
            if unrecorded:
                starts = {**log_starts(query._input.kafka, unrecorded), **starts}
            ranges = {part: (starts[part], end) for part, end in ends.items()}
        if ranges:
            out[batch] = (ranges, late_watermark_ms(query.checkpoint, batch))
    return out


def _records(query: StatefulQuery, wanted: dict, first: int, last: int
             ) -> tuple[pd.DataFrame, list[int]]:
    from statekit.query.parsing import JSON_OPTIONS, event_struct, parse_events

    spec = query.spec
    if query._input is not None:
        source, schema = query._input, RAW_SCHEMA
        batches = _batch_ranges(query, first, last)
        rows, gone = read_batches(source, {b: (r, late or 0)
                                           for b, (r, late) in batches.items()})
    else:   # text lines from files: the files the source logged for each batch
        source, schema = query._file_input, FILE_RAW_SCHEMA
        rows, gone = read_file_batches(query.checkpoint, {
            b: late_watermark_ms(query.checkpoint, b) or 0 for b in range(first, last + 1)})
    struct = event_struct(source.schema)
    fields = struct.fieldNames()
    empty = pd.DataFrame(columns=[*RECORD_COLUMNS, *fields, *WINDOW, "counted", "why_not"])
    if not len(rows):
        return empty, sorted(gone)
    spark = query.spark
    raw = spark.createDataFrame(rows, schema)
    _, malformed = parse_events(raw, source.schema, source.required,
                                event_time=spec.event_time,
                                max_event_time_ahead=spec.max_event_time_ahead)
    position = ["topic", "partition", "offset"]
    parsed = F.from_json(F.col("value").cast("string"), struct, JSON_OPTIONS)
    records = (raw.join(malformed.select(*position, "reason"), position, "left")
               .select(F.col("_sk_batch").alias("batch"), *position,
                       (F.col("timestamp") if "timestamp" in raw.columns
                        else F.lit(None).cast("timestamp")).alias("timestamp"),
                       F.col("_sk_late_ms").alias("late_ms"), "reason",
                       *[parsed[n].alias(n) for n in fields]))
    records = _where_key(records, {k: v for k, v in wanted.items() if k in fields})
    if spec.kind != "running":
        timed = records.where(F.col(spec.event_time).isNotNull())
        timed = timed.select("*", spec.window.column(spec.event_time)).select(
            "*", F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end")).drop("window")
        untimed = records.where(F.col(spec.event_time).isNull()).select(
            "*", F.lit(None).cast("timestamp").alias("window_start"),
            F.lit(None).cast("timestamp").alias("window_end"))
        records = timed.unionByName(untimed)
        if "window_start" in wanted:
            start = F.col("window_start")
            records = records.where(start.isNull() | (start == F.lit(wanted["window_start"])))
    frame = to_pandas(records, nullable_ints=True)
    return _judged(frame, spec), sorted(gone)


def _judged(frame: pd.DataFrame, spec) -> pd.DataFrame:
    """``counted`` and ``why_not`` for each record: malformed first, then late."""
    malformed = frame["reason"].notna()
    why = pd.Series([None] * len(frame), index=frame.index, dtype=object)
    why[malformed] = "malformed: " + frame.loc[malformed, "reason"].astype(str)
    if spec.kind != "running":
        watermark = pd.to_datetime(frame["late_ms"].astype("float64"), unit="ms")
        late = ~malformed & frame["window_end"].notna() & (frame["window_end"] <= watermark)
        why[late] = [f"late: its window ended at {end}, the batch's watermark was {mark}"
                     for end, mark in zip(frame.loc[late, "window_end"], watermark[late],
                                          strict=True)]
    frame = frame.assign(counted=why.isna(), why_not=why).drop(columns=["late_ms", "reason"])
    order = [*RECORD_COLUMNS, *[c for c in frame.columns
                                if c not in (*RECORD_COLUMNS, *WINDOW, "counted", "why_not")]]
    if spec.kind != "running":
        order += WINDOW
    return frame[[*order, "counted", "why_not"]].sort_values(
        ["batch", "partition", "offset"], ignore_index=True)


def _reproduce(records: pd.DataFrame, spec, state: pd.DataFrame) -> pd.DataFrame:
    """The aggregates of the records that counted, by pandas, for the windows of ``state``."""
    counted = records[records["counted"]].drop_duplicates(["topic", "partition", "offset"])
    columns = list(dict.fromkeys([*spec.keys, *([spec.event_time] if spec.kind != "running"
                                                else []),
                                  *[a.column for a in spec.aggregates if a.column]]))
    if counted.empty:
        return state.iloc[0:0][[*spec.key_columns, *[a.name for a in spec.aggregates]]]
    events = counted[columns].copy()
    for name in columns:  # nullable integers to floats: pandas' sum/max skip NaN as SQL
        if pd.api.types.is_integer_dtype(events[name]) and events[name].dtype != "int64":
            events[name] = events[name].astype("float64")
    out = windowed_reference(events, spec)
    keys = spec.key_columns
    return state[keys].merge(out, on=keys, how="left")[[*keys, *[a.name for a
                                                                 in spec.aggregates]]]
