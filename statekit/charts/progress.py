"""Charts of a query over its batches: state rows, and puts/deletes of the change feed.

Example:
    >>> import pandas as pd
    >>> progress = pd.DataFrame({"batch": [0, 1, 2], "input_rows": [500, 500, 0],
    ...     "state_rows_total": [40, 75, 60], "state_rows_updated": [40, 50, 0],
    ...     "state_rows_removed": [0, 15, 15]})
    >>> state_rows_chart(progress).to_dict()["vconcat"][0]["mark"]["type"]
    'line'
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from statekit.charts.data import inline
from statekit.charts.tooltips import typed_tooltips
from statekit.errors import BadArgument

_NEEDED = ("batch", "input_rows", "state_rows_total", "state_rows_updated", "state_rows_removed")


def state_rows_chart(
    progress: pd.DataFrame, title: str = "State rows per batch"
) -> alt.VConcatChart:
    """Rows held in state after each batch (line) over rows in, updated and evicted (bars)."""
    missing = [c for c in _NEEDED if c not in progress.columns]
    if missing:
        raise BadArgument("progress frame columns", sorted(progress.columns),
                          f"a frame from StatefulQuery.progress() (needs {', '.join(_NEEDED)})")
    data = progress[list(_NEEDED)].copy()
    # The line in a colour of its own, the bars' legend under the bars: beside the line, the
    # legend read as if it named the line ("input rows").
    total = alt.Chart(data, title=title).mark_line(point=True, color="#333333").encode(
        x=alt.X("batch:O", title="batch", axis=alt.Axis(labelAngle=0)),
        y=alt.Y("state_rows_total:Q", title="rows in state"),
        tooltip=list(_NEEDED),
    ).properties(width=520, height=180)
    long = data.melt(id_vars="batch", value_vars=["input_rows", "state_rows_updated",
                                                   "state_rows_removed"],
                     var_name="kind", value_name="rows")
    long["kind"] = long["kind"].map({"input_rows": "input rows", "state_rows_updated": "updated",
                                     "state_rows_removed": "evicted"})
    bars = alt.Chart(long).mark_bar().encode(
        x=alt.X("batch:O", title="batch", axis=alt.Axis(labelAngle=0)),
        xOffset="kind:N",
        y=alt.Y("rows:Q", title="rows"),
        color=alt.Color("kind:N", title=None, legend=alt.Legend(orient="bottom"),
                        scale=alt.Scale(domain=["input rows", "updated", "evicted"])),
        tooltip=["batch", "kind", "rows"],
    ).properties(width=520, height=140)
    return alt.vconcat(total, bars)


def change_feed_chart(changes: pd.DataFrame, title: str = "Change feed per batch") -> alt.Chart:
    """Puts and deletes per batch of a change feed (``StatefulQuery.changes()``)."""
    if not {"batch", "change"} <= set(changes.columns):
        raise BadArgument("change feed columns", sorted(changes.columns),
                          "a frame from StatefulQuery.changes() (needs batch, change)")
    counts = changes.groupby(["batch", "change"]).size().rename("records").reset_index()
    return alt.Chart(counts, title=title).mark_bar().encode(
        x=alt.X("batch:O", axis=alt.Axis(labelAngle=0)),
        y=alt.Y("records:Q", stack=True),
        color=alt.Color("change:N", scale=alt.Scale(domain=["put", "delete"],
                                                    range=["#4c78a8", "#e45756"])),
        tooltip=["batch", "change", "records"],
    ).properties(width=520, height=160)


def state_growth_chart(growth: pd.DataFrame,
                       title: str = "State rows over batches: unbounded, TTL, windowed",
                       subtitle: str = ("Without a window every key stays; a TTL forgets idle "
                                        "keys; a watermark evicts closed windows.")
                       ) -> alt.Chart:
    """State rows after each batch, one line per query (``statekit.monitor.growth.state_growth``).

    Example:
        >>> frame = pd.DataFrame({"query": ["running"] * 3 + ["windowed"] * 3,
        ...     "batch": [0, 1, 2] * 2, "input_rows": [10] * 6,
        ...     "state_rows_total": [5, 9, 14, 5, 7, 6], "state_rows_removed": [0, 0, 0, 0, 2, 4]})
        >>> state_growth_chart(frame).to_dict()["encoding"]["color"]["field"]
        'query'
    """
    needed = ("query", "batch", "state_rows_total", "state_rows_removed")
    missing = [c for c in needed if c not in growth.columns]
    if missing:
        raise BadArgument("state growth frame columns", sorted(growth.columns),
                          f"a frame from state_growth() (needs {', '.join(needed)})")
    data = growth[[c for c in ("query", "batch", "input_rows", "state_rows_total",
                               "state_rows_removed") if c in growth.columns]]
    return alt.Chart(inline(data), title=alt.Title(title, subtitle=subtitle)).mark_line(
        point=True).encode(
        x=alt.X("batch:Q", title="batch", axis=alt.Axis(format="d", tickMinStep=1)),
        y=alt.Y("state_rows_total:Q", title="rows in state"),
        color=alt.Color("query:N", title=None),
        tooltip=typed_tooltips(data, data.columns),
    ).properties(width=520, height=220)
