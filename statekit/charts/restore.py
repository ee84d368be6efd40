"""Charts of restores: phases per partition, restore speed, standby lag, failover drills.

Pure functions from small pandas frames to Altair charts; every number is computed
in pandas first and the data is inlined as plain values.

- ``restore_gantt_chart``: the phases of each partition's restore as bars over time
  (Spark's ``restart_timeline`` or a changelog restore's phases);
- ``restore_rate_chart``: records restored per second (or in all) over time, per
  partition, from restore-listener events;
- ``standby_lag_chart``: how far standby replicas are behind the changelog;
- ``failover_chart``: time until the store serves again, per failover scenario;
- ``cutover_chart``: moving a store cold or warm, the seconds nothing answers.

Example:
    >>> import pandas as pd
    >>> t0 = pd.Timestamp("2026-11-22 08:50:26")
    >>> ms = pd.Timedelta(milliseconds=1)
    >>> timeline = pd.DataFrame({"partition": [0, 0], "phase": ["load snapshot",
    ...     "replay deltas"], "start": [t0, t0 + 365 * ms], "end": [t0 + 365 * ms,
    ...     t0 + 371 * ms], "detail": ["snapshot 8 (8.zip)", "delta 9"]})
    >>> spec = restore_gantt_chart(timeline).to_dict()
    >>> spec["title"]["text"]
    'How the state came back, partition by partition'
    >>> report = pd.DataFrame({"scenario": ["no standby", "standby"],
    ...     "records_replayed": [5000, 12], "seconds_to_serve": [4.2, 0.3]})
    >>> [layer["mark"]["type"] for layer in failover_chart(report).to_dict()["layer"]]
    ['bar', 'text']
"""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import pandas as pd

from statekit.charts.data import inline
from statekit.charts.tooltips import typed_tooltips
from statekit.errors import BadArgument
from statekit.validate import is_whole_number, require_columns

#: Colours of known phases; other phases take the next free colour of ``_OTHER``.
PHASE_COLOURS = {
    "load snapshot": "#4c78a8", "replay deltas": "#f58518", "first batch": "#bab0ac",
    "consume + write": "#54a24b", "consume": "#72b7b2", "write": "#54a24b",
    "checkpoint": "#b279a2", "restore": "#4c78a8",
}
SCENARIO_COLOURS = {"no standby": "#e45756", "stale standby": "#f58518", "standby": "#54a24b"}
_OTHER = ["#9d755d", "#ff9da6", "#eeca3b", "#79706e", "#d67195", "#439894", "#83bcb6"]
_FACETS = ("scenario", "run")
QUERY_ROW_LABEL = "whole query"


def _tips(data: pd.DataFrame, columns) -> list[alt.Tooltip]:
    return typed_tooltips(data, columns, time_format="%H:%M:%S.%L")


