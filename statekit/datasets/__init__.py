"""Sample data for statekit: a leaderboard game-event stream and NYC flights of 2013.

Every dataset is a :class:`Dataset`: a name and a pandas frame of Kafka-ready
records with columns ``key`` (str or None), ``value`` (the raw line, JSON) and
``timestamp`` (event time, epoch milliseconds), ready for
:func:`statekit.kafka.dataset_replay.replay`.

The game events come from one deterministic generator,
:func:`generate_game_events` (``game_stream``); ``data/game_events.jsonl`` is its
committed output (a test checks that they are equal). The stream holds 6 malformed
lines and 8 late events at fixed positions (see ``MALFORMED_LINES``, ``LATE_LINES``
and ``data/README.md``); :func:`parse_game_events` (``game_parsing``) is the parsing
rule in plain pandas. The datasets themselves and their queries are in ``catalog``.
Names resolve on first use.

Example:
    >>> from statekit.datasets import game_events, generate_game_events, parse_game_events
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

from statekit._lazy import lazy_exports

_NAMES = {
    **dict.fromkeys(("GAME_START", "START_MS", "GAME_SPAN_MS", "MAX_JITTER_MS", "LATE_BY_MS",
                     "malformed_lines", "late_lines", "MALFORMED_LINES", "LATE_LINES",
                     "generate_game_events"), "statekit.datasets.game_stream"),
    **dict.fromkeys(("REASONS", "first_json_value", "inspect_lines", "parse_game_events"),
                    "statekit.datasets.game_parsing"),
    "Dataset": "statekit.datasets.dataset",
    **dict.fromkeys(("DATA_DIR", "GAME_EVENTS_FILE", "GAME_EVENT_SCHEMA", "GAME_SPEC",
                     "FLIGHT_EVENT_SCHEMA", "FLIGHT_SPEC", "FLIGHT_KEYS", "TEAMS",
                     "game_events", "flights", "player_profiles", "airlines"),
                    "statekit.datasets.catalog"),
}
__getattr__, __dir__ = lazy_exports(__name__, _NAMES)
__all__ = sorted(_NAMES)
