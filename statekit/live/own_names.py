"""Which names an attached query's parts are read under: the person's (its plan's, read
from ``query.explain(extended=True)``) or Spark's own (``names="spark"``).

Example:
    >>> names_choice("own")
    'own'
"""

from __future__ import annotations

import contextlib
import io

from statekit.errors import (
    BadArgument,
)

#: What ``names=`` takes: the names of the person's query (its plan's), or Spark's own.
NAMES = ("own", "spark")


def names_choice(names: object) -> str:
    if names not in NAMES:
        raise BadArgument("names", names, "'own' (the names your query gives the columns: "
                                          "join keys, aggregates' aliases) or 'spark' "
                                          "(the names Spark's state store keeps)")
    return str(names)


def query_plan(query) -> str:
    """The text ``query.explain(extended=True)`` prints (PySpark prints it from Python, the
    classic client and Spark Connect's alike: it is captured here); "" when the query does
    not give it. Before the query has run a batch since it started, Spark prints "No
    physical plan. Waiting for data." instead."""
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            query.explain(extended=True)
    except Exception:  # a query that cannot explain itself keeps Spark's names
        return ""
    return printed.getvalue()


#: Seconds ``ship_changelogs`` waits for the query's plan (it has one once it ran a batch
#: since it started) before shipping under Spark's names.
PLAN_WAIT = 10.0
