"""Charts of interactive queries: where partitions live, how long queries take, top-k.

Pure functions from pandas frames (or query rows) to Altair charts; this module
knows nothing of the serving instances themselves, only the frames they give:

- ``placement_chart``: partition × instance, active owner and standbys
  (``Assignment.to_frame()``, ``ServingClient.all_metadata()``);
- ``latency_chart``: query latencies per kind on a log axis, p50 and p99 marked;
- ``leaderboard_chart``: the rows of a top-k query as ranked bars
  (``ServingClient.top_k(...).rows``).

A serving cluster's failovers are drawn by ``statekit.charts.failover``.

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
from statekit.charts.order import natural_key, ordered_values
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
_WINDOW_COLUMNS = ("window_start", "window_end")


def _tips(data: pd.DataFrame, columns) -> list[alt.Tooltip]:
    return typed_tooltips(data, columns, time_format="%H:%M:%S.%L")


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
    seen = sorted(data["instance"].unique(), key=natural_key)
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
    kinds = ordered_values(latencies["kind"].astype(str), KIND_ORDER)
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
