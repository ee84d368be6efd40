"""Charts of a described checkpoint (``CheckpointView.describe()``): pure data → Altair.

Per operator, three small charts of ``Description.rows`` (state rows per partition per
batch): rows per partition after the last batch read, state rows per batch, and the skew
across partitions (the largest partition's share per batch against an even share); above
them, the watermark each batch ran with (``Description.watermarks``).

Example:
    >>> import pandas as pd
    >>> rows = pd.DataFrame({"operator_id": 0, "part": "default", "batch": [0, 0, 1, 1],
    ...                      "partition": [0, 1, 0, 1], "rows": [3, 1, 5, 1]})
    >>> chart = operator_chart(rows, 0)
    >>> [c.get("mark", {}).get("type", "layer") for c in chart.to_dict()["hconcat"]]
    ['bar', 'line', 'layer']
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import altair as alt
import pandas as pd

from statekit.charts.data import inline
from statekit.charts.tooltips import typed_tooltips
from statekit.errors import BadArgument

if TYPE_CHECKING:
    from statekit.inspect.describe import Description

ROW_COLUMNS = ("operator_id", "part", "batch", "partition", "rows")
SMALL = {"width": 200, "height": 140}


def _operator_rows(rows: pd.DataFrame, operator_id: int) -> pd.DataFrame:
    missing = [c for c in ROW_COLUMNS if c not in rows.columns]
    if missing:
        raise BadArgument("rows frame columns", sorted(rows.columns),
                          f"Description.rows (needs {', '.join(ROW_COLUMNS)})")
    chosen = rows[rows["operator_id"] == operator_id]
    if chosen.empty:
        raise BadArgument("operator_id", operator_id,
                          f"an operator of the description: {sorted(set(rows['operator_id']))}")
    return chosen.astype({"batch": "int64", "partition": "int64", "rows": "int64"})


def partition_rows_chart(rows: pd.DataFrame, operator_id: int = 0) -> alt.Chart:
    """Rows per partition after the last batch read, one bar per partition (and part)."""
    data = _operator_rows(rows, operator_id)
    last = data[data["batch"] == data["batch"].max()][["part", "batch", "partition", "rows"]]
    return alt.Chart(inline(last), title=f"Rows per partition (batch {int(last['batch'].max())})"
                     ).mark_bar().encode(
        x=alt.X("partition:O", axis=alt.Axis(labelAngle=0)),
        xOffset="part:N",
        y=alt.Y("rows:Q", title="state rows"),
        color=alt.Color("part:N", title="part"),
        tooltip=typed_tooltips(last, ["part", "partition", "rows"]),
    ).properties(**SMALL)


def state_rows_per_batch_chart(rows: pd.DataFrame, operator_id: int = 0) -> alt.Chart:
    """State rows after each batch read (all partitions), one line per part."""
    data = _operator_rows(rows, operator_id)
    totals = data.groupby(["part", "batch"], as_index=False)["rows"].sum()
    return alt.Chart(inline(totals), title="State rows per batch").mark_line(point=True).encode(
        x=alt.X("batch:O", axis=alt.Axis(labelAngle=0)),
        y=alt.Y("rows:Q", title="state rows"),
        color=alt.Color("part:N", title="part"),
        tooltip=typed_tooltips(totals, ["part", "batch", "rows"]),
    ).properties(**SMALL)


def skew_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Per part and batch: ``largest_share`` (the largest partition's share of rows; NA for
    an empty state) and ``even_share`` (1 / partitions)."""
    grouped = rows.groupby(["part", "batch"])["rows"]
    out = pd.DataFrame({"largest": grouped.max(), "total": grouped.sum(),
                        "partitions": grouped.size()}).reset_index()
    out["largest_share"] = (out["largest"] / out["total"].where(out["total"] > 0)).astype(float)
    out["even_share"] = 1 / out["partitions"]
    return out


def skew_chart(rows: pd.DataFrame, operator_id: int = 0) -> alt.LayerChart:
    """The largest partition's share of state rows per batch (line) against an even share
    (dashed rule): a line near 1 means one partition holds the state."""
    data = skew_table(_operator_rows(rows, operator_id))
    base = alt.Chart(inline(data), title="Skew across partitions")
    line = base.mark_line(point=True).encode(
        x=alt.X("batch:O", axis=alt.Axis(labelAngle=0)),
        y=alt.Y("largest_share:Q", title="largest partition's share",
                scale=alt.Scale(domain=[0, 1]), axis=alt.Axis(format="%")),
        color=alt.Color("part:N", title="part"),
        tooltip=typed_tooltips(data, ["part", "batch", "largest", "total", "largest_share"]),
    )
    even = base.mark_rule(strokeDash=[4, 4], color="gray").encode(y="mean(even_share):Q")
    return alt.layer(line, even).properties(**SMALL)


