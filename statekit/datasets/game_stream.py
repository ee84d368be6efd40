"""The game-event stream's generator: deterministic JSON lines with malformed and late ones.

:func:`generate_game_events` writes the leaderboard's events; ``data/game_events.jsonl`` is
its committed output. 6 malformed lines and 8 late events stand at fixed positions
(:func:`malformed_lines`, :func:`late_lines`).

Example:
    >>> lines = generate_game_events(n=200, seed=1)
    >>> len(lines), sorted(malformed_lines(200))[:2]
    (200, [11, 41])
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta

from statekit.validate import whole_number

#: The first event time of the game stream.
GAME_START = datetime(2026, 1, 5, 10, 0, 0, tzinfo=UTC)
#: The first event time in epoch milliseconds.
START_MS = int(GAME_START.timestamp()) * 1000
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
    n = whole_number(n, "number of events n", minimum=100, maximum=10_000_000)
    players = whole_number(players, "number of players", minimum=1, maximum=1000)
    games = whole_number(games, "number of games", minimum=1, maximum=99)
    rng = random.Random(seed)
    width = max(2, len(str(players - 1)))
    names = [f"p{i:0{width}d}" for i in range(players)]
    weights = [0.2 + rng.random() for _ in names]          # some players play more
    skill = [20 + 60 * rng.random() for _ in names]        # and some score more
    malformed = _malformed_positions(n)
    late = set(_late_positions(n))
    mean_step = GAME_SPAN_MS / n
    clock = START_MS
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
            ms = max(START_MS, clock - int(rng.random() * MAX_JITTER_MS))
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
