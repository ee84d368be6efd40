"""Charts of a diff of two snapshots (``statekit.diff``): pure data → Altair.

``diff_chart`` shows how many keys were added, removed, changed and left unchanged; given a
numeric value column, beside it each changed key's old value against its new one (a key on
the diagonal would not have changed; above it, the value grew).

Example:
    >>> import pandas as pd
    >>> from statekit.inspect.state_diff import diff
    >>> d = diff(pd.DataFrame({"k": ["a", "b"], "n": [1, 2]}),
    ...          pd.DataFrame({"k": ["b", "c"], "n": [5, 1]}), keys=["k"])
    >>> chart = diff_chart(d, value="n")
    >>> [[m["mark"]["type"] for m in c["layer"]] for c in chart.to_dict()["hconcat"]]
    [['bar', 'text'], ['circle', 'line']]
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import altair as alt
import pandas as pd

from statekit.charts.data import inline
from statekit.charts.tooltips import typed_tooltips
from statekit.errors import BadArgument

if TYPE_CHECKING:
    from statekit.inspect.diff_result import StateDiff

KIND_COLORS = {"added": "#2ca02c", "removed": "#d62728", "changed": "#ff7f0e",
               "unchanged": "#c7c7c7"}


def diff_counts_chart(d: StateDiff) -> alt.LayerChart:
    """Keys of each kind, one bar each, labelled with the count."""
    data = pd.DataFrame({"change": list(KIND_COLORS),
                         "keys": [int(d.counts[k]) for k in KIND_COLORS]})
    base = alt.Chart(inline(data), title="Keys by change").encode(
        y=alt.Y("change:N", sort=list(KIND_COLORS), title=None),
        x=alt.X("keys:Q", title="keys"))
    bars = base.mark_bar().encode(
        color=alt.Color("change:N", scale=alt.Scale(domain=list(KIND_COLORS),
                                                    range=list(KIND_COLORS.values())),
                        legend=None),
        tooltip=typed_tooltips(data, ["change", "keys"]))
    labels = base.mark_text(align="left", dx=3).encode(text=alt.Text("keys:Q", format=","))
    return (bars + labels).properties(width=300, height=120)


def diff_values_chart(d: StateDiff, value: str, limit: int = 5000) -> alt.LayerChart:
    """Each changed key's ``value`` before (x) and after (y), the diagonal for reference (at
    most ``limit`` keys, the first in the diff's key order)."""
    if value not in d.value_columns:
        raise BadArgument("value", value, f"a value column of the diff: {d.value_columns}")
    old, new = f"{value}_old", f"{value}_new"
    changed = d.of("changed").head(limit)
    if not all(pd.api.types.is_numeric_dtype(changed[c]) for c in (old, new)):
        raise BadArgument("value", value, "a numeric value column of the diff: " + ", ".join(
            c for c in d.value_columns
            if pd.api.types.is_numeric_dtype(d.frame.get(f"{c}_old", pd.Series(dtype=object)))))
    data = changed[[*d.key_columns, old, new]].astype({old: "float64", new: "float64"})
    low = float(min(data[old].min(), data[new].min())) if len(data) else 0.0
    high = float(max(data[old].max(), data[new].max())) if len(data) else 1.0
    points = alt.Chart(inline(data), title=f"Changed keys: {value}, old → new").mark_circle(
        size=30, opacity=0.6, color=KIND_COLORS["changed"]).encode(
        x=alt.X(f"{old}:Q", title=f"{value} (old)"),
        y=alt.Y(f"{new}:Q", title=f"{value} (new)"),
        tooltip=typed_tooltips(data, [*d.key_columns, old, new]))
    diagonal = alt.Chart(pd.DataFrame({"x": [low, high], "y": [low, high]})).mark_line(
        color="#888", strokeDash=[4, 4]).encode(x="x:Q", y="y:Q")
    return (points + diagonal).properties(width=260, height=220)


def diff_chart(d: StateDiff, value: str | None = None) -> alt.LayerChart | alt.HConcatChart:
    """``diff_counts_chart``, and beside it ``diff_values_chart`` of ``value`` when given."""
    counts = diff_counts_chart(d)
    if value is None:
        return counts
    return alt.hconcat(counts, diff_values_chart(d, value))
