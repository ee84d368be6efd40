"""Charts of a key's explanation (``StatefulQuery.explain``): pure data → Altair.

``explain_chart`` shows, batch by batch, the key's input records (counted, late, malformed)
and beside it the aggregate's value after each batch that changed it, one line per window.

Example:
    >>> import pandas as pd
    >>> records = pd.DataFrame({"batch": [0, 0, 1], "counted": [True, False, True],
    ...                         "why_not": [None, "late: ...", None]})
    >>> history = pd.DataFrame({"batch": [0, 1], "change": ["put", "put"],
    ...                         "window_start": pd.to_datetime(["2026-01-05 10:00"] * 2),
    ...                         "count": [1, 2]})
    >>> spec = explain_records_chart(records).to_dict()
    >>> sorted({row["outcome"] for row in spec["datasets"][spec["data"]["name"]]})
    ['counted', 'late']
    >>> values_chart = explain_values_chart(history, "count")
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import altair as alt
import pandas as pd

from statekit.charts.data import inline
from statekit.charts.tooltips import typed_tooltips
from statekit.errors import BadArgument

if TYPE_CHECKING:
    from statekit.query.explain import KeyExplanation

OUTCOME_COLORS = {"counted": "#4c78a8", "late": "#f58518", "malformed": "#e45756"}


def explain_records_chart(records: pd.DataFrame) -> alt.Chart:
    """The key's input records per batch, stacked by outcome."""
    outcome = records["why_not"].fillna("counted").astype(str).str.split(":").str[0]
    data = (records.assign(outcome=outcome).groupby(["batch", "outcome"], as_index=False)
            .size().rename(columns={"size": "records"}))
    data = data.astype({"batch": "int64", "records": "int64"})
    return alt.Chart(inline(data), title="The key's input records, per batch").mark_bar().encode(
        x=alt.X("batch:O", axis=alt.Axis(labelAngle=0)),
        y=alt.Y("records:Q", title="records"),
        color=alt.Color("outcome:N", scale=alt.Scale(domain=list(OUTCOME_COLORS),
                                                     range=list(OUTCOME_COLORS.values()))),
        tooltip=typed_tooltips(data, ["batch", "outcome", "records"]),
    ).properties(width=300, height=180)


def explain_values_chart(history: pd.DataFrame, value: str) -> alt.Chart:
    """``value`` after each batch that changed the key, one line per window."""
    if value not in history.columns:
        raise BadArgument("value", value, "a value column of the explanation: " + ", ".join(
            c for c in history.columns if c not in ("batch", "change", "partition")))
    puts = history[history["change"] == "put"]
    series = "window_start" if "window_start" in puts.columns else None
    data = puts[["batch", value, *([series] if series else [])]].copy()
    data[value] = pd.to_numeric(data[value], errors="coerce").astype("float64")
    data["batch"] = data["batch"].astype("int64")
    encoding = {"x": alt.X("batch:O", axis=alt.Axis(labelAngle=0)),
                "y": alt.Y(f"{value}:Q", title=f"{value} after the batch"),
                "tooltip": typed_tooltips(data, list(data.columns))}
    if series:
        encoding["color"] = alt.Color(f"{series}:T", title="window", legend=None)
        encoding["detail"] = f"{series}:T"
    return alt.Chart(inline(data), title=f"{value}, batch by batch").mark_line(
        point=True).encode(**encoding).properties(width=300, height=180)


def explain_chart(explanation: KeyExplanation, value: str | None = None) -> alt.HConcatChart:
    """``explain_records_chart`` beside ``explain_values_chart`` (the first aggregate when
    ``value`` is None)."""
    value = value or explanation.value_columns[0]
    return alt.hconcat(explain_records_chart(explanation.records),
                       explain_values_chart(explanation.history, value))
