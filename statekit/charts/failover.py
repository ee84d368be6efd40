"""A serving cluster's failovers as a chart: one row per instance, its events over time.

``failover_timeline_chart`` draws ``ServingCluster.timeline()``: when each instance served
or was dead, and its events (killed, died, promoted, standby assigned...) with the
partitions they moved; the x axis counts from the first kill or death.

Example:
    >>> import pandas as pd
    >>> events = pd.DataFrame({"time": pd.to_datetime(["2026-01-05 10:00:00",
    ...                                                "2026-01-05 10:00:02"]),
    ...                        "instance": ["i0", "i0"], "event": ["started", "killed"],
    ...                        "partitions": ["0,1", "0,1"], "detail": ["", ""]})
    >>> type(failover_timeline_chart(events)).__name__
    'LayerChart'
"""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import numpy as np
import pandas as pd

from statekit.charts.data import inline
from statekit.charts.order import natural_key, ordered_values
from statekit.charts.serving import GREY, RED
from statekit.charts.tooltips import typed_tooltips
from statekit.errors import BadArgument
from statekit.validate import require_columns

#: Cluster events (``ServingCluster.timeline()``): colour and shape; others get spare ones.
EVENT_STYLE = {
    "started": ("#9ecae9", "circle"), "killed": ("#222222", "triangle-down"),
    "died": (RED, "cross"), "lost": ("#9d0208", "diamond"),
    "promoted": ("#54a24b", "triangle-up"), "standby assigned": ("#f58518", "square"),
    "standby ready": ("#72b7b2", "triangle-right"), "reassigned": ("#b279a2", "diamond"),
    "not told": ("#9d755d", "square"),
}
_SPARE = [("#eeca3b", "circle"), ("#ff9da6", "square"), ("#79706e", "triangle-up"),
          ("#d67195", "diamond"), ("#439894", "cross")]


def _tips(data: pd.DataFrame, columns) -> list[alt.Tooltip]:
    return typed_tooltips(data, columns, time_format="%H:%M:%S.%L")



