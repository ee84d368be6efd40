"""The reference Kafka Streams application's store rows as statekit's snapshot frames.

The app answers rows as JSON (``key``, ``partition``, ``window_start``/``window_end`` in epoch
ms, the aggregates' values); statekit's frames have the spec's ``key_columns`` and
``value_columns``, times as naive UTC datetimes. A session's end differs between the
engines: Kafka Streams ends a session at its last event, Spark (and statekit's pandas
reference) at the last event plus the gap; the frame shows Spark's, so both compare.

Example:
    >>> from statekit.model.query_spec import QuerySpec, tumbling
    >>> spec = QuerySpec(keys=["player"], window=tumbling("10 minutes"), aggregates=["count"])
    >>> rows_frame([{"key": "p1", "partition": 0, "window_start": 0, "window_end": 600000,
    ...              "count": 3}], spec)
      window_start          window_end player  count  partition
    0   1970-01-01 1970-01-01 00:10:00     p1      3          0
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import pandas as pd

from statekit.model.query_spec import QuerySpec


def key_values(text: str, keys: Sequence[str]) -> list[str]:
    """A group key's text (the app's) as one value per key column."""
    return [text] if len(keys) == 1 else list(json.loads(text))


def rows_frame(rows: Sequence[dict], spec: QuerySpec, sort: bool = True) -> pd.DataFrame:
    """``rows`` (the app's answers) as a frame of ``spec.key_columns``, ``value_columns``
    and ``partition``, sorted by the key columns when ``sort``."""
    columns = [*spec.key_columns, *spec.value_columns, "partition"]
    if not rows:
        return pd.DataFrame(columns=columns)
    frame = pd.DataFrame(list(rows))
    keys = pd.DataFrame([key_values(k, spec.keys) for k in frame["key"]],
                        columns=list(spec.keys), index=frame.index)
    frame = pd.concat([frame.drop(columns="key"), keys], axis=1)
    if spec.kind != "running":
        frame["window_start"] = pd.to_datetime(frame["window_start"], unit="ms")
        frame["window_end"] = pd.to_datetime(frame["window_end"], unit="ms")
        if spec.kind == "session":  # Kafka Streams: the last event; Spark: last event + gap
            frame["window_end"] += pd.Timedelta(milliseconds=spec.window.size_ms)
    frame = frame[columns]
    if sort:
        frame = frame.sort_values(spec.key_columns, kind="stable", ignore_index=True)
    return frame