def _colours(values: Sequence[str], known: dict[str, str]) -> tuple[list[str], list[str]]:
    """(domain, range) with the known values first, in ``known``'s order."""
    present = list(dict.fromkeys(values))
    domain = [v for v in known if v in present] + [v for v in present if v not in known]
    spare = iter(_OTHER * (1 + len(domain) // len(_OTHER)))
    return domain, [known.get(v) or next(spare) for v in domain]


def _facet_column(frame: pd.DataFrame, facet: str | None) -> str | None:
    if facet is None:
        return next((c for c in _FACETS if c in frame.columns), None)
    if facet not in frame.columns:
        raise BadArgument("facet column", facet, sorted(map(str, frame.columns)))
    return facet


def _seconds_since(frame: pd.DataFrame, time: str, group: str | None) -> pd.Series:
    """Seconds from the earliest ``time`` (of each ``group`` when given)."""
    times = pd.to_datetime(frame[time])
    origin = times.groupby(frame[group]).transform("min") if group else times.min()
    return (times - origin).dt.total_seconds()


def _row_label(partition) -> str:
    if is_whole_number(partition):
        return f"partition {partition}" if partition >= 0 else QUERY_ROW_LABEL
    return str(partition)


# --- a restore as a Gantt chart ----------------------------------------------------------------
def restore_gantt_chart(
    timeline: pd.DataFrame,
    title: str = "How the state came back, partition by partition",
    facet: str | None = None,
) -> alt.Chart | alt.FacetChart:
    """One bar per (partition, phase) from its start to its end; colour = phase.

    Takes ``restart_timeline()`` (Spark: load snapshot, replay deltas, and the
    query's first batch on a row of its own) or any frame with ``partition``, ``phase``,
    ``start``, ``end`` (and optionally ``seconds``, ``detail``), e.g. a changelog restore
    with 'consume + write' phases (a ``RestoreResult.report``, with ``started`` and
    ``finished``, is taken as one such phase per partition). ``facet`` names a column to
    draw one panel per value;
    by default ``scenario`` or ``run`` when the frame has one. Times are shown as seconds
    since the first start (of each panel); rows that have not ended are left out.

    Example:
        >>> restore_gantt_chart(restart_timeline(ck, state_store_log(), since=mark))
        ...                                                              # doctest: +SKIP
    """
    if isinstance(timeline, pd.DataFrame) and {"started", "finished"} <= set(timeline) \
            and not {"start", "end"} & set(timeline):   # a RestoreResult.report
        timeline = timeline.rename(columns={"started": "start", "finished": "end"})
        if "phase" not in timeline.columns:
            timeline = timeline.assign(phase="consume + write")
    require_columns(timeline, ("partition", "phase", "start", "end"), "restore timeline",
             "e.g. from restart_timeline() or RestoreResult.report")
    panel = _facet_column(timeline, facet)
    data = timeline.copy()
    data["start"] = pd.to_datetime(data["start"])
    data["end"] = pd.to_datetime(data["end"])
    unfinished = int((data["start"].isna() | data["end"].isna()).sum())
    data = data.dropna(subset=["start", "end"])
    data["seconds"] = (data["end"] - data["start"]).dt.total_seconds()
    data["from_s"] = _seconds_since(data, "start", panel)
    data["to_s"] = data["from_s"] + data["seconds"]
    data["row"] = [_row_label(p) for p in data["partition"]]
    order = sorted(data["row"].unique(), key=lambda label: (
        label != QUERY_ROW_LABEL, int(label.split()[1]) if label.startswith("partition ")
        and label.split()[1].isdigit() else float("inf"), label))
    keep = [c for c in ("row", "partition", "phase", "start", "end", "seconds", "from_s",
                        "to_s", "detail", panel, "snapshot_version", "delta_files",
                        "records") if c is not None and c in data.columns]
    data = data[list(dict.fromkeys(keep))]
    domain, colours = _colours(data["phase"].astype(str), PHASE_COLOURS)
    x_title = ("seconds since the first batch after the restart began"
               if "first batch" in domain else "seconds since the restore began")
    colour = alt.Color("phase:N", title="phase", sort=domain,
                       scale=alt.Scale(domain=domain, range=colours))
    bars = alt.Chart().mark_bar(height={"band": 0.7}, strokeWidth=1.5).encode(
        x=alt.X("from_s:Q", title=x_title),
        x2="to_s:Q",
        y=alt.Y("row:N", title=None, sort=order),
        color=colour,
        # a stroke of the same colour keeps phases of a few milliseconds visible
        stroke=alt.Stroke("phase:N", title="phase", sort=domain,
                          scale=alt.Scale(domain=domain, range=colours)),
        tooltip=_tips(data, ("row", "phase", "seconds", "detail", "start", "end", panel,
                             "snapshot_version", "delta_files", "records")),
    ).properties(width=560, height=max(60, 26 * len(order)))
    spark = {"load snapshot", "replay deltas"} & set(domain)
    subtitle = (["Each partition loads Spark's newest snapshot, then replays the delta files "
                 "written after it.",
                 f"'{QUERY_ROW_LABEL}': the first batch after the restart, which waits for "
                 "every partition."] if spark else
                ["One bar per phase of each partition's restore."])
    subtitle.append("Hover a bar for its seconds and details."
                    + (f" {unfinished} unfinished phase(s) not drawn." if unfinished else ""))
    heading = alt.Title(title, subtitle=subtitle)
    if panel is None:
        return bars.properties(data=inline(data), title=heading)
    panels = list(dict.fromkeys(data[panel].astype(str)))
    return bars.facet(row=alt.Row(f"{panel}:N", title=panel, sort=panels),
                      data=inline(data)).properties(
        title=heading)


# --- restore speed -------------------------------------------------------------------------
def _rates(events: pd.DataFrame, group: list[str]) -> pd.DataFrame:
    """One row per batch: records / seconds since the partition's previous event."""
    frame = events[events["event"].isin(["start", "batch", "end"])].copy()
    frame["time"] = pd.to_datetime(frame["time"])
    frame = frame.sort_values([*group, "time"], kind="stable")
    frame["previous"] = frame.groupby(group)["time"].shift()
    batches = frame[frame["event"] == "batch"].copy()
    dt = (batches["time"] - batches["previous"]).dt.total_seconds()
    batches["seconds"] = dt
    batches["records_per_s"] = batches["records"] / dt.where(dt > 0)
    return batches.dropna(subset=["records_per_s"]).drop(columns="previous")


def restore_rate_chart(
    events: pd.DataFrame,
    y: str = "rate",
    title: str | None = None,
) -> alt.Chart | alt.FacetChart:
    """Restore speed per partition over time, from restore-listener events.

    ``events``: ``time``, ``partition``, ``event`` ('start' | 'batch' | 'end'),
    ``records`` (records written by that batch), ``total`` (restored so far in the
    partition), as ``RecordingListener.frame()`` gives; a ``source`` column (e.g. raw log
    / compacted) draws one panel per source. ``y``: ``"rate"`` (records per second of
    each batch: its records over the time since the partition's previous event) or
    ``"total"`` (records restored so far). Time is in seconds since the restore began
    (of each source).

    Example:
        >>> t0 = pd.Timestamp("2026-11-22 09:00")
        >>> s = pd.Timedelta(seconds=1)
        >>> events = pd.DataFrame({"time": [t0, t0 + s, t0 + 3 * s, t0 + 3 * s],
        ...     "partition": 0, "event": ["start", "batch", "batch", "end"],
        ...     "offset": [0, 499, 999, 1000], "records": [0, 500, 500, 0],
        ...     "total": [0, 500, 1000, 1000]})
        >>> spec = restore_rate_chart(events).to_dict()
        >>> [row["records_per_s"] for row in spec["datasets"][spec["data"]["name"]]]
        [500.0, 250.0]
    """
    require_columns(events, ("time", "partition", "event", "records", "total"), "restore events",
             "e.g. RecordingListener.frame() or RestoreResult.events")
    if y not in ("rate", "total"):
        raise BadArgument("y", y, ["rate", "total"])
    source = "source" if "source" in events.columns else None
    group = [c for c in (source, "partition") if c is not None]
    data = events.copy()
    data["time"] = pd.to_datetime(data["time"])
    data["since_s"] = _seconds_since(data, "time", source)
    extra = ("offset", "seconds", "total")
    if y == "rate":
        data = _rates(data, group)
        field, y_title = "records_per_s", "records restored per second"
        default = "Restore speed per partition"
        mark = alt.Chart().mark_line(point=True, interpolate="step-before")
        subtitle = ("Each point: one batch of records written to the store, divided by the "
                    "time since the partition's previous batch.")
    else:
        data = data[data["event"].isin(["start", "batch", "end"])].sort_values(
            [*group, "time"], kind="stable")
        field, y_title = "total", "records restored so far"
        default = "Records restored per partition"
        mark = alt.Chart().mark_line(point=True)
        subtitle = "Records written to each partition's store since its restore began."
    keep = [c for c in ("since_s", "time", "partition", "event", "records", field, *extra,
                        source) if c is not None and c in data.columns]
    data = data[list(dict.fromkeys(keep))]
    chart = mark.encode(
        x=alt.X("since_s:Q", title="seconds since the restore began"),
        y=alt.Y(f"{field}:Q", title=y_title, axis=alt.Axis(format="~s")),
        color=alt.Color("partition:N", title="partition"),
        tooltip=_tips(data, ("partition", source, "event", "time", "since_s", "records",
                             field, *extra)),
    ).properties(width=520, height=200)
    heading = alt.Title(title or default, subtitle=subtitle)
    if source is None:
        return chart.properties(data=inline(data), title=heading)
    sources = list(dict.fromkeys(events["source"].astype(str)))   # in the order given
    return chart.facet(row=alt.Row("source:N", title=None, sort=sources),
                       data=inline(data)).properties(
        title=heading)


# --- standby replicas ----------------------------------------------------------------------
def standby_lag_chart(
    lag: pd.DataFrame,
    title: str = "How far the standby replicas are behind the changelog",
) -> alt.Chart:
    """Records behind the changelog's end over time, one line per partition (and replica).

    ``lag``: ``time``, ``partition``, ``lag`` (records behind), optionally ``position``,
    ``end_offset`` and ``replica`` (drawn dashed per replica).

    Example:
        >>> t0 = pd.Timestamp("2026-11-22 09:00")
        >>> lag = pd.DataFrame({"time": [t0, t0 + pd.Timedelta(seconds=1)],
        ...     "partition": [0, 0], "lag": [120, 0]})
        >>> standby_lag_chart(lag).to_dict()["mark"]["type"]
        'line'
    """
    require_columns(lag, ("time", "partition", "lag"), "standby lag frame",
             "one row per standby position reading")
    data = lag[[c for c in ("time", "partition", "lag", "position", "end_offset", "replica")
                if c in lag.columns]].copy()
    data["time"] = pd.to_datetime(data["time"])
    data = data.sort_values([c for c in ("replica", "partition", "time") if c in data.columns],
                            kind="stable")
    encoding = {
        "x": alt.X("time:T", title="time (UTC)", axis=alt.Axis(format="%H:%M:%S")),
        "y": alt.Y("lag:Q", title="records behind the changelog's end"),
        "color": alt.Color("partition:N", title="partition"),
        "tooltip": _tips(data, ("time", "partition", "replica", "lag", "position",
                                "end_offset")),
    }
    if "replica" in data.columns:
        encoding["strokeDash"] = alt.StrokeDash("replica:N", title="replica")
        encoding["detail"] = ["partition:N", "replica:N"]
    subtitle = ["0 = the replica holds everything written so far: it can take over at once.",
                "A failover to a replica that lags must first replay what it misses."]
    return alt.Chart(inline(data)).mark_line(point=True).encode(**encoding).properties(
        title=alt.Title(title, subtitle=subtitle), width=520, height=200)


# --- failover drills -----------------------------------------------------------------------
def failover_chart(
    report: pd.DataFrame,
    title: str = "Time until the store serves again after a failover",
) -> alt.LayerChart:
    """Bars of seconds to serve per scenario, with the records replayed written beside them.

    ``report``: ``scenario`` (e.g. 'no standby', 'standby', 'stale standby'),
    ``records_replayed``, ``seconds_to_serve``, optionally ``restore_seconds`` (drawn as
    a darker bar inside), ``correct`` and ``standby_lag_at_kill`` (as
    ``statekit.drills.failover_drill`` reports). Several rows of one scenario (e.g. one
    per partition) are combined: records summed, seconds the largest (serving waits for
    the slowest).

    Example:
        >>> failover_chart(report).to_dict()["title"]["text"]           # doctest: +SKIP
        'Time until the store serves again after a failover'
    """
    require_columns(report, ("scenario", "records_replayed", "seconds_to_serve"), "failover report",
             "one row per failover scenario")
    how = {"records_replayed": "sum", "seconds_to_serve": "max"}
    for column, combine in (("restore_seconds", "max"), ("standby_lag_at_kill", "max"),
                            ("correct", "all")):
        if column in report.columns:
            how[column] = combine
    data = report.groupby("scenario", sort=False).agg(how).reset_index()
    data["label"] = [f"{int(n):,} record{'s' * (int(n) != 1)} replayed"
                     for n in data["records_replayed"]]
    if "correct" in data.columns:   # failover_drill() checks what the new owner serves
        data.loc[~data["correct"].astype(bool), "label"] += " (wrong contents!)"
    domain, colours = _colours(data["scenario"].astype(str), SCENARIO_COLOURS)
    y = alt.Y("scenario:N", title=None, sort=domain)
    tooltip = _tips(data, ("scenario", "seconds_to_serve", "restore_seconds",
                           "records_replayed", "standby_lag_at_kill", "correct"))
    base = alt.Chart(inline(data))
    layers = [base.mark_bar(height={"band": 0.6}, opacity=0.55 if "restore_seconds" in data
                            else 1).encode(
        x=alt.X("seconds_to_serve:Q", title="seconds until the store serves again"),
        y=y, color=alt.Color("scenario:N", legend=None,
                             scale=alt.Scale(domain=domain, range=colours)),
        tooltip=tooltip)]
    if "restore_seconds" in data.columns:
        layers.append(base.mark_bar(height={"band": 0.6}).encode(
            x="restore_seconds:Q", y=y, color=alt.Color("scenario:N", legend=None,
                                                        scale=alt.Scale(domain=domain,
                                                                        range=colours)),
            tooltip=tooltip))
    layers.append(base.mark_text(align="left", dx=5).encode(
        x="seconds_to_serve:Q", y=y, text="label:N", tooltip=tooltip))
    subtitle = ["A standby replica that kept up takes over with little or nothing to replay;",
                "without one, the new owner replays the whole changelog first."]
    if "restore_seconds" in data.columns:
        subtitle.append("Dark part: replaying the changelog.")
    return alt.layer(*layers).properties(title=alt.Title(title, subtitle=subtitle),
                                         width=460, height=max(80, 40 * len(data)))


#: a restore pre-flight verdict's colour (the worst finding of a partition)
PREFLIGHT_COLOURS = {"fails": "#d62728", "incomplete": "#ff7f0e", "waits": "#bcbd22",
                     "input lost": "#9467bd", "note": "#7f7f7f", "ok": "#2ca02c"}


def restore_preflight_chart(partitions: pd.DataFrame, findings: pd.DataFrame) -> alt.LayerChart:
    """Each changelog partition's log from its start to its end (a bar, coloured by the
    partition's worst finding) and where its store's checkpoint lies (a tick): a tick left of
    its bar is a store whose next records were deleted. ``partitions`` and ``findings`` as
    ``RestorePreflight`` has them.

    Example:
        >>> parts = pd.DataFrame({"partition": [0, 1], "store_offset": [40, 10],
        ...                       "log_start": [0, 25], "log_end": [90, 80]})
        >>> found = pd.DataFrame({"verdict": ["fails"], "partition": [1], "what": ["..."],
        ...                       "remedy": ["..."]})
        >>> spec = restore_preflight_chart(parts, found).to_dict()
        >>> [layer["mark"]["type"] for layer in spec["layer"]]
        ['bar', 'tick']
    """
    require_columns(partitions, ["partition", "store_offset", "log_start", "log_end"],
                    "partitions frame", "RestorePreflight.partitions")
    order = list(PREFLIGHT_COLOURS)
    worst = {}
    for verdict, partition in zip(findings["verdict"], findings["partition"], strict=True):
        if not pd.isna(partition):
            now = worst.get(int(partition), "ok")
            worst[int(partition)] = min(now, verdict, key=order.index)
    data = partitions[["partition", "store_offset", "log_start", "log_end"]].copy()
    data["partition"] = data["partition"].astype("int64")
    data["verdict"] = [worst.get(p, "ok") for p in data["partition"]]
    data["store_offset"] = data["store_offset"].astype("float64")
    colour = alt.Color("verdict:N", scale=alt.Scale(domain=order,
                                                    range=list(PREFLIGHT_COLOURS.values())))
    base = alt.Chart(inline(data), title="Changelog offsets per partition: the log (bar), "
                                         "the store's checkpoint (tick)")
    y = alt.Y("partition:O", title="partition")
    log = base.mark_bar(opacity=0.7).encode(
        x=alt.X("log_start:Q", title="offset"), x2="log_end:Q", y=y, color=colour,
        tooltip=_tips(data, ["partition", "log_start", "log_end", "verdict"]))
    store = base.mark_tick(thickness=3, size=22, color="black").encode(
        x="store_offset:Q", y=y, tooltip=_tips(data, ["partition", "store_offset"]))
    return (log + store).properties(width=460, height=30 * max(len(data), 2))


def cutover_chart(times: pd.DataFrame,
                  title: str = "Moving a store: time with nothing answering") -> alt.Chart:
    """Stacked bars per strategy: seconds the old store still answered, seconds nothing did
    (``statekit.restore.cutover.cutover_times``)."""
    require_columns(times, ["strategy", "phase", "step", "seconds", "records"],
                    "cutover frame", "as statekit.restore.cutover.cutover_times gives")
    phases = ["the old store still answers", "nothing answers"]
    return alt.Chart(inline(times)).mark_bar().encode(
        y=alt.Y("strategy:N", title=None, sort=["cold", "warm"]),
        x=alt.X("seconds:Q", title="seconds"),
        color=alt.Color("phase:N", title=None, scale=alt.Scale(
            domain=phases, range=["#54a24b", "#e45756"])),
        order=alt.Order("phase:N", sort="descending"),
        tooltip=_tips(times, ["strategy", "step", "phase", "seconds", "records"]),
    ).properties(width=460, height=90, title=alt.Title(
        title, subtitle="warm: the new store is restored while the old one serves; only the "
                        "tail is read at the switch"))
