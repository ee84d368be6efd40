"""Session windows computed by plain pandas: a reference to check a session store against.

A session per key starts at an event and lasts ``gap`` past the key's latest event;
an event at or before the current session's end joins it (Spark's rule: each
event opens ``[ts, ts + gap)`` and sessions that touch merge). With ``watermark``,
only sessions ending after it are kept: what the store still holds once the
watermark has closed (emitted and evicted) the older ones.

Example:
    >>> import pandas as pd
    >>> events = pd.DataFrame({"carrier": ["UA", "UA", "UA", "AA"],
    ...     "ts": pd.to_datetime(["2013-01-01 06:00", "2013-01-01 06:20",
    ...                           "2013-01-01 07:30", "2013-01-01 06:05"])})
    >>> session_reference(events, ["carrier"], "30 minutes")
             window_start          window_end carrier  count
    0 2013-01-01 06:05:00 2013-01-01 06:35:00      AA      1
    1 2013-01-01 06:00:00 2013-01-01 06:50:00      UA      2
    2 2013-01-01 07:30:00 2013-01-01 08:00:00      UA      1
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from statekit.durations import to_millis
from statekit.errors import BadArgument
from statekit.validate import require_columns


def session_reference(events: pd.DataFrame, keys: Sequence[str] | str, gap: str,
                      event_time: str = "ts", watermark: pd.Timestamp | str | None = None
                      ) -> pd.DataFrame:
    """Sessions per ``keys`` with inactivity ``gap`` over ``events`` (naive UTC times).

    Returns one row per session: ``window_start`` (first event), ``window_end``
    (last event + gap), the keys and ``count``, ordered by keys then start (the
    columns of a session store's snapshot, without its partition).
    """
    keys = [keys] if isinstance(keys, str) else list(keys)
    if not keys:
        raise BadArgument("session keys", keys, "one or more column names")
    require_columns(events, [*keys, event_time], "events frame",
                    "one row per event with the key columns and the event time")
    span = pd.Timedelta(milliseconds=to_millis(gap, "session gap"))
    times = pd.to_datetime(events[event_time])
    if times.dt.tz is not None:
        times = times.dt.tz_convert("UTC").dt.tz_localize(None)
    frame = events[keys].assign(_ts=times).sort_values([*keys, "_ts"], kind="stable")
    grouped = frame.groupby(keys, sort=False)["_ts"]
    previous_end = grouped.shift() + span
    opens = previous_end.isna() | (frame["_ts"] > previous_end)
    frame["_session"] = opens.astype(int).cumsum()
    per = frame.groupby([*keys, "_session"], sort=False)["_ts"]
    out = pd.DataFrame({"window_start": per.min(), "window_end": per.max() + span,
                        "count": per.size()}).reset_index().drop(columns="_session")
    out = out[["window_start", "window_end", *keys, "count"]]
    if watermark is not None:
        out = out[out["window_end"] > pd.Timestamp(watermark)]
    return out.sort_values([*keys, "window_start"], kind="stable").reset_index(drop=True)