def _styles(events: Sequence[str]) -> tuple[list[str], list[str], list[str]]:
    domain = ordered_values(events, list(EVENT_STYLE))
    spare = iter(_SPARE * (1 + len(domain) // len(_SPARE)))
    styles = [EVENT_STYLE.get(e) or next(spare) for e in domain]
    return domain, [c for c, _ in styles], [s for _, s in styles]


def _origin(data: pd.DataFrame, origin: str) -> tuple[pd.Timestamp, str]:
    """The time the x axis counts from, and how to say it."""
    if origin not in ("auto", "first"):
        raise BadArgument("origin", origin, ["auto", "first"])
    failures = data[data["event"].isin(["killed", "died"])]
    if origin == "auto" and len(failures):
        first = failures.iloc[0]
        verb = "was killed" if first["event"] == "killed" else "died"
        return first["time"], f"seconds since {first['instance']} {verb}"
    return data["time"].iloc[0], "seconds since the first event"


def _lanes(data: pd.DataFrame, gap: float) -> pd.Series:
    """A lane for each event (0 = on the instance's line, -1 above, 1 below, ±0.5 for an even
    count) so that events of one instance closer than ``gap`` seconds do not hide each other."""
    lanes = pd.Series(0.0, index=data.index)
    for _, group in data.groupby("instance", sort=False):
        times = group["from_s"].to_numpy()
        run = np.concatenate([[0], np.cumsum(np.diff(times) > gap)])
        for r in np.unique(run):
            members = group.index[run == r]
            n = len(members)
            lanes[members] = [i - (n - 1) / 2 for i in range(n)]
    return lanes


def failover_timeline_chart(
    timeline: pd.DataFrame,
    origin: str = "auto",
    title: str = "What the serving cluster did, instance by instance",
    zoom: bool = True,
) -> alt.LayerChart:
    """One row per instance, its events as marks over time, the partitions in the tooltip.

    ``timeline``: ``time``, ``instance``, ``event`` (started, killed, died, promoted,
    lost, standby assigned, standby ready, reassigned, …), ``partitions`` (a list, or
    text) and optionally ``detail``, as ``ServingCluster.timeline()`` gives. A grey line
    shows each instance serving, from its first event until it died (dashed after).
    Time is in seconds since ``origin``: ``"auto"`` = the first kill or death when
    there is one, else the first event; ``"first"`` = the first event. With ``zoom`` and
    a kill or death, the axis opens on the incident (from just before it to just after its
    last event: a sub-second failover is not squeezed against the whole run's startup);
    ``zoom=False`` draws the whole run, the context. Events at nearly the same instant on one
    instance are spread vertically; drag or scroll on the chart to zoom in time (keep only
    some rows of the frame to draw less).

    Example:
        >>> t0 = pd.Timestamp("2026-11-22 09:00:00")
        >>> ms = pd.Timedelta(milliseconds=1)
        >>> timeline = pd.DataFrame({"time": [t0, t0, t0 + 900 * ms, t0 + 1100 * ms],
        ...     "instance": ["i0", "i1", "i1", "i0"],
        ...     "event": ["started", "started", "died", "promoted"],
        ...     "partitions": [[0, 1], [1, 0], [1, 0], [1]],
        ...     "detail": ["", "", "exit code -9", "standby of partition 1 answers now"]})
        >>> spec = failover_timeline_chart(timeline).to_dict()
        >>> spec["layer"][2]["encoding"]["x"]["title"]
        'seconds since i1 died'
        >>> sorted(row["partitions"] for row in spec["datasets"][spec["layer"][2]["data"]["name"]])
        ['0, 1', '0, 1', '0, 1', '1']
    """
    require_columns(timeline, ("time", "instance", "event", "partitions"), "cluster timeline",
                    "as ServingCluster.timeline() gives")
    data = timeline[[c for c in ("time", "instance", "event", "partitions", "detail")
                     if c in timeline.columns]].copy()
    data["time"] = pd.to_datetime(data["time"])
    data["instance"] = data["instance"].astype(str)
    data["event"] = data["event"].astype(str)
    data = data.dropna(subset=["time"]).sort_values("time", kind="stable", ignore_index=True)
    if data.empty:
        raise BadArgument("cluster timeline", "a frame with no events",
                          "at least one event (start the cluster first)")
    data["partitions"] = [", ".join(map(str, sorted(p))) if isinstance(
        p, list | tuple | set | np.ndarray) else ("" if p is None else str(p))
        for p in data["partitions"]]
    start, x_title = _origin(data, origin)
    data["from_s"] = (data["time"] - start).dt.total_seconds()
    window = _incident(data, x_title) if zoom else None
    shown = data if window is None else data[data["from_s"].between(*window)]
    span = max(float(shown["from_s"].max() - shown["from_s"].min()), 1e-3)
    data["lane"] = _lanes(data, gap=span / 50)
    # lanes split each instance's row; a symmetric list keeps lane 0 on the row's line
    lanes = sorted({0.0, *data["lane"], *(-data["lane"])})
    instances = sorted(data["instance"].unique(), key=natural_key)
    end = float(data["from_s"].max())
    life = []
    for name in instances:
        own = data[data["instance"] == name]
        began = float(own["from_s"].min())
        died = own.loc[own["event"] == "died", "from_s"]
        stop = float(died.iloc[0]) if len(died) else end
        life.append((name, "serving", began, stop))
        if len(died) and stop < end:
            life.append((name, "dead", stop, end))
    lives = pd.DataFrame(life, columns=["instance", "state", "from_s", "to_s"])
    y = alt.Y("instance:N", title="instance", sort=instances,
              scale=alt.Scale(paddingInner=0.2))
    x = alt.X("from_s:Q", title=x_title,
              scale=alt.Scale() if window is None else alt.Scale(domain=list(window)))
    life_tips = _tips(lives, ("instance", "state", "from_s", "to_s"))
    lines = alt.Chart(inline(lives))
    serving = lines.mark_rule(color=GREY, strokeWidth=3, opacity=0.45, clip=True).encode(
        x=x, x2="to_s:Q", y=y, tooltip=life_tips).transform_filter("datum.state == 'serving'")
    dead = lines.mark_rule(color=GREY, strokeWidth=1.5, strokeDash=[4, 3], opacity=0.6,
                           clip=True).encode(
        x=x, x2="to_s:Q", y=y, tooltip=life_tips).transform_filter("datum.state == 'dead'")
    domain, colours, shapes = _styles(data["event"])
    events = alt.Chart(inline(data)).mark_point(filled=True, size=90, opacity=0.95,
                                                clip=True).encode(
        x=x, y=y, yOffset=alt.YOffset("lane:O", sort=lanes, scale=alt.Scale(domain=lanes)),
        color=alt.Color("event:N", title="event", sort=domain,
                        scale=alt.Scale(domain=domain, range=colours)),
        shape=alt.Shape("event:N", title="event", sort=domain,
                        scale=alt.Scale(domain=domain, range=shapes)),
        tooltip=_tips(data, ("time", "from_s", "instance", "event", "partitions", "detail")))
    crowded = bool((data["lane"] != 0).any())
    subtitle = ["Grey line: the instance is serving (dashed: dead). Hover a mark for the "
                "partitions it concerns; drag or scroll to zoom in time."]
    if window is not None:
        subtitle.append(f"Zoomed to the incident ({window[0]:.2f} to {window[1]:.2f} s); "
                        f"{int((data['from_s'] < window[0]).sum())} earlier events are left "
                        f"of it (zoom=False draws the whole run).")
    if crowded:
        subtitle.append("Events a few moments apart are stacked vertically.")
    height = max(120, len(instances) * max(44, 12 * len(lanes)))
    return alt.layer(serving, dead, events).properties(
        title=alt.Title(title, subtitle=subtitle), width=560, height=height,
    ).interactive(bind_y=False)


def _incident(data: pd.DataFrame, x_title: str) -> tuple[float, float] | None:
    """Seconds from just before the first kill or death to just after the last event from it
    on; None where the axis does not count from a kill or death."""
    if not x_title.startswith("seconds since") or "first event" in x_title:
        return None
    after = data.loc[data["from_s"] >= 0, "from_s"]
    last = float(after.max()) if len(after) else 0.0
    pad = max(0.05 * last, 0.02)
    return (-pad, last + pad)