def operator_chart(rows: pd.DataFrame, operator_id: int = 0) -> alt.HConcatChart:
    """The three small charts of one operator, side by side."""
    return alt.hconcat(partition_rows_chart(rows, operator_id),
                       state_rows_per_batch_chart(rows, operator_id),
                       skew_chart(rows, operator_id),
                       title=f"Operator {operator_id}").resolve_scale(color="independent")


def watermark_per_batch_chart(watermarks: pd.DataFrame) -> alt.Chart:
    """The watermark each batch ran with (``Description.watermarks``); a flat line while
    batches read data is a stalled watermark."""
    needed = ("batch", "watermark", "new_data")
    if any(c not in watermarks.columns for c in needed):
        raise BadArgument("watermarks frame columns", sorted(watermarks.columns),
                          "Description.watermarks (needs batch, watermark, new_data)")
    data = watermarks[list(needed)].copy()
    # Spark writes 0 (the epoch) until the first batch sets a watermark: no watermark yet.
    data = data[data["watermark"] > pd.Timestamp(0)]
    data["new_data"] = data["new_data"].astype(object).where(data["new_data"].notna(), None)
    # A whole time on the axis: left to itself, Vega labels a flat watermark ":30" (seconds).
    days = data["watermark"].dt.normalize().nunique() if len(data) else 1
    shape = "%H:%M:%S" if days <= 1 else "%Y-%m-%d %H:%M:%S"
    return alt.Chart(inline(data), title="Watermark per batch (batches with one)").mark_line(
        point=True, interpolate="step-after").encode(
        x=alt.X("batch:O", axis=alt.Axis(labelAngle=0)),
        y=alt.Y("watermark:T", title="watermark", scale=alt.Scale(zero=False),
                axis=alt.Axis(format=shape, tickCount=4)),
        tooltip=typed_tooltips(data, needed),
    ).properties(width=660, height=110)


def describe_charts(description: Description) -> dict[int, alt.HConcatChart]:
    """One chart per operator of ``description`` (``operator_chart``), by operator id."""
    rows = description.rows
    return {int(o): operator_chart(rows, int(o)) for o in sorted(set(rows["operator_id"]))}


def describe_chart(description: Description) -> alt.VConcatChart:
    """The watermark per batch above every operator's charts: what ``describe()`` found,
    drawn (its flags and table are the ``Description`` itself)."""
    charts = [watermark_per_batch_chart(description.watermarks),
              *describe_charts(description).values()]
    return alt.vconcat(*charts).resolve_scale(color="independent")


def compare_state_rows_chart(descriptions: dict[str, Description],
                             title: str = "State rows per batch") -> alt.Chart:
    """State rows after each batch read (all operators and parts), one line per described
    checkpoint, labelled by the keys of ``descriptions`` (e.g. before and after a fix).

    Example:
        >>> from statekit.inspect.describe import Description
        >>> rows = pd.DataFrame({"operator_id": 0, "part": "default", "batch": [0, 1],
        ...                      "partition": 0, "rows": [3, 6]})
        >>> d = Description("/ck", pd.DataFrame(), [], rows, pd.DataFrame())
        >>> compare_state_rows_chart({"broken": d}).to_dict()["mark"]["type"]
        'line'
    """
    if not descriptions:
        raise BadArgument("descriptions", descriptions, "a dict of label → Description")
    frames = []
    for label, description in descriptions.items():
        totals = description.rows.groupby("batch", as_index=False)["rows"].sum()
        totals.insert(0, "checkpoint", str(label))
        frames.append(totals)
    data = pd.concat(frames, ignore_index=True).astype({"batch": "int64", "rows": "int64"})
    return alt.Chart(inline(data), title=title).mark_line(point=True).encode(
        x=alt.X("batch:O", axis=alt.Axis(labelAngle=0)),
        y=alt.Y("rows:Q", title="state rows"),
        color=alt.Color("checkpoint:N", title=None, sort=list(descriptions)),
        tooltip=typed_tooltips(data, ["checkpoint", "batch", "rows"]),
    ).properties(width=520, height=180)
