"""Charts of a running query's insides: RocksDB metrics, the micro-batch as record cache,
and the panels of the live dashboard.

Pure functions from the frames of ``statekit.monitor`` (and ``StatefulQuery.progress()``)
to Altair charts, data inlined:

- ``cache_hit_ratio_chart``: the block cache hit ratio per batch (``rocksdb_metrics``);
- ``memory_chart``: RocksDB memory per batch stacked by component, the sizing rule's
  estimate as a line (``memory_by_batch``);
- ``commit_phases_chart``: where each commit's time went, phase by phase;
- ``record_cache_chart``: changelog records per key and input events per key, per batch,
  at each batch size (``measure_record_cache``);
- ``input_chart``, ``changelog_growth_chart``, ``watermark_chart``: the dashboard's
  batches and input rate, changelog records against their compacted size, the watermark.

Example:
    >>> import pandas as pd
    >>> tidy = pd.DataFrame({"batch": [0, 1], "metric": "block_cache_hit_ratio",
    ...                      "value": [0.5, 0.9], "unit": "ratio"})
    >>> cache_hit_ratio_chart(tidy).to_dict()["layer"][0]["mark"]["type"]
    'line'
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from statekit.charts.data import inline
from statekit.charts.tooltips import typed_tooltips
from statekit.validate import require_columns

BLUE, LIGHT_BLUE, ORANGE, RED, GREEN, GREY = ("#4c78a8", "#9ecae9", "#f58518", "#e45756",
                                              "#54a24b", "#888888")
WIDTH = 480
METRICS_SOURCE = "as statekit.monitor.rocksdb_stats gives"
PROGRESS_SOURCE = "as StatefulQuery.progress() gives"
#: Memory components drawn by ``memory_chart`` (tidy metric → label), bottom first.
MEMORY_COMPONENTS = {"memory_pinned_blocks": "pinned blocks",
                     "memory_unpinned": "memtables, block cache, indexes"}
#: Commit phases (tidy metric → label), bottom first (``statekit.monitor.COMMIT_PHASES``).
PHASE_LABELS = {"commit_flush": "flush", "commit_compact": "compact",
                "commit_checkpoint": "checkpoint", "commit_changelog_file": "changelog file",
                "commit_zip_upload": "snapshot upload", "commit_sync_other": "other sync"}
PHASE_COLOURS = [BLUE, "#72b7b2", GREEN, ORANGE, "#b279a2", GREY]


def _batch_axis(title: str = "batch") -> alt.X:
    return alt.X("batch:O", title=title, axis=alt.Axis(labelAngle=0, labelOverlap=True))


def _metric_table(metrics: pd.DataFrame, names) -> pd.DataFrame:
    """Batch × the given metrics (missing ones absent), from the tidy frame."""
    require_columns(metrics, ["batch", "metric", "value"], "metrics frame", METRICS_SOURCE)
    picked = metrics[metrics["metric"].isin(list(names))]
    table = picked.pivot_table(index="batch", columns="metric", values="value",
                               aggfunc="last", dropna=False)
    table.columns.name = None
    return table.reset_index()


def _empty_note(text: str, title: str) -> alt.Chart:
    return alt.Chart(inline(pd.DataFrame({"note": [text]})), title=title).mark_text(
        color=GREY).encode(text="note:N").properties(width=WIDTH, height=60)


# --- RocksDB ---------------------------------------------------------------------------------
def cache_hit_ratio_chart(metrics: pd.DataFrame,
                          title: str = "Block cache hit ratio per batch") -> alt.LayerChart:
    """``block_cache_hit_ratio`` per batch (0–1), hits and misses in the tooltip.

    Batches without block reads (everything served from the memtables) have no ratio:
    they are left out of the line, not drawn as 0.
    """
    data = _metric_table(metrics, ["block_cache_hit_ratio", "block_cache_hits",
                                   "block_cache_misses"])
    for column in ("block_cache_hit_ratio", "block_cache_hits", "block_cache_misses"):
        if column not in data:
            data[column] = pd.Series(dtype=float)
    data = data.dropna(subset=["block_cache_hit_ratio"])
    tips = typed_tooltips(data, ["batch", "block_cache_hit_ratio", "block_cache_hits",
                                 "block_cache_misses"])
    base = alt.Chart(inline(data), title=alt.Title(
        title, subtitle="hits / (hits + misses); batches without block reads left out"))
    y = alt.Y("block_cache_hit_ratio:Q", title="hit ratio", scale=alt.Scale(domain=[0, 1]))
    line = base.mark_line(color=BLUE).encode(x=_batch_axis(), y=y)
    points = base.mark_point(color=BLUE, filled=True).encode(x=_batch_axis(), y=y,
                                                             tooltip=tips)
    return alt.layer(line, points).properties(width=WIDTH, height=160)


def memory_chart(metrics: pd.DataFrame, estimate: pd.DataFrame | None = None,
                 title: str = "RocksDB memory per batch") -> alt.LayerChart:
    """Memory used after each batch, stacked by component (pinned blocks; the rest:
    memtables, block cache, indexes and filters), summed over store instances.

    ``estimate``: ``statekit.monitor.memory_by_batch(...)``; its ``estimate`` column is
    drawn as a dashed line over the bars (the sizing rule of ``memory_estimate``).
    """
    data = _metric_table(metrics, [*MEMORY_COMPONENTS, "memory_used", "state_rows"])
    if "memory_unpinned" not in data and "memory_used" in data:
        data["memory_unpinned"] = data["memory_used"]
    present = [c for c in MEMORY_COMPONENTS if c in data]
    long = data.melt(id_vars="batch", value_vars=present, var_name="component",
                     value_name="bytes").dropna(subset=["bytes"])
    long["component"] = long["component"].map(MEMORY_COMPONENTS)
    long["MB"] = long["bytes"] / 2**20
    order = list(MEMORY_COMPONENTS.values())
    long["order"] = long["component"].map({c: i for i, c in enumerate(order)})
    bars = alt.Chart(inline(long)).mark_bar().encode(
        x=_batch_axis(),
        y=alt.Y("MB:Q", title="MiB", stack=True),
        color=alt.Color("component:N", title=None,
                        scale=alt.Scale(domain=order, range=[ORANGE, BLUE])),
        order=alt.Order("order:Q"),
        tooltip=typed_tooltips(long, ["batch", "component", "bytes", "MB"]))
    layers = [bars]
    if estimate is not None:
        require_columns(estimate, ["batch", "estimate"], "memory estimate frame",
                        "as statekit.monitor.memory_by_batch gives")
        est = estimate.dropna(subset=["estimate"]).copy()
        est["MB"] = est["estimate"] / 2**20
        est["series"] = "estimate (sizing rule)"
        layers.append(alt.Chart(inline(est)).mark_line(
            color=RED, strokeDash=[5, 3], point=alt.OverlayMarkDef(color=RED)).encode(
            x=_batch_axis(), y="MB:Q",
            tooltip=typed_tooltips(est, ["batch", "estimate", "measured", "ratio", "memtables",
                                         "block_cache", "indexes_and_filters"])))
    return alt.layer(*layers, title=alt.Title(
        title, subtitle="memoryUsedBytes: memtables + block cache + indexes and filters, "
                        "summed over store instances")).properties(width=WIDTH, height=180)


def commit_phases_chart(metrics: pd.DataFrame,
                        title: str = "Where each commit's time went") -> alt.Chart:
    """The commit's phases per batch, stacked (ms of task time, summed over instances).

    Flush, compact and checkpoint appear in snapshot batches only; the changelog file is
    written every batch; "other sync" is the rest of the file sync.
    """
    data = _metric_table(metrics, PHASE_LABELS)
    present = [c for c in PHASE_LABELS if c in data]
    if not present:
        return _empty_note("no RocksDB commit metrics in these reports", title)
    long = data.melt(id_vars="batch", value_vars=present, var_name="phase",
                     value_name="ms").fillna({"ms": 0})
    long["phase"] = long["phase"].map(PHASE_LABELS)
    domain = list(PHASE_LABELS.values())
    long["order"] = long["phase"].map({p: i for i, p in enumerate(domain)})
    return alt.Chart(inline(long), title=alt.Title(
        title, subtitle="ms summed over state store instances; flush, compact and checkpoint "
                        "only in snapshot batches")).mark_bar().encode(
        x=_batch_axis(),
        y=alt.Y("ms:Q", title="ms", stack=True),
        color=alt.Color("phase:N", title=None,
                        scale=alt.Scale(domain=domain, range=PHASE_COLOURS)),
        order=alt.Order("order:Q"),
        tooltip=typed_tooltips(long, ["batch", "phase", "ms"]),
    ).properties(width=WIDTH, height=180)


# --- the record cache ------------------------------------------------------------------------
def record_cache_chart(frame: pd.DataFrame, by: str = "batch_size",
                       title: str = "The micro-batch as record cache") -> alt.VConcatChart:
    """Per batch and run: changelog records per key (≤ 1) and input events per key.

    ``frame``: ``statekit.monitor.measure_record_cache(...)`` (or ``write_coalescing``
    with a ``by`` column added). Top: events folded into each changelog put — what a
    record cache would have merged — for each batch size; bottom: records written per
    key per batch, which stays at 1 however many events a key got.
    """
    require_columns(frame, [by, "batch", "records_per_key", "events_per_key"],
                    "record cache frame", "as statekit.monitor.measure_record_cache gives")
    data = frame.copy()
    data["run"] = data[by].astype(str)
    runs = list(dict.fromkeys(data.sort_values(by)["run"]))
    colour = alt.Color("run:N", title=by.replace("_", " "), sort=runs)
    tips = typed_tooltips(data, [by, "batch", "input_rows", "records", "puts", "tombstones",
                                 "keys", "records_per_key", "events_per_key"])
    base = alt.Chart(inline(data))
    events = base.mark_line(point=True).encode(
        x=_batch_axis(), y=alt.Y("events_per_key:Q", title="input events per key"),
        color=colour, tooltip=tips).properties(width=WIDTH, height=160)
    records = base.mark_line(point=True).encode(
        x=_batch_axis(), y=alt.Y("records_per_key:Q", title="changelog records per key",
                                 scale=alt.Scale(domain=[0, 1.2])),
        color=colour, tooltip=tips).properties(width=WIDTH, height=110)
    return alt.vconcat(events, records, title=alt.Title(
        title, subtitle="each key is written once per batch, however many events it got"))


# --- the live dashboard ----------------------------------------------------------------------
def input_chart(progress: pd.DataFrame, title: str = "Batches and input") -> alt.LayerChart:
    """Input rows per batch (bars) and the processing rate, rows/s (line, right axis)."""
    require_columns(progress, ["batch", "input_rows"], "progress frame", PROGRESS_SOURCE)
    columns = [c for c in ("batch", "input_rows", "processed_rows_per_second",
                           "input_rows_per_second", "duration_ms", "timestamp")
               if c in progress]
    data = progress[columns].copy()
    tips = typed_tooltips(data, columns)
    base = alt.Chart(inline(data))
    bars = base.mark_bar(color=LIGHT_BLUE).encode(
        x=_batch_axis(), y=alt.Y("input_rows:Q", title="input rows"), tooltip=tips)
    layers = [bars]
    if "processed_rows_per_second" in data:
        layers.append(base.mark_line(color=ORANGE, point=alt.OverlayMarkDef(color=ORANGE)).encode(
            x=_batch_axis(), y=alt.Y("processed_rows_per_second:Q", title="processed rows/s",
                                     axis=alt.Axis(titleColor=ORANGE)),
            tooltip=tips))
    return alt.layer(*layers, title=alt.Title(
        title, subtitle=f"{len(data)} batches")).resolve_scale(y="independent").properties(
        width=WIDTH, height=150)


def changelog_growth_chart(counts: pd.DataFrame,
                           title: str = "Changelog: records vs compacted") -> alt.Chart:
    """The changelog's records so far and what compaction would keep, after each batch.

    ``counts``: ``statekit.monitor.ChangelogCounts.frame()`` (``log_records``,
    ``compacted`` per batch).
    """
    require_columns(counts, ["batch", "log_records", "compacted"], "changelog counts",
                    "as statekit.monitor.ChangelogCounts.frame() gives")
    long = counts.melt(id_vars=[c for c in ("batch", "records", "tombstones") if c in counts],
                       value_vars=["log_records", "compacted"], var_name="view",
                       value_name="count")
    long["view"] = long["view"].map({"log_records": "records in the log",
                                     "compacted": "after compaction"})
    return alt.Chart(inline(long), title=alt.Title(
        title, subtitle="compaction keeps the latest record of each key")).mark_line(
        point=True).encode(
        x=_batch_axis(), y=alt.Y("count:Q", title="records"),
        color=alt.Color("view:N", title=None, scale=alt.Scale(
            domain=["records in the log", "after compaction"], range=[BLUE, GREEN])),
        tooltip=typed_tooltips(long, ["batch", "view", "count", "records", "tombstones"]),
    ).properties(width=WIDTH, height=150)


def watermark_chart(progress: pd.DataFrame, title: str = "Watermark") -> alt.Chart:
    """The event-time watermark after each batch (late events behind it are dropped)."""
    require_columns(progress, ["batch", "watermark"], "progress frame", PROGRESS_SOURCE)
    columns = [c for c in ("batch", "watermark", "timestamp", "dropped_by_watermark")
               if c in progress]
    data = progress[columns].dropna(subset=["watermark"])
    data = data[data["watermark"] > pd.Timestamp("1970-01-01 00:00:01")]
    return alt.Chart(inline(data), title=alt.Title(
        title, subtitle="event time below which windows are final and late rows dropped")
    ).mark_line(point=alt.OverlayMarkDef(color=GREEN), color=GREEN,
                interpolate="step-after").encode(
        x=_batch_axis(), y=alt.Y("watermark:T", title="watermark (UTC)"),
        tooltip=typed_tooltips(data, columns),
    ).properties(width=WIDTH, height=150)


OPERATORS_SOURCE = "as AttachedQuery.operator_progress() gives"


def operators_chart(frame: pd.DataFrame) -> alt.HConcatChart:
    """An attached query's operators side by side: state rows per batch (a line per
    operator) and rows removed per batch (evicted by the watermark or expired), from
    ``AttachedQuery.operator_progress()``. An operator whose line only rises and whose bars
    stay at zero keeps state that nothing bounds.

    Example:
        >>> frame = pd.DataFrame({"batch": [0, 1, 0, 1], "operator_id": [0, 0, 1, 1],
        ...                       "operator": ["stateStoreSave"] * 2 + ["dedupe"] * 2,
        ...                       "rows": [3, 5, 10, 20], "rows_removed": [0, 2, 0, 0]})
        >>> [c["mark"]["type"] for c in operators_chart(frame).to_dict()["hconcat"]]
        ['line', 'bar']
    """
    require_columns(frame, ["batch", "operator_id", "operator", "rows", "rows_removed"],
                    "operator progress frame", OPERATORS_SOURCE)
    data = frame.assign(label=[f"{'?' if pd.isna(i) else int(i)} {name}" for i, name in
                               zip(frame["operator_id"], frame["operator"], strict=True)])
    data = data[["batch", "label", "rows", "rows_removed"]].astype(
        {"rows": "float64", "rows_removed": "float64"})
    base = alt.Chart(inline(data))
    colour = alt.Color("label:N", title="operator")
    rows = base.mark_line(point=True).encode(
        _batch_axis(), alt.Y("rows:Q", title="state rows"), colour,
        tooltip=["batch:O", "label:N", "rows:Q"]).properties(
        width=WIDTH // 2, title="State rows per operator")
    removed = base.mark_bar().encode(
        _batch_axis(), alt.Y("rows_removed:Q", title="rows removed"), colour,
        alt.XOffset("label:N"), tooltip=["batch:O", "label:N", "rows_removed:Q"]).properties(
        width=WIDTH // 2, title="Rows removed (evicted or expired)")
    return alt.hconcat(rows, removed)


def operator_memory_chart(frame: pd.DataFrame) -> alt.Chart:
    """Memory each stateful operator of an attached query holds after each batch (MiB, a
    line per operator), from ``AttachedQuery.operator_progress()``; an empty note when
    Spark reported no memory.

    Example:
        >>> frame = pd.DataFrame({"batch": [0, 1], "operator_id": [0, 0],
        ...                       "operator": ["dedupe"] * 2, "memory_bytes": [2**20, 2**21]})
        >>> operator_memory_chart(frame).to_dict()["encoding"]["y"]["title"]
        'memory (MiB)'
    """
    require_columns(frame, ["batch", "operator_id", "operator", "memory_bytes"],
                    "operator progress frame", OPERATORS_SOURCE)
    data = frame.dropna(subset=["memory_bytes"])
    title = "Memory per operator"
    if data.empty:
        return _empty_note("Spark reported no memory for these operators", title)
    data = pd.DataFrame({
        "batch": data["batch"].astype("int64"),
        "label": [f"{'?' if pd.isna(i) else int(i)} {name}" for i, name in
                  zip(data["operator_id"], data["operator"], strict=True)],
        "memory_mib": data["memory_bytes"].astype("float64") / 2**20})
    return alt.Chart(inline(data), title=title).mark_line(point=True).encode(
        _batch_axis(), alt.Y("memory_mib:Q", title="memory (MiB)"),
        alt.Color("label:N", title="operator"),
        tooltip=["batch:O", "label:N", alt.Tooltip("memory_mib:Q", format=",.2f")],
    ).properties(width=WIDTH, height=150)
