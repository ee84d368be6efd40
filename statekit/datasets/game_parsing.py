"""The game events' parsing rule in plain pandas: good rows and malformed ones, with reasons.

A reference for the query's own rule (``statekit.query.parsing.parse_events``) over the
game stream; :func:`first_json_value` reads a value as Spark's ``from_json`` does.

Example:
    >>> good, bad = parse_game_events(['{"player": "p1", "ts": "2026-01-05T10:00:00Z"}', 'x'])
    >>> len(good), bad.reason.tolist()
    (1, ['not a JSON object'])
"""

from __future__ import annotations

import json
from collections.abc import Iterable

import pandas as pd

#: Reasons :func:`parse_game_events` gives, in the order the rule checks them (a wrong-typed
#: value follows its reason after ": "); the same words Spark's side output uses.
REASONS = (
    "not a JSON object",
    "score is not a bigint",
    "ts is not a timestamp",
    "player is missing or null",
    "ts is missing or null",
)


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


def inspect_lines(lines: Iterable[str]) -> pd.DataFrame:
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
    frame = inspect_lines(lines)
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
