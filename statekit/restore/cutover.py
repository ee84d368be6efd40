"""Moving a store — to another instance, or to a new version — with and without downtime.

* **cold**: stop the old owner, restore the new store from the whole changelog, then serve:
  nothing answers for the whole restore;
* **warm**: restore the new store beside the old one while the old one still serves (as a
  standby does), then stop the old, catch the new one up on the records written since
  (its checkpointed offsets: only the tail), and serve: nothing answers only while the tail
  is read. Kafka Streams does this for a task moving to another instance (warm-up replicas,
  ``max.warmup.replicas``, ``acceptable.recovery.lag``); a new store version is built the
  same way, beside the old.

``cutover_times`` puts the restores of both side by side, from the ``RestoreResult`` of each.

Example:
    >>> times = cutover_times(cold, warm_up, catch_up)                   # doctest: +SKIP
    >>> times.groupby("strategy")["seconds"].sum()                       # doctest: +SKIP
"""

from __future__ import annotations

from statekit._lazy import pd
from statekit.errors import BadArgument
from statekit.restore.result import RestoreResult

SERVING, DOWN = "the old store still answers", "nothing answers"
COLUMNS = ["strategy", "phase", "step", "seconds", "records"]


def _figures(result: RestoreResult, what: str) -> tuple[float, int]:
    if not isinstance(result, RestoreResult):
        raise BadArgument(what, type(result).__name__, "a RestoreResult (restore_stores(...))")
    return result.wall_seconds, int(result.report["records"].sum()) if len(result.report) else 0


def cutover_times(cold: RestoreResult, warm_up: RestoreResult,
                  catch_up: RestoreResult) -> pd.DataFrame:
    """One row per step: ``strategy`` (cold, warm), ``phase`` (``SERVING`` or ``DOWN``),
    ``step``, ``seconds`` (wall time of that restore) and ``records`` (read by it).

    ``cold``: a full restore into an empty store; ``warm_up``: a restore of the same store
    up to a point; ``catch_up``: the restore of that store again, reading from its
    checkpointed offsets to the end."""
    cold_s, cold_n = _figures(cold, "cold")
    warm_s, warm_n = _figures(warm_up, "warm_up")
    tail_s, tail_n = _figures(catch_up, "catch_up")
    rows = [("cold", DOWN, "restore the whole changelog", cold_s, cold_n),
            ("warm", SERVING, "warm up beside the old store", warm_s, warm_n),
            ("warm", DOWN, "catch up on the tail, then switch", tail_s, tail_n)]
    return pd.DataFrame(rows, columns=COLUMNS)
