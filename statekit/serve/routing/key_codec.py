"""A query's key, made exact: its group keys, its window, its store bytes and its partition.

Serving answers by key, and a key arrives in many shapes: a dict from Python, a
JSON object over REST, window times as ISO text, milliseconds or datetimes.
``KeyCodec`` turns each into what a store and the routing need — the changelog
key bytes (``statekit.model.changelog_record``), the Spark state partition that holds
it (``statekit.serve.routing.placement``) — and, for a key's time range, the window
starts in it and the partitions they live on. Bad keys are refused with the
value named. A key's text (``key_text``), times (``key_times``) and values
(``key_values``) are checked by the modules beside this one; an attached query's part
has its own codec built on this one (``statekit.serve.part_keys.PartKeyCodec``).

Example:
    >>> from statekit.model.query_spec import QuerySpec, tumbling
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

import functools
import json
from collections.abc import Mapping, Sequence
from json.encoder import encode_basestring  # the str encoder of json.dumps(ensure_ascii=False)

from statekit.durations import to_millis
from statekit.errors import BadArgument
from statekit.model.changelog_record import changelog_key_columns, decode_json, encode_json
from statekit.model.query_spec import QuerySpec
from statekit.serve.routing.key_text import parse_key_json, parse_key_object
from statekit.serve.routing.key_times import time_ms, time_schema, window_start_text_schema
from statekit.serve.routing.key_values import (
    ANY_VALUE_SCHEMA,
    VALUE_SCHEMAS,
    check_text_length,
    checked_value,
)
from statekit.serve.routing.murmur3 import hash_bytes
from statekit.serve.routing.placement import pmod, state_partition
from statekit.serve.routing.value_hash import SEED, TYPES, hash_value
from statekit.stores.key_layout import MAX_TIME_MS, ms_to_iso

_CACHED_WINDOWS = 4096  # window starts whose hash seed and ISO text a codec remembers


class KeyCodec:
    """Keys of one store: validation, changelog bytes, Spark partition, window starts.

    Args:
        spec: what the store holds.
        key_types: the group keys' Spark types (from the changelog's metadata topic).
        partitions: the query's state partitions.
    """

    def __init__(self, spec: QuerySpec, key_types: Mapping[str, str], partitions: int):
        self.spec = spec
        self._init_columns(spec.keys, changelog_key_columns(spec.key_columns), key_types,
                           partitions, times=("window_start", "window_end"))
        self.windowed = spec.windowed  # time windows: the window is hashed with the keys
        self.size_ms = spec.window.size_ms if spec.window is not None else 0
        self.slide_ms = to_millis(spec.window.slide) if spec.window is not None and \
            spec.window.slide else self.size_ms
        # the point-query fast path (keys.partition, keys.store_key): each group key's declared
        # type, and per window start its hash seed and ISO text, computed once
        kinds = [self.key_types.get(k) for k in spec.keys]
        self._kinds = list(zip(spec.keys, kinds, strict=True)) if all(
            k in TYPES for k in kinds) else None
        self._names = {c: json.dumps(c, ensure_ascii=False) for c in self.key_columns}
        # _locate_plain: string group keys of a time window, stored in this column order
        self._plain = self.windowed and all(k == "string" for k in kinds) and \
            self.key_columns == [*spec.keys, "window_start", "window_end"]
        # per window, computed once and remembered for the last few thousand (windows repeat
        # from lookup to lookup): its hash seed, its times as ISO text (``iso``), a start
        # given as text parsed, and all of it for _locate_plain
        remember = functools.lru_cache(maxsize=_CACHED_WINDOWS)
        self._window_seed = remember(self._seed)
        self._text_ms = remember(lambda text: time_ms(text, "window_start"))
        self._window = remember(self._window_parts)

    def _init_columns(self, keys: Sequence[str], key_columns: list[str],
                      key_types: Mapping[str, str], partitions: int, times: Sequence[str]
                      ) -> None:
        """What every key codec has: ``keys`` (the columns a key names: a query's group keys,
        a part's key columns), ``key_columns`` in store byte order, their Spark types, the
        state partitions, and which key columns are times (stored as ISO text, ``iso(ms)``
        being ``ms_to_iso``, remembered for the last few thousand)."""
        self.keys, self.key_columns = list(keys), key_columns
        self.key_types, self.partitions = dict(key_types), partitions
        self._times = frozenset(times)
        self.iso = functools.lru_cache(maxsize=_CACHED_WINDOWS)(ms_to_iso)

    @property
    def kind(self) -> str:
        """``spec.kind``: ``running`` (a key-value store) or a window kind."""
        return self.spec.kind

    # --- keys -------------------------------------------------------------------------
    def parse(self, text: str | bytes, what: str = "key", *, window: bool = False) -> dict:
        """A key sent as JSON text (over REST): one object naming only key columns — the
        group keys, and with ``window`` the ``window_start`` (a point query's key; a time
        window's ``window_end`` may come too, a time, unused: the start names the window).
        Its values are checked by ``group`` / ``key``; a Python dict may carry other columns
        (a row), JSON text may not.

        Example:
            >>> from statekit.model.query_spec import QuerySpec, tumbling
            >>> codec = KeyCodec(QuerySpec(keys=["player"], window=tumbling("10 minutes")),
            ...                  {"player": "string"}, partitions=3)
            >>> codec.parse('{"player": "p07", "window_start": 0}', window=True)
            {'player': 'p07', 'window_start': 0}
            >>> codec.parse('{"player": "p07", "count": 3}')
            Traceback (most recent call last):
            ...
            statekit.errors.BadArgument: bad key: '{"player": "p07", "count": 3}'; accepted: \
a JSON object of the key columns ['player'] (not ['count'])
        """
        columns = [*self.spec.keys, *(("window_start",) if window else ()),
                   *(("window_end",) if window and self.windowed else ())]
        value = parse_key_object(text, what, columns)
        for name in self.spec.keys:
            check_text_length(name, value.get(name), what)
        if "window_end" in value:
            time_ms(value["window_end"], "window_end")
        return value

    def json_schema(self, window: bool = False) -> dict:
        """The JSON Schema of a key ``parse`` takes (what the REST service's OpenAPI schema
        states): the group keys by their Spark types, and with ``window`` its start.

        Example:
            >>> from statekit.model.query_spec import QuerySpec, tumbling
            >>> codec = KeyCodec(QuerySpec(keys=["player"], window=tumbling("10 minutes")),
            ...                  {"player": "string"}, partitions=3)
            >>> schema = codec.json_schema(window=True)
            >>> schema["required"], schema["properties"]["window_start"]["anyOf"][0]
            (['player', 'window_start'], {'type': 'integer', 'minimum': 0, \
'maximum': 253402299600000, 'multipleOf': 600000})
        """
        properties = {name: dict(VALUE_SCHEMAS.get(self.key_types.get(name), ANY_VALUE_SCHEMA))
                      for name in self.spec.keys}
        required = list(properties)
        if window:
            properties["window_start"] = self.window_start_schema()
            required.append("window_start")
            if self.windowed:
                properties["window_end"] = time_schema()  # may come (a row's); unused
        return {"type": "object", "properties": properties, "required": required,
                "additionalProperties": False}

    def window_start_schema(self) -> dict:
        """The JSON Schema of one of this store's window starts (``window_start``); a session
        store's: any time."""
        if not self.windowed:
            return time_schema()
        last = (MAX_TIME_MS - self.size_ms) // self.slide_ms * self.slide_ms
        forms = [{"type": "integer", "minimum": 0, "maximum": last,
                  "multipleOf": self.slide_ms}]
        text = window_start_text_schema(self.slide_ms)
        if text is not None:
            forms.append(text)
        return {"anyOf": forms}

    def group(self, key: object) -> dict:
        """The group keys of ``key`` (a dict holding at least them)."""
        if isinstance(key, str | bytes):
            key = parse_key_json(key)
        if not isinstance(key, Mapping):
            raise BadArgument("key", key, f"a dict of the group keys {list(self.spec.keys)}")
        missing = [k for k in self.spec.keys if k not in key or key[k] is None]
        if missing:
            raise BadArgument("key", dict(key), f"a value for each group key "
                                                f"{list(self.spec.keys)} (missing {missing})")
        return {k: self._value(k, key[k]) for k in self.spec.keys}

    def _value(self, name: str, value: object) -> object:
        """A group key's value, when it is one of its Spark type that Spark can hash."""
        kind = self.key_types.get(name)
        if kind == "string" and type(value) is str:  # the common key, checked cheaply:
            try:                                     # it hashes when it encodes
                value.encode("utf-8")
                return value
            except UnicodeEncodeError:
                pass  # a lone surrogate: refused below
        return checked_value(name, value, kind)

    def key(self, key: object) -> dict:
        """A full state key: group keys and ``window_start`` (and ``window_end``) in ms; for a
        running aggregate (a key-value store) the group keys alone."""
        raw = parse_key_json(key) if isinstance(key, str | bytes) else key
        group = self.group(raw)
        if self.spec.kind == "running":
            return group
        if "window_start" not in raw:
            raise BadArgument("key", dict(raw), "the group keys and window_start (a point "
                                                "query names one window)")
        if not self.windowed:  # a session's start: any time
            return {**group, "window_start": self._start_ms(raw["window_start"])}
        start = self.window_start(raw["window_start"])
        return {**group, "window_start": start, "window_end": start + self.size_ms}

    def window_start(self, value: object) -> int:
        """The start (ms) of one of this store's time windows: on the windows' grid (a
        multiple of the slide since the epoch; tumbling: of the size) and ending by the year
        9999, else BadArgument naming the nearest valid starts.

        Example:
            >>> from statekit.model.query_spec import QuerySpec, hopping
            >>> codec = KeyCodec(QuerySpec(keys=["player"], window=hopping("10 minutes",
            ...                  "5 minutes")), {"player": "string"}, partitions=3)
            >>> codec.window_start("2026-01-05T10:05Z")
            1767607500000
            >>> try:
            ...     codec.window_start("2026-01-05T10:07Z")
            ... except BadArgument as exc:
            ...     print(exc.accepted.split(": ")[-1])
            the nearest are 2026-01-05T10:05:00.000Z and 2026-01-05T10:10:00.000Z
        """
        start = self._start_ms(value)
        if start % self.slide_ms:
            below = start - start % self.slide_ms
            window = self.spec.window
            sliding = f" sliding every {window.slide}" if window.kind == "hopping" else ""
            raise BadArgument("window_start", value,
                              f"the start of a {window.size} window{sliding} (a multiple of "
                              f"{self.slide_ms:,} ms since the epoch): the nearest are "
                              f"{self.iso(below)} and {self.iso(below + self.slide_ms)}")
        if start + self.size_ms > MAX_TIME_MS:
            raise BadArgument("window_start", value, f"the start of a window that ends by "
                                                     f"{ms_to_iso(MAX_TIME_MS)}")
        return start

    def store_key(self, key: Mapping) -> bytes:
        """The changelog key bytes of a full key (``key()``'s result)."""
        return self._encode(self._key_row(key))[0]

    @staticmethod
    def is_prefix(key: Mapping) -> bool:
        """False: a statekit query's store is asked by full key (``PartKeyCodec`` also takes
        a map state's grouping key alone)."""
        return False

    def locate(self, key: object) -> tuple[int, bytes, dict]:
        """A point query's key: its partition, its store key bytes and its columns as
        ``row()`` gives them (what ``key()``, ``partition()`` and ``store_key()`` compute,
        in one pass)."""
        fast = self._locate_plain(key) if type(key) is dict else None
        if fast is not None:
            return fast
        full = self.key(key)
        data, plain = self._encode(self._key_row(full))
        partition = self.partition(full) if self._kinds is None else self._hashed(
            full, full["window_start"] if self.windowed else 0)  # key() checked it all
        return partition, data, plain if plain is not None else json.loads(data)

    def _locate_plain(self, key: dict) -> tuple[int, bytes, dict] | None:
        """``locate`` for the commonest key, in one pass: string group keys (of Spark type
        string) and a time window's start in ms as an int. None for any other key (then the
        general path checks it, and names what is wrong)."""
        if not self._plain:
            return None
        start = key.get("window_start")
        if type(start) is not int or not 0 <= start <= MAX_TIME_MS or start % self.slide_ms:
            return None
        window = self._window(start)
        if window is None:
            return None
        h, iso_start, iso_end = window
        row, parts = {}, []
        names = self._names
        for name in self.spec.keys:
            value = key.get(name)
            if type(value) is not str:
                return None
            try:
                h = hash_bytes(value.encode("utf-8"), h)
            except UnicodeEncodeError:  # a lone surrogate: refused by the general path
                return None
            row[name] = value
            parts.append(f"{names[name]}:{encode_basestring(value)}")
        row["window_start"], row["window_end"] = iso_start, iso_end
        text = (f'{{{",".join(parts)},"window_start":"{iso_start}",'
                f'"window_end":"{iso_end}"}}')
        return pmod(h, self.partitions), text.encode(), row

    def _key_row(self, key: Mapping, columns: Sequence[str] | None = None) -> dict:
        """A key's columns in store order (all ``key_columns``, or the leading ``columns``
        of a prefix key), its times as ISO text (a null time stays null)."""
        return {c: self.iso(key[c]) if c in self._times and key[c] is not None else key[c]
                for c in (self.key_columns if columns is None else columns)}

    def _encode(self, row: dict) -> tuple[bytes, dict | None]:
        """``encode_json(row, key_columns)``, and ``row`` when it is what decoding gives back.

        Plain str and int keys (and the ISO times) are written here as ``encode_json``
        writes them, without parsing each time back (it formats any time it is given).
        """
        if not all(type(row[k]) in (str, int) for k in self.spec.keys):
            return encode_json(row, self.key_columns), None
        names = self._names
        text = ",".join([f"{names[c]}:{encode_basestring(v) if type(v) is str else v}"
                         for c, v in row.items()])
        return ("{" + text + "}").encode(), row

    def _start_ms(self, value: object) -> int:
        """``time_ms(value)`` of a window start (text remembered: keys over REST name their
        window as ISO text)."""
        return self._text_ms(value) if type(value) is str else time_ms(value, "window_start")

    def _window_parts(self, start: int) -> tuple[int, str, str] | None:
        """A window's hash seed, start and end as ISO text (None: it ends after the year
        9999, which ``key()`` refuses by name)."""
        end = start + self.size_ms
        if end > MAX_TIME_MS:
            return None
        return self._window_seed(start), self.iso(start), self.iso(end)

    def group_prefix(self, group: Mapping) -> dict:
        return {k: group[k] for k in self.keys}

    def partition(self, key: Mapping) -> int:
        """The Spark state partition of a full key (session stores: of its group keys)."""
        if self._kinds is not None and all(k in key for k, _ in self._kinds) and (
                not self.windowed or "window_start" in key):
            return self._hashed(key, time_ms(key["window_start"], "window_start")
                                if self.windowed else 0)
        row = dict(key)
        if self.windowed:
            if "window_start" not in row:
                raise BadArgument("key", row, "the group keys and window_start (a time "
                                              "window's state is placed by its window)")
            start = time_ms(row["window_start"], "window_start")
            row["window_start"] = start * 1000  # Spark keeps times in microseconds
            row["window_end"] = (start + self.size_ms) * 1000
        return state_partition(row, self.spec.keys, self.windowed, self.partitions,
                               self.key_types)

    def _hashed(self, key: Mapping, start: int) -> int:
        """``partition`` when every group key is typed (as the metadata topic gives them):
        the group keys hashed on from the window's remembered seed (``start``, in ms)."""
        h = self._window_seed(start) if self.windowed else SEED
        for name, kind in self._kinds:
            value = key[name]
            h = hash_bytes(value.encode("utf-8"), h) if kind == "string" and \
                type(value) is str else hash_value(value, kind, h)
        return pmod(h, self.partitions)

    def _seed(self, start: int) -> int:
        """The running hash after a time window's struct (start, end in microseconds)."""
        return hash_value((start + self.size_ms) * 1000, "timestamp",
                          hash_value(start * 1000, "timestamp", SEED))

    def window_starts(self, time_from: object, time_to: object) -> list[int]:
        """Starts (ms) of every window of this store starting in [time_from, time_to]."""
        return list(self._starts(time_from, time_to))

    def _starts(self, time_from: object, time_to: object) -> range:
        low, high = time_ms(time_from, "time_from"), time_ms(time_to, "time_to")
        if low > high:
            raise BadArgument("time_from", time_from, f"a time no later than time_to={time_to}")
        first = -(-low // self.slide_ms) * self.slide_ms
        return range(first, high + 1, self.slide_ms)

    def partitions_of_range(self, group: Mapping, time_from: object, time_to: object
                            ) -> dict[int, list[int]]:
        """partition → the window starts of ``group``'s windows in the range it holds.

        Time windows of one key are spread over partitions (the window is hashed
        with the key); a session store keeps all of a key's sessions in one partition.
        A long range stops once every partition has a window (the rest adds no
        partition: the lists are then its first windows only).
        """
        if self.spec.kind == "running":
            raise BadArgument("query", "a time range", "point and range queries by key (a "
                                                       "running aggregate has no windows)")
        if not self.windowed:
            low, high = time_ms(time_from, "time_from"), time_ms(time_to, "time_to")
            return {self.partition(group): [low, high]}
        out: dict[int, list[int]] = {}
        for start in self._starts(time_from, time_to):
            out.setdefault(self.partition({**group, "window_start": start}), []).append(start)
            if len(out) == self.partitions:
                break
        return dict(sorted(out.items()))

    # --- values -----------------------------------------------------------------------
    @staticmethod
    def row(key: bytes, value: bytes) -> dict:
        """A store entry as one row: key columns then value columns (times as ISO text)."""
        return {**decode_json(key), **decode_json(value)}
