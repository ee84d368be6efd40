"""Charts of interactive queries: where partitions live, how long queries take, failovers, top-k.

Pure functions from pandas frames (or query rows) to Altair charts; this module
knows nothing of the serving instances themselves, only the frames they give:

- ``placement_chart``: partition × instance, active owner and standbys
  (``Assignment.to_frame()``, ``ServingClient.all_metadata()``);
- ``latency_chart``: query latencies per kind on a log axis, p50 and p99 marked;
- ``failover_timeline_chart``: a serving cluster's events over time, one row per
  instance (``ServingCluster.timeline()``);
- ``leaderboard_chart``: the rows of a top-k query as ranked bars
  (``ServingClient.top_k(...).rows``).

Example:
    >>> import pandas as pd
    >>> plan = pd.DataFrame({"partition": [0, 0, 1, 1], "instance": ["i0", "i1", "i1", "i0"],
    ...                      "role": ["active", "standby", "active", "standby"]})
    >>> [layer["mark"]["type"] for layer in placement_chart(plan).to_dict()["layer"]]
    ['rect', 'text']
    >>> spec = leaderboard_chart([{"player": "p07", "sum_score": 91.0},
    ...                           {"player": "p03", "sum_score": 77.5}], "sum_score").to_dict()
    >>> [(row["label"], row["sum_score"]) for row in spec["datasets"][spec["data"]["name"]]]
    [('1. p07', 91.0), ('2. p03', 77.5)]
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import altair as alt
import numpy as np
import pandas as pd

from statekit.charts.data import inline
from statekit.charts.tooltips import typed_tooltips
from statekit.errors import BadArgument
from statekit.validate import require_columns, whole_number

BLUE, LIGHT_BLUE, RED, GREY = "#4c78a8", "#9ecae9", "#e45756", "#888888"
#: The roles of an instance for a partition (as ``statekit.serve.routing.assignment.ROLES``).
ROLES = ("active", "standby")
ROLE_COLOURS = {"active": BLUE, "standby": LIGHT_BLUE}
#: Query kinds in the order they are drawn (others follow in the order first seen).
KIND_ORDER = ("in-process", "routed", "scatter-gather", "REST", "snapshot()")
MARKER_COLOURS = {"p50": "#222222", "p99": RED, "target": "#f58518"}
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
_WINDOW_COLUMNS = ("window_start", "window_end")


def _tips(data: pd.DataFrame, columns) -> list[alt.Tooltip]:
    return typed_tooltips(data, columns, time_format="%H:%M:%S.%L")


def _ordered(values: Sequence[str], known: Sequence[str]) -> list[str]:
    """The distinct ``values``: those of ``known`` first in its order, then the rest as seen."""
    present = list(dict.fromkeys(values))
    return [v for v in known if v in present] + [v for v in present if v not in known]


def _natural(name: str) -> tuple:
    """Sort key putting ``i2`` before ``i10``."""
    digits = "".join(c for c in name if c.isdigit())
    stem = name.rstrip("0123456789")
    return (stem, int(digits) if digits and name.endswith(digits) else -1, name)


def duration_text(seconds: float) -> str:
    """Seconds written in the unit that reads best: ``18 µs``, ``1.2 ms``, ``3.4 s``.

    Example:
        >>> [duration_text(s) for s in (0.0000184, 0.00123, 0.25, 3.4)]
        ['18.4 µs', '1.23 ms', '250 ms', '3.4 s']
    """
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if abs(seconds) >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds * 1e9:.3g} ns"


# --- where each partition lives ----------------------------------------------------------------
def placement_chart(
    assignment_frame: pd.DataFrame,
    instances: Sequence[str] | None = None,
    title: str = "Where each state partition lives",
) -> alt.LayerChart:
    """A partition × instance grid: dark cell = the active owner, light = a standby.

    ``assignment_frame``: one row per (partition, instance) with ``partition``,
    ``instance`` and ``role`` ('active' or 'standby'), as ``Assignment.to_frame()`` or
    ``ServingClient.all_metadata()`` give (their ``url``, and any ``state``, ``batch``
    or ``lag_batches`` column, go to the tooltip). ``instances`` orders the columns and
    may name instances that hold nothing (an empty column), e.g. ``cluster.names``
    after a kill.

    Example:
        >>> plan = pd.DataFrame({"partition": [0, 0, 1], "instance": ["i0", "i1", "i1"],
        ...                      "role": ["active", "standby", "active"]})
        >>> spec = placement_chart(plan, instances=["i0", "i1", "i2"]).to_dict()
        >>> spec["layer"][0]["encoding"]["x"]["scale"]["domain"]
        ['i0', 'i1', 'i2']
    """
    require_columns(assignment_frame, ("partition", "instance", "role"), "assignment frame",
                    "as Assignment.to_frame() or ServingClient.all_metadata() gives")
    bad = [r for r in assignment_frame["role"].drop_duplicates() if r not in ROLES]
    if bad:
        raise BadArgument("role", bad[0], ROLES)
    extra = [c for c in ("url", "state", "batch", "lag_batches") if c in assignment_frame]
    data = assignment_frame[["partition", "instance", "role", *extra]].copy()
    data["instance"] = data["instance"].astype(str)
    data["partition"] = [whole_number(p, "partition", minimum=0) for p in data["partition"]]
    data = data.sort_values(["partition", "role", "instance"], ignore_index=True)
    seen = sorted(data["instance"].unique(), key=_natural)
    order = list(dict.fromkeys([*map(str, instances or ()), *seen]))
    partitions = sorted(data["partition"].unique().tolist())
    counts = data.groupby(["instance", "role"]).size().unstack(fill_value=0)
    data["holds"] = [f"{counts.loc[i].get('active', 0)} active, "
                     f"{counts.loc[i].get('standby', 0)} standby" for i in data["instance"]]
    x = alt.X("instance:N", title="serving instance", sort=order,
              scale=alt.Scale(domain=order), axis=alt.Axis(labelAngle=0, orient="top"))
    y = alt.Y("partition:O", title="state partition", sort=partitions)
    tooltip = _tips(data, ("partition", "instance", "role", "holds", *extra))
    base = alt.Chart(inline(data))
    cells = base.mark_rect(stroke="white", strokeWidth=2).encode(
        x=x, y=y, tooltip=tooltip,
        color=alt.Color("role:N", title="role", sort=list(ROLES),
                        scale=alt.Scale(domain=list(ROLES),
                                        range=[ROLE_COLOURS[r] for r in ROLES])))
    labels = base.mark_text(fontSize=11).encode(
        x=x, y=y, text="role:N", tooltip=tooltip,
        color=alt.condition("datum.role == 'active'", alt.value("white"), alt.value("black")))
    standbys = data[data["role"] == "standby"].groupby("partition").size()
    per = int(standbys.max()) if len(standbys) else 0
    subtitle = [f"{len(partitions)} partition{'s' * (len(partitions) != 1)} on {len(order)} "
                f"instance{'s' * (len(order) != 1)}, up to {per} standby"
                f"{'s' * (per != 1)} each.",
                "The active owner answers a partition's queries; a standby keeps a copy "
                "current from the changelog and takes over when the owner dies."]
    return alt.layer(cells, labels).properties(
        title=alt.Title(title, subtitle=subtitle),
        width=max(160, 80 * len(order)), height=max(60, 26 * len(partitions)))


# --- query latencies -----------------------------------------------------------------------------
def _latency_seconds(latencies: pd.DataFrame) -> pd.Series:
    seconds = pd.to_numeric(latencies["seconds"], errors="coerce")
    bad = ~(np.isfinite(seconds.to_numpy(dtype=float, na_value=np.nan)) & (seconds > 0))
    if bad.any():
        value = latencies["seconds"][bad].iloc[0]
        raise BadArgument("latency seconds", value.item() if hasattr(value, "item") else value,
                          "numbers of seconds > 0 (a log axis cannot show 0 or less)")
    return seconds.astype(float)


def _spread(values: np.ndarray, max_points: int) -> np.ndarray:
    """At most ``max_points`` values with the same distribution (evenly spaced quantiles)."""
    if len(values) <= max_points:
        return values
    return np.quantile(values, np.linspace(0, 1, max_points))


def latency_chart(
    latencies: pd.DataFrame,
    targets: Mapping[str, float] | None = None,
    max_points: int = 2000,
    title: str = "How long one query takes, by kind",
) -> alt.LayerChart:
    """Every query's latency as a tick on a log axis, one row per kind, p50 and p99 marked.

    ``latencies``: one row per timed query, ``kind`` (e.g. 'in-process', 'routed',
    'scatter-gather', 'REST', 'snapshot()') and ``seconds`` (> 0). The log axis reads
    the same from microseconds to seconds; each row's label carries its p50 and p99.
    A kind with more than ``max_points`` queries is drawn as that many evenly spaced
    quantiles (the same shape, fewer ticks). ``targets`` (kind → seconds, e.g.
    ``{"in-process": 20e-6, "REST": 2e-3}``) draws each kind's target as an orange tick.

    Example:
        >>> times = pd.DataFrame({"kind": ["REST"] * 3 + ["in-process"] * 3,
        ...     "seconds": [0.0011, 0.0009, 0.0031, 12e-6, 9e-6, 15e-6]})
        >>> spec = latency_chart(times, targets={"REST": 0.002}).to_dict()
        >>> spec["layer"][0]["encoding"]["x"]["scale"]["type"]
        'log'
        >>> spec["layer"][0]["encoding"]["y"]["sort"][0]
        'in-process · p50 12 µs · p99 14.9 µs'
    """
    require_columns(latencies, ("kind", "seconds"), "latency frame",
                    "one row per timed query: its kind and seconds")
    max_points = whole_number(max_points, "max_points", minimum=2)
    seconds = _latency_seconds(latencies)
    kinds = _ordered(latencies["kind"].astype(str), KIND_ORDER)
    targets = dict(targets or {})
    for kind, target in targets.items():
        if kind not in kinds:
            raise BadArgument("target kind", kind, kinds)
        if isinstance(target, bool) or not isinstance(target, int | float) or \
                not math.isfinite(target) or target <= 0:
            raise BadArgument(f"target of {kind!r}", target, "a number of seconds > 0")
    frame = pd.DataFrame({"kind": latencies["kind"].astype(str).to_numpy(),
                          "seconds": seconds.to_numpy()})
    stats = frame.groupby("kind", sort=False)["seconds"].agg(
        queries="size", mean="mean", max="max",
        p50=lambda s: s.quantile(0.5), p90=lambda s: s.quantile(0.9),
        p99=lambda s: s.quantile(0.99)).reindex(kinds)
    stats["row"] = [f"{k} · p50 {duration_text(s.p50)} · p99 {duration_text(s.p99)}"
                    for k, s in stats.iterrows()]
    rows = stats["row"].tolist()
    samples = pd.concat([pd.DataFrame({"kind": kind, "row": stats.at[kind, "row"],
                                       "seconds": _spread(group.to_numpy(), max_points)})
                         for kind, group in frame.groupby("kind", sort=False)["seconds"]],
                        ignore_index=True)
    samples["latency"] = [duration_text(s) for s in samples["seconds"]]
    marked = [(kind, marker, stats.at[kind, marker]) for kind in kinds
              for marker in ("p50", "p99")]
    marked += [(kind, "target", float(target)) for kind, target in targets.items()]
    markers = pd.DataFrame(marked, columns=["kind", "marker", "seconds"])
    markers["row"] = markers["kind"].map(stats["row"])
    markers["latency"] = [duration_text(s) for s in markers["seconds"]]
    markers["queries"] = markers["kind"].map(stats["queries"]).astype("int64")
    for column in ("p50", "p90", "p99", "max", "mean"):
        markers[column] = [duration_text(v) for v in markers["kind"].map(stats[column])]
    low = float(min(samples["seconds"].min(), markers["seconds"].min()))
    high = float(max(samples["seconds"].max(), markers["seconds"].max()))
    decades = [10.0 ** e for e in range(math.floor(math.log10(low)),
                                        math.ceil(math.log10(high)) + 1)]
    x = alt.X("seconds:Q", title="seconds per query (log scale)",
              scale=alt.Scale(type="log", domain=[decades[0], decades[-1]]),
              axis=alt.Axis(values=decades, labelExpr="format(datum.value, '~s') + 's'",
                            grid=True))
    y = alt.Y("row:N", title=None, sort=rows, axis=alt.Axis(labelLimit=360))
    ticks = alt.Chart(inline(samples)).mark_tick(color=BLUE, opacity=0.3, thickness=1).encode(
        x=x, y=y, tooltip=_tips(samples, ("kind", "latency", "seconds")))
    marker_order = [m for m in MARKER_COLOURS if m in set(markers["marker"])]
    marks = alt.Chart(inline(markers)).mark_tick(thickness=3).encode(
        x=x, y=y,
        color=alt.Color("marker:N", title=None, sort=marker_order,
                        scale=alt.Scale(domain=marker_order,
                                        range=[MARKER_COLOURS[m] for m in marker_order])),
        tooltip=_tips(markers, ("kind", "marker", "latency", "queries", "p50", "p90", "p99",
                                "max", "mean")))
    sampled = [k for k in kinds if stats.at[k, "queries"] > max_points]
    subtitle = ["One tick per query (blue); black = median (p50), red = p99"
                + (", orange = target." if targets else ".")]
    if sampled:
        subtitle.append(f"{', '.join(sampled)}: more than {max_points:,} queries, drawn as "
                        f"{max_points:,} evenly spaced quantiles.")
    return alt.layer(ticks, marks).properties(
        title=alt.Title(title, subtitle=subtitle), width=560, height=max(60, 44 * len(kinds)))


# --- a serving cluster's failovers -------------------------------------------------------------
def _styles(events: Sequence[str]) -> tuple[list[str], list[str], list[str]]:
    domain = _ordered(events, list(EVENT_STYLE))
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
    instances = sorted(data["instance"].unique(), key=_natural)
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


# --- a leaderboard ---------------------------------------------------------------------------
def _window_text(data: pd.DataFrame) -> str | None:
    if "window_start" not in data.columns or data.empty:
        return None
    starts = pd.to_datetime(data["window_start"], utc=True).dt.tz_localize(None).unique()
    if len(starts) != 1:
        return f"{len(starts)} windows"
    text = f"window from {pd.Timestamp(starts[0]):%Y-%m-%d %H:%M:%S}"
    if "window_end" in data.columns:
        end = pd.to_datetime(data["window_end"], utc=True).dt.tz_localize(None).iloc[0]
        text += f" to {end:%H:%M:%S}" if end.normalize() == pd.Timestamp(
            starts[0]).normalize() else f" to {end:%Y-%m-%d %H:%M:%S}"
    return text


def leaderboard_chart(
    rows: Sequence[Mapping] | pd.DataFrame,
    by: str,
    keys: Sequence[str] | None = None,
    title: str | None = None,
    subtitle: str | Sequence[str] | None = None,
) -> alt.LayerChart:
    """The rows of a top-k query as ranked bars of ``by``, the first row on top.

    ``rows``: the ranked rows (``ServingClient.top_k(...).rows`` or a frame), drawn in
    the order given. ``keys`` label the bars (default: the text columns other than
    ``window_start``/``window_end``); rows of several windows also carry their window's
    start, so a key that ranks in two windows is told apart. The subtitle names the window,
    then the lines of ``subtitle``. Every column goes to the tooltip. No rows draws an empty
    board (a window with no state yet).

    Example:
        >>> rows = [{"player": "p07", "window_start": "2026-01-05T10:50:00.000Z",
        ...          "window_end": "2026-01-05T11:00:00.000Z", "count": 9, "sum_score": 91.0}]
        >>> leaderboard_chart(rows, "sum_score").to_dict()["title"]["subtitle"]
        ['window from 2026-01-05 10:50:00 to 11:00:00']
    """
    if isinstance(rows, pd.DataFrame):
        data = rows.reset_index(drop=True).copy()
    elif isinstance(rows, Sequence) and not isinstance(rows, str | bytes) and all(
            isinstance(r, Mapping) for r in rows):
        data = pd.DataFrame.from_records(list(rows))
    else:
        raise BadArgument("leaderboard rows", type(rows).__name__,
                          "a list of row dicts (QueryResult.rows) or a pandas DataFrame")
    if not isinstance(by, str):
        raise BadArgument("leaderboard by", by, "the name of a numeric column")
    if data.empty:
        data = pd.DataFrame(columns=list(dict.fromkeys([*data.columns, by])))
    numeric = [c for c in data.columns if pd.api.types.is_numeric_dtype(data[c])
               and not pd.api.types.is_bool_dtype(data[c])]
    if by not in data.columns or (len(data) and by not in numeric):
        raise BadArgument("leaderboard by", by, numeric or "(no numeric column)")
    if keys is None:
        keys = [c for c in data.columns if c not in numeric and c not in _WINDOW_COLUMNS
                and c != by]
    else:
        keys = list(keys)
        missing = [k for k in keys if k not in data.columns]
        if missing and len(data):
            raise BadArgument("leaderboard key column", missing[0], list(map(str, data.columns)))
    data["rank"] = np.arange(1, len(data) + 1, dtype="int64")
    data["label"] = [f"{rank}. " + " · ".join(str(row[k]) for k in keys if k in data.columns)
                     if keys else str(rank)
                     for rank, (_, row) in zip(data["rank"], data.iterrows(), strict=True)]
    if "window_start" in data.columns and data["window_start"].nunique() > 1:
        # Rows of several windows: a player may rank twice, once per window; say which.
        starts = pd.to_datetime(data["window_start"], utc=True).dt.tz_localize(None)
        shape = "%H:%M" if starts.dt.normalize().nunique() == 1 else "%m-%d %H:%M"
        data["label"] = data["label"] + " · " + starts.dt.strftime(shape)
    order = data["label"].tolist()
    y = alt.Y("label:N", title=None, sort=order, axis=alt.Axis(labelLimit=240))
    tooltip = _tips(data, ("rank", *keys, by, *[c for c in data.columns if c not in (
        "rank", "label", by, *keys)]))
    base = alt.Chart(inline(data))
    bars = base.mark_bar(color=BLUE, height={"band": 0.75}).encode(
        x=alt.X(f"{by}:Q", title=by.replace("_", " ")), y=y, tooltip=tooltip)
    values = base.mark_text(align="left", dx=4, fontSize=11).encode(
        x=f"{by}:Q", y=y, text=alt.Text(f"{by}:Q", format=",.4~r"), tooltip=tooltip)
    window = _window_text(data)
    lines = [window] if window else (["no rows yet"] if data.empty else [])
    lines += [subtitle] if isinstance(subtitle, str) else list(subtitle or [])
    heading = title or (f"Top {len(data)} by {by}" if len(data) else f"Top rows by {by}")
    return alt.layer(bars, values).properties(
        title=alt.Title(heading, subtitle=lines), width=460,
        height=max(60, 22 * len(data)))
