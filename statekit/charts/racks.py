"""Charts of standby placement across racks or zones: what one zone's outage takes.

- ``zone_outage_chart``: per placement and zone, the partitions left with no holder when
  that zone goes down (``statekit.serve.routing.rack_aware.zone_outages``, one frame per
  placement, concatenated with a ``placement`` column).

Example:
    >>> import pandas as pd
    >>> frame = pd.DataFrame({"placement": ["round-robin", "rack-aware"], "zone": ["a", "a"],
    ...                       "instances_down": ["i0, i1"] * 2, "partitions_lost": [1, 0]})
    >>> zone_outage_chart(frame).to_dict()["layer"][0]["mark"]["type"]
    'bar'
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from statekit.charts.data import inline
from statekit.charts.tooltips import typed_tooltips
from statekit.validate import require_columns

RED, GREEN = "#e45756", "#54a24b"


def zone_outage_chart(frame: pd.DataFrame, key: str = "zone",
                      title: str = "One zone down: partitions with no copy left"
                      ) -> alt.LayerChart:
    """Bars per zone, side by side per placement: partitions lost when the zone goes down."""
    require_columns(frame, ["placement", key, "instances_down", "partitions_lost"],
                    "zone outage frame", "as statekit.serve.routing.rack_aware.zone_outages "
                                         "gives, with a placement column")
    data = frame[["placement", key, "instances_down", "partitions_lost"]].copy()
    order = list(dict.fromkeys(data["placement"]))
    base = alt.Chart(inline(data)).encode(
        x=alt.X(f"{key}:N", title=f"{key} down", axis=alt.Axis(labelAngle=0)),
        xOffset=alt.XOffset("placement:N", sort=order),
        y=alt.Y("partitions_lost:Q", title="partitions lost",
                axis=alt.Axis(format="d", tickMinStep=1)))
    bars = base.mark_bar().encode(
        color=alt.Color("placement:N", title="standby placement", sort=order,
                        scale=alt.Scale(range=[RED, GREEN])),
        tooltip=typed_tooltips(data, ["placement", key, "instances_down", "partitions_lost"]))
    labels = base.mark_text(dy=-6).encode(text="partitions_lost:Q")
    return alt.layer(bars, labels).properties(width=320, height=200, title=alt.Title(
        title, subtitle="a partition is lost when its active owner and every standby are in "
                        "the zone"))
