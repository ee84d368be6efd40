"""A query's key, made exact: its group keys, its window, its store bytes and its partition.

Serving answers by key, and a key arrives in many shapes: a dict from Python, a
JSON object over REST, window times as ISO text, milliseconds or datetimes.
``KeyCodec`` turns each into what a store and the routing need — the changelog
key bytes (``statekit.changelog.format``), the Spark state partition that holds
it (``statekit.serve.placement``) — and, for a key's time range, the window
starts in it and the partitions they live on. Bad keys are refused with the
value named.

Example:
    >>> from statekit.query.spec import QuerySpec, tumbling
    >>> codec = KeyCodec(QuerySpec(keys=["player"], window=tumbling("10 minutes")),
    ...                  {"player": "string"}, partitions=3)
    >>> key = codec.key({"player": "p07", "window_start": "2026-01-05T10:00:00Z"})
    >>> codec.store_key(key)[:57]
    b'{"player":"p07","window_start":"2026-01-05T10:00:00.000Z"'
    >>> codec.partition(key)
    2
    >>> [codec.partition({"player": "p07", "window_start": ms})
    ...  for ms in codec.window_starts("2026-01-05T10:00Z", "2026-01-05T10:30Z")]
    [2, 0, 0, 0]
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping

from statekit.changelog.format import changelog_key_columns, encode_json
from statekit.durations import to_millis
from statekit.errors import BadArgument
from statekit.query.spec import QuerySpec
from statekit.serve.placement import state_partition
from statekit.stores.keys import MAX_TIME_MS, ms_to_iso
from statekit.validate import is_whole_number

TIME_ACCEPTED = ("milliseconds since the epoch, ISO-8601 text (2026-01-05T10:00:00Z) "
                 "or a datetime")


def time_ms(value: object, what: str) -> int:
    """A time as milliseconds since the epoch (naive = UTC); BadArgument naming ``what``."""
    import pandas as pd

    if is_whole_number(value):
        ms = int(value)
    elif isinstance(value, str | dt.datetime | pd.Timestamp):
        try:
            stamp = pd.Timestamp(value)
        except (ValueError, TypeError):
            raise BadArgument(what, value, TIME_ACCEPTED) from None
        if stamp is pd.NaT:
            raise BadArgument(what, value, TIME_ACCEPTED)
        if stamp.tzinfo is not None:
            stamp = stamp.tz_convert("UTC").tz_localize(None)
        ms = stamp.value // 1_000_000
    else:
        raise BadArgument(what, value, TIME_ACCEPTED)
    if not 0 <= ms <= MAX_TIME_MS:
        raise BadArgument(what, value, f"a time from 1970 to the year 9999 ({TIME_ACCEPTED})")
    return ms


class KeyCodec:
    """Keys of one store: validation, changelog bytes, Spark partition, window starts.

    Args:
        spec: what the store holds.
        key_types: the group keys' Spark types (from the changelog's metadata topic).
        partitions: the query's state partitions.
    """

    def __init__(self, spec: QuerySpec, key_types: Mapping[str, str], partitions: int):
        self.spec, self.key_types, self.partitions = spec, dict(key_types), partitions
        self.windowed = spec.window.kind != "session"
        self.size_ms = spec.window.size_ms
        self.slide_ms = to_millis(spec.window.slide) if spec.window.slide else self.size_ms
        self.key_columns = changelog_key_columns(spec.key_columns)  # store byte order

    # --- keys -------------------------------------------------------------------------
    def group(self, key: object) -> dict:
        """The group keys of ``key`` (a dict holding at least them)."""
        if isinstance(key, str | bytes):
            try:
                key = json.loads(key)
            except ValueError:
                raise BadArgument("key", key, "a JSON object of the group keys") from None
        if not isinstance(key, Mapping):
            raise BadArgument("key", key, f"a dict of the group keys {list(self.spec.keys)}")
        missing = [k for k in self.spec.keys if k not in key or key[k] is None]
        if missing:
            raise BadArgument("key", dict(key), f"a value for each group key "
                                                f"{list(self.spec.keys)} (missing {missing})")
        return {k: key[k] for k in self.spec.keys}

    def key(self, key: object) -> dict:
        """A full state key: group keys and ``window_start`` (and ``window_end``) in ms."""
        group = self.group(key)
        raw = json.loads(key) if isinstance(key, str | bytes) else key
        if "window_start" not in raw:
            raise BadArgument("key", dict(raw), "the group keys and window_start (a point "
                                                "query names one window)")
        start = time_ms(raw["window_start"], "window_start")
        full = {**group, "window_start": start}
        if self.windowed:
            if self.spec.window.kind == "tumbling" and start % self.size_ms:
                raise BadArgument("window_start", raw["window_start"],
                                  f"the start of a {self.spec.window.size} window (a multiple "
                                  f"of {self.size_ms} ms since the epoch)")
            full["window_end"] = start + self.size_ms
        return full

    def store_key(self, key: Mapping) -> bytes:
        """The changelog key bytes of a full key (``key()``'s result)."""
        row = {c: ms_to_iso(key[c]) if c in ("window_start", "window_end") else key[c]
               for c in self.key_columns}
        return encode_json(row, self.key_columns)

    def group_prefix(self, group: Mapping) -> dict:
        return {k: group[k] for k in self.spec.keys}

    def partition(self, key: Mapping) -> int:
        """The Spark state partition of a full key (session stores: of its group keys)."""
        row = dict(key)
        if self.windowed:
            start = time_ms(row["window_start"], "window_start")
            row["window_start"] = start * 1000  # Spark keeps times in microseconds
            row["window_end"] = (start + self.size_ms) * 1000
        return state_partition(row, self.spec.keys, self.windowed, self.partitions,
                               self.key_types)

    def window_starts(self, time_from: object, time_to: object) -> list[int]:
        """Starts (ms) of every window of this store starting in [time_from, time_to]."""
        low, high = time_ms(time_from, "time_from"), time_ms(time_to, "time_to")
        if low > high:
            raise BadArgument("time_from", time_from, f"a time no later than time_to={time_to}")
        first = -(-low // self.slide_ms) * self.slide_ms
        return list(range(first, high + 1, self.slide_ms))

    def partitions_of_range(self, group: Mapping, time_from: object, time_to: object
                            ) -> dict[int, list[int]]:
        """partition → the window starts of ``group``'s windows in the range it holds.

        Time windows of one key are spread over partitions (the window is hashed
        with the key); a session store keeps all of a key's sessions in one partition.
        """
        if not self.windowed:
            low, high = time_ms(time_from, "time_from"), time_ms(time_to, "time_to")
            return {self.partition(group): [low, high]}
        out: dict[int, list[int]] = {}
        for start in self.window_starts(time_from, time_to):
            out.setdefault(self.partition({**group, "window_start": start}), []).append(start)
        return dict(sorted(out.items()))

    # --- values -----------------------------------------------------------------------
    @staticmethod
    def row(key: bytes, value: bytes) -> dict:
        """A store entry as one row: key columns then value columns (times as ISO text)."""
        return {**json.loads(key), **json.loads(value)}
