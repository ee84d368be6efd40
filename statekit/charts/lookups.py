"""The cost of a lookup by where the state lives (``statekit.stores.lookup_cost``).

Example:
    >>> import pandas as pd
    >>> costs = pd.DataFrame({"where": ["local RocksDB", "service over HTTP (loopback)"],
    ...                       "us_per_lookup": [0.4, 130.0]})
    >>> lookup_cost_chart(costs).mark
    'bar'
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from statekit.charts.data import inline
from statekit.validate import require_columns


def lookup_cost_chart(costs: pd.DataFrame, title: str = "One lookup, by where the state lives"
                      ) -> alt.Chart:
    """Microseconds per lookup (log scale), one bar per place, labelled with the number."""
    require_columns(costs, ("where", "us_per_lookup"), "costs", "as lookup_costs gives")
    data = costs[["where", "us_per_lookup"]].assign(
        label=costs["us_per_lookup"].map(lambda us: f"{us:,.2f} µs"))
    return (alt.Chart(inline(data), title=title).mark_bar()
            .encode(y=alt.Y("where:N", sort=None, title=None),
                    x=alt.X("us_per_lookup:Q", scale=alt.Scale(type="log"),
                            title="µs per lookup (log scale)"),
                    tooltip=["where:N", alt.Tooltip("us_per_lookup:Q", format=",.2f")])
            .properties(width=420, height=110))


def top_k_chart(snapshot: pd.DataFrame, title: str = "The k best scores each player keeps"
                ) -> alt.Chart:
    """A ``TopK`` store's snapshot (``player``, ``rank``, ``score``): one point per entry."""
    require_columns(snapshot, ("player", "rank", "score"), "snapshot", "a TopK store's snapshot")
    data = snapshot[["player", "rank", "score"]]
    return (alt.Chart(inline(data), title=title).mark_point(filled=True, size=50)
            .encode(x=alt.X("player:N", title="player"), y=alt.Y("score:Q", title="score"),
                    color=alt.Color("rank:O", title="rank"),
                    tooltip=["player:N", "rank:O", "score:Q"])
            .properties(width=560, height=200))
