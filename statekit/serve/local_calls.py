"""A query run on this process's own serving instance, as the REST service would run it.

``call_local(instance, kind, params, partitions)`` takes a query as its REST parameters say
(``min_batch``, ``timeout``, ``limit``...) and calls the instance's method; a router that is
itself a serving process answers its own partitions this way, without HTTP.

Example:
    >>> sorted(LOCAL_CALLS)[:3]
    ['all', 'approximate_num_entries', 'fetch']
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from statekit.errors import BadArgument
from statekit.serve.results import MAX_LIMIT, QueryResult

if TYPE_CHECKING:
    from statekit.serve.instance import ServingInstance


def _read_limit(params: Mapping[str, object]) -> int:
    """Rows a scan reads per partition: one more than the answer may hold, so a longer
    answer is seen (and refused), never cut."""
    limit = params.get("limit")
    return MAX_LIMIT + 1 if limit is None else int(limit) + 1


def _wait(params: Mapping[str, object]) -> float:
    """The seconds a query waits for its ``min_batch``."""
    return float(params.get("timeout") or 0)


LOCAL_CALLS: dict[str, Callable] = {
    "get": lambda i, p, parts: i.get(p["key"], min_batch=p.get("min_batch"),
                                     timeout=_wait(p)),
    "fetch": lambda i, p, parts: i.fetch(p["key"], p["time_from"], p["time_to"],
                                         partitions=parts, min_batch=p.get("min_batch"),
                                         timeout=_wait(p)),
    "find_sessions": lambda i, p, parts: i.find_sessions(
        p["key"], p["earliest_end"], p["latest_start"], partitions=parts,
        min_batch=p.get("min_batch"), timeout=_wait(p)),
    "all": lambda i, p, parts: i.all(partitions=parts, limit=_read_limit(p),
                                     min_batch=p.get("min_batch"), timeout=_wait(p)),
    "fetch_all": lambda i, p, parts: i.fetch_all(p["time_from"], p["time_to"],
                                                 partitions=parts, limit=_read_limit(p),
                                                 min_batch=p.get("min_batch"),
                                                 timeout=_wait(p)),
    "fetch_range": lambda i, p, parts: i.fetch_range(
        p.get("key_from"), p.get("key_to"), p["time_from"], p["time_to"], partitions=parts,
        limit=_read_limit(p), min_batch=p.get("min_batch"), timeout=_wait(p)),
    "range": lambda i, p, parts: i.range(p.get("key_from"), p.get("key_to"), partitions=parts,
                                         limit=_read_limit(p), min_batch=p.get("min_batch"),
                                         timeout=_wait(p)),
    "top_k": lambda i, p, parts: i.top_k(p["window_start"], p["k"], p["by"],
                                         partitions=parts, min_batch=p.get("min_batch"),
                                         timeout=_wait(p), enrich=p.get("enrich")),
    "approximate_num_entries": lambda i, p, parts: i.approximate_num_entries(partitions=parts),
    "table": lambda i, p, parts: i.table(partitions=parts, min_batch=p.get("min_batch"),
                                         timeout=_wait(p)),
    "position": lambda i, p, parts: i.position(partitions=parts, min_batch=p.get("min_batch"),
                                               timeout=_wait(p)),
}


def call_local(instance: ServingInstance, kind: str, params: Mapping[str, object],
               partitions: Sequence[int] | None) -> QueryResult:
    """Run query ``kind`` on ``instance`` in this process."""
    if kind not in LOCAL_CALLS:
        raise BadArgument("query", kind, sorted(LOCAL_CALLS))
    return LOCAL_CALLS[kind](instance, params, partitions)
