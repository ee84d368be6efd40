"""Charts of a changelog topic and of its compaction, and of Spark's own state files.

Pure functions from pandas frames to Altair charts. Everything is counted or
binned in pandas first, so a chart carries at most a few thousand rows even for
a million-record changelog; the data is inlined as plain values (no row-limit
error from Altair's default data transformer).

Example:
    >>> import pandas as pd
    >>> log = pd.DataFrame({"partition": [0, 0, 0], "offset": [0, 1, 2],
    ...     "timestamp": pd.to_datetime(["2026-01-05 10:00"] * 3), "batch": [0, 0, 1],
    ...     "tombstone": [False, False, True], "key": ['{"k":"a"}', '{"k":"b"}', '{"k":"a"}'],
    ...     "count": pd.array([1, 1, None], dtype="Int64")})
    >>> from statekit.changelog.compaction import compact
    >>> spec = log_vs_compacted_chart(log, compact(log)).to_dict()
    >>> len(spec["datasets"][spec["data"]["name"]])     # 3 raw records + 2 kept
    5
    >>> key_history_chart(log, '{"k":"a"}').to_dict()["title"]["text"]
    'History of one state row in the changelog'
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping

import altair as alt
import numpy as np
import pandas as pd

from statekit.changelog.log import Changelog, key_columns_of, records_of, value_columns_of
from statekit.charts.data import inline
from statekit.charts.tooltips import typed_tooltips
from statekit.errors import BadArgument
from statekit.model.changelog_record import RECORD_COLUMNS
from statekit.validate import require_columns, whole_number

PUT, TOMBSTONE = "put", "tombstone"
RAW, COMPACTED = "raw log", "compacted"
#: What every compaction view says: the compacted log is a lower bound.
LOWER_BOUND = ("\"compacted\" = after a full clean: the least a real topic keeps (a broker never "
               "cleans the active segment, and cleans on its own schedule)")
RED, BLUE = "#e45756", "#4c78a8"
_LOG_COLUMNS = ("partition", "offset", "key", "tombstone")


SOURCE = "as read_changelog() gives"


def _log_records(changelog: Changelog | pd.DataFrame, needed, what: str) -> pd.DataFrame:
    records = records_of(changelog, what)
    require_columns(records, needed, f"{what} records", SOURCE)
    return records


# --- (a) the raw log next to the compacted log --------------------------------------------------
def _detail(raw: pd.DataFrame, compacted: pd.DataFrame, values: list[str]) -> pd.DataFrame:
    extra = [c for c in ("batch", *values) if c in raw.columns and c in compacted.columns]
    both = pd.concat([frame[[*_LOG_COLUMNS, *extra]].assign(view=view)
                      for view, frame in ((RAW, raw), (COMPACTED, compacted))],
                     ignore_index=True)
    # one row of the chart per key: its rank among the partition's keys (same in both views)
    both["key_row"] = both.groupby("partition")["key"].rank(method="dense").astype("int64")
    both["record"] = np.where(both["tombstone"].to_numpy(bool), TOMBSTONE, PUT)
    return both.drop(columns="tombstone")


def _binned(raw: pd.DataFrame, compacted: pd.DataFrame, bins: int) -> pd.DataFrame:
    """Records and tombstones per offset bin; both views share the raw log's bins."""
    span = raw.groupby("partition")["offset"].agg(["min", "max"])
    parts = span.index.to_numpy()
    width = np.maximum(np.ceil((span["max"] - span["min"] + 1) / bins).to_numpy(), 1).astype(
        "int64")
    frames = []
    for view, frame in ((RAW, raw), (COMPACTED, compacted)):
        partition, offset = frame["partition"].to_numpy(), frame["offset"].to_numpy()
        where = np.minimum(np.searchsorted(parts, partition), max(len(parts) - 1, 0))
        inside = (parts[where] == partition) & (offset >= span["min"].to_numpy()[where]) \
            & (offset <= span["max"].to_numpy()[where]) if len(parts) else partition < 0
        if not inside.all():  # records outside the raw log's offsets cannot be binned with it
            frame, where, offset = frame[inside], where[inside], offset[inside]
        slot = where * bins + (offset - span["min"].to_numpy()[where]) // width[where]
        size = len(parts) * bins
        records = np.bincount(slot, minlength=size)
        tombs = np.bincount(slot, weights=frame["tombstone"].to_numpy(bool), minlength=size)
        found = np.flatnonzero(records)
        p, b = found // bins, found % bins
        start = span["min"].to_numpy()[p] + b * width[p]
        frames.append(pd.DataFrame({
            "view": view, "partition": parts[p], "first_offset": start,
            "last_offset": np.minimum(start + width[p] - 1, span["max"].to_numpy()[p]),
            "records": records[found], "tombstones": tombs[found].astype("int64")}))
    out = pd.concat(frames, ignore_index=True)
    out["bin_end"] = out["last_offset"] + 1
    return out


def log_vs_compacted_chart(
    raw: Changelog | pd.DataFrame,
    compacted: Changelog | pd.DataFrame,
    max_points: int = 5000,
    bins: int = 100,
    title: str = "The changelog topic, and the least a full log compaction keeps of it",
    value_columns: list[str] | None = None,
) -> alt.FacetChart:
    """Each partition's records by offset, raw log (left) next to the compacted log (right).

    "Compacted" is what a clean of *every* segment would leave (``compact()``): the lower
    bound. A real broker keeps more, and the chart's subtitle says so: its cleaner never
    cleans the active segment (the one being written, rolled by ``segment.bytes`` /
    ``segment.ms``), cleans a partition only once ``min.cleanable.dirty.ratio`` of it is
    dirty and records are older than ``min.compaction.lag.ms``, on its own schedule.

    One dot per record, one line of dots per key (coloured by key); a red ``×`` is a
    tombstone. When a view has more than ``max_points`` records both views switch to
    offset bins (``bins`` per partition, the same bins left and right): colour = records
    per bin, tombstones per bin in the tooltip. ``raw`` and ``compacted`` are
    ``Changelog`` objects or their records frames; the tooltips show ``value_columns``
    (default: the Changelog's, or a frame's numeric columns).

    Example:
        >>> log_vs_compacted_chart(log, log.compact())                   # doctest: +SKIP
    """
    values = value_columns_of(raw, value_columns)
    raw = _log_records(raw, _LOG_COLUMNS, "raw changelog")
    compacted = _log_records(compacted, _LOG_COLUMNS, "compacted changelog")
    whole_number(max_points, "max_points", minimum=1)
    whole_number(bins, "bins", minimum=1)
    columns = alt.Column("view:N", title=None, sort=[RAW, COMPACTED],
                         header=alt.Header(labelFontSize=13, labelFontWeight="bold"))
    rows = alt.Row("partition:O", title="partition")
    if max(len(raw), len(compacted)) <= max_points:
        data = _detail(raw, compacted, values)
        tooltip = typed_tooltips(data, ("view", "partition", "offset", "batch", "record", "key",
                                        *values))
        subtitle = ["One dot per record, one line per key (state row). Red × = tombstone "
                    "(the row was deleted). Compaction keeps the latest record of each key.",
                    LOWER_BOUND]
        inner = alt.Chart().mark_point(filled=True, opacity=0.9).encode(
            x=alt.X("offset:Q", title="offset (position of the record in its partition)"),
            y=alt.Y("key_row:Q", title="key", axis=alt.Axis(labels=False, ticks=False,
                                                              grid=False)),
            color=alt.condition(f"datum.record == '{TOMBSTONE}'", alt.value(RED),
                                alt.Color("key:N", legend=None)),
            shape=alt.Shape("record:N", title="record",
                            scale=alt.Scale(domain=[PUT, TOMBSTONE], range=["circle", "cross"])),
            size=alt.condition(f"datum.record == '{TOMBSTONE}'", alt.value(70), alt.value(25)),
            tooltip=tooltip,
        ).properties(width=360, height=120)
    else:
        data = _binned(raw, compacted, bins)
        subtitle = [f"{len(raw):,} records: too many to draw one by one, so each partition's "
                    f"offsets are cut into {bins} bins. Darker = more records in that stretch "
                    "of the log; white = none left.", LOWER_BOUND]
        inner = alt.Chart().mark_rect().encode(
            x=alt.X("first_offset:Q", title="offset (position of the record in its partition)"),
            x2="bin_end:Q",
            color=alt.Color("records:Q", title="records per bin",
                            scale=alt.Scale(scheme="blues", zero=True)),
            tooltip=typed_tooltips(data, ["view", "partition", "first_offset", "last_offset",
                                          "records", "tombstones"]),
        ).properties(width=360, height=36)
    return inner.facet(row=rows, column=columns, data=inline(data)).properties(
        title=alt.Title(title, subtitle=subtitle))


# --- (b) one key through the log ---------------------------------------------------------------
def _select_key(changelog: pd.DataFrame, key: str | Mapping[str, object],
                key_columns: list[str]) -> pd.DataFrame:
    keys = changelog["key"]
    if isinstance(key, str):
        mask = (keys == key).to_numpy()
        if not mask.any():
            try:
                parsed = json.loads(key)
            except ValueError:
                parsed = None
            if isinstance(parsed, dict):
                return _select_key(changelog, parsed, key_columns)
    elif isinstance(key, Mapping):
        mask = np.ones(len(changelog), dtype=bool)
        for column, value in key.items():
            if column not in changelog.columns or column in RECORD_COLUMNS:
                raise BadArgument("key column", column, key_columns)
            series = changelog[column]
            if pd.api.types.is_datetime64_any_dtype(series.dtype):
                try:
                    stamp = pd.Timestamp(value)
                except (ValueError, TypeError):
                    raise BadArgument(f"value of key column {column!r}", value,
                                      "a timestamp such as 2026-01-05 10:00") from None
                if stamp.tzinfo is not None and getattr(series.dtype, "tz", None) is None:
                    stamp = stamp.tz_convert("UTC").tz_localize(None)
                value = stamp
            mask &= (series == value).to_numpy(dtype=bool, na_value=False)
        found = keys[mask].unique()
        if len(found) > 1:
            raise BadArgument("key", dict(key), f"a key naming one state row; it matches "
                              f"{len(found)}, e.g. {', '.join(found[:3])}")
    else:
        raise BadArgument("key", key, "the key's JSON text or a dict of its key columns")
    if not mask.any():
        examples = ", ".join(keys.drop_duplicates().head(3)) or "(the changelog is empty)"
        raise BadArgument("key", key if isinstance(key, str) else dict(key),
                          f"a key present in the changelog, e.g. {examples}")
    return changelog[mask]


def key_history_chart(
    changelog: Changelog | pd.DataFrame,
    key: str | Mapping[str, object],
    value_column: str | None = None,
    x: str = "offset",
    title: str = "History of one state row in the changelog",
) -> alt.LayerChart:
    """Every put of one key (its value after each batch) and its tombstone (a red line).

    ``key`` is the raw JSON key text or a dict of key columns (``{"player": "p07",
    "window_start": "2026-01-05 10:00"}``); ``value_column`` defaults to the first value
    column; ``x`` is ``"offset"`` or ``"batch"``. ``changelog`` is a ``Changelog`` or
    its records frame.

    Example:
        >>> key_history_chart(log, {"player": "p07", "window_start": "2026-01-05 10:00",
        ...                         "window_end": "2026-01-05 10:10"})  # doctest: +SKIP
    """
    values, key_columns = value_columns_of(changelog), key_columns_of(changelog)
    changelog = _log_records(changelog, ("partition", "offset", "batch", "key", "tombstone"),
                             "changelog")
    if x not in ("offset", "batch"):
        raise BadArgument("x axis", x, ["offset", "batch"])
    column = value_column if value_column is not None else (values[0] if values else None)
    if column is None or column not in changelog.columns or column in RECORD_COLUMNS:
        raise BadArgument("value column", value_column, values or "(no value column)")
    rows = _select_key(changelog, key, key_columns)
    text = rows["key"].iloc[0]
    data = rows[["partition", "offset", "batch", "tombstone", "key",
                 *dict.fromkeys([column, *values])]].copy()
    if "timestamp" in rows.columns:
        data["timestamp"] = rows["timestamp"]
    data["record"] = np.where(data["tombstone"].to_numpy(bool), TOMBSTONE, PUT)
    # a key written again after its tombstone starts a new line
    data["life"] = data.groupby("partition")["tombstone"].cumsum().astype("int64") \
        - data["tombstone"].astype("int64")
    data = data.drop(columns="tombstone")
    x_title = "offset (position in the partition)" if x == "offset" else "batch"
    tooltip = typed_tooltips(data, ("partition", "offset", "batch", "timestamp", "record",
                                    *values))
    base = alt.Chart().encode(x=alt.X(f"{x}:Q", title=x_title,
                                      axis=alt.Axis(format="d", tickMinStep=1)))
    puts = base.mark_line(point=True, color=BLUE).encode(
        y=alt.Y(f"{column}:Q", title=column.replace("_", " ")),
        detail=["partition:N", "life:N"], tooltip=tooltip,
    ).transform_filter(f"datum.record == '{PUT}'")
    tombs = base.mark_rule(color=RED, strokeDash=[4, 3], strokeWidth=2).encode(
        tooltip=tooltip).transform_filter(f"datum.record == '{TOMBSTONE}'")
    label = base.mark_text(color=RED, align="left", dx=4, baseline="top", y=4).encode(
        text=alt.value("deleted (tombstone)")).transform_filter(f"datum.record == '{TOMBSTONE}'")
    n_puts = int((data["record"] == PUT).sum())
    n_tombs = len(data) - n_puts
    subtitle = [text, f"{n_puts} put{'s' * (n_puts != 1)}, {n_tombs} tombstone"
                      f"{'s' * (n_tombs != 1)}; compaction keeps only the last of these records."]
    return alt.layer(puts, tombs, label, data=inline(data)).properties(
        title=alt.Title(title, subtitle=subtitle), width=520, height=220)


# --- (c) compaction per partition ----------------------------------------------------------------
def compaction_stats_chart(
    stats: pd.DataFrame, title: str = "Records per partition before and after compaction"
) -> alt.LayerChart:
    """Grouped bars (before / after) per partition, with the fraction kept written above.

    Example:
        >>> compaction_stats_chart(compaction_stats(raw, compact(raw)))  # doctest: +SKIP
    """
    require_columns(stats, ("partition", "records_before", "records_after", "ratio"),
                    "compaction stats frame", "as compaction_stats() gives")
    before, after = "before compaction", "after compaction"
    long = stats.melt(id_vars="partition", value_vars=["records_before", "records_after"],
                      var_name="when", value_name="records")
    long["when"] = long["when"].map({"records_before": before, "records_after": after})
    bars = alt.Chart(inline(long)).mark_bar().encode(
        x=alt.X("partition:O", title="partition", axis=alt.Axis(labelAngle=0)),
        xOffset=alt.XOffset("when:N", sort=[before, after]),
        y=alt.Y("records:Q", title="records in the topic"),
        color=alt.Color("when:N", title=None, sort=[before, after],
                        scale=alt.Scale(domain=[before, after], range=["#9ecae9", BLUE])),
        tooltip=["partition:O", "when:N", alt.Tooltip("records:Q", format=",")],
    )
    labels = stats[["partition", "records_before", "ratio"]].copy()
    labels["label"] = [("kept —" if math.isnan(r) else f"kept {r:.0%}") for r in labels["ratio"]]
    text = alt.Chart(inline(labels)).mark_text(dy=-6, baseline="bottom").encode(
        x=alt.X("partition:O"), y=alt.Y("records_before:Q"), text="label:N")
    return alt.layer(bars, text).properties(
        title=alt.Title(title, subtitle=["kept = records after / records before",
                                         LOWER_BOUND]),
        width=max(160, 90 * len(stats)), height=220)


def broker_compaction_chart(check, title: str = "What the broker's log cleaner kept"
                            ) -> alt.LayerChart:
    """Per partition: records shipped, what statekit predicts the broker keeps at its cleaned
    point, and what it kept (``BrokerCompaction`` from ``check_broker``), with the verdict.

    Example:
        >>> broker_compaction_chart(check_broker(broker, log, broker))  # doctest: +SKIP
    """
    counts = check.per_partition()
    require_columns(counts, ("partition", "shipped", "predicted", "kept", "cleaned_to"),
                    "broker compaction frame", "as BrokerCompaction.per_partition() gives")
    order = ["shipped", "statekit predicts", "the broker kept"]
    long = counts.rename(columns={"predicted": order[1], "kept": order[2]}).melt(
        id_vars=["partition", "cleaned_to"], value_vars=order, var_name="what",
        value_name="records")
    bars = alt.Chart(inline(long)).mark_bar().encode(
        x=alt.X("partition:O", title="partition", axis=alt.Axis(labelAngle=0)),
        xOffset=alt.XOffset("what:N", sort=order),
        y=alt.Y("records:Q", title="records in the topic"),
        color=alt.Color("what:N", title=None, sort=order,
                        scale=alt.Scale(domain=order, range=["#c6dbef", "#6baed6", BLUE])),
        tooltip=["partition:O", "what:N", alt.Tooltip("records:Q", format=","),
                 alt.Tooltip("cleaned_to:Q", title="cleaned up to offset")])
    verdict = ("agree record for record" if check.agrees else
               f"differ: {len(check.missing)} missing, {len(check.unexpected)} unexpected")
    waiting = len(check.tombstones_waiting)
    return alt.layer(bars).properties(
        title=alt.Title(title, subtitle=[
            f"statekit's prediction and the broker {verdict}"
            + (f"; {waiting} tombstones wait for the cleaner's next pass" if waiting else ""),
            "predicted = compaction below the offset each partition is cleaned up to, "
            "every record from it on"]),
        width=max(180, 110 * len(counts)), height=220)


# --- (d) Spark state files: snapshots and deltas ---------------------------------------
def state_files_chart(files: pd.DataFrame, title: str | None = None) -> alt.Chart:
    """Spark's state files per partition over versions; the files a restore reads stand out.

    Takes ``state_files()`` or ``with_restore_use()`` output (column ``used_by_restore``).

    Example:
        >>> state_files_chart(with_restore_use(state_files("/tmp/ck")))  # doctest: +SKIP
    """
    require_columns(files, ("partition", "version", "kind"), "state files frame",
                    "as state_files() gives")
    data = files[[c for c in ("partition", "version", "batch", "kind", "bytes", "modified")
                  if c in files.columns]].copy()
    if "file" in files.columns:
        data["file"] = files["file"].astype(str).str.rsplit("/", n=1).str[-1]
    used = files["used_by_restore"].to_numpy(bool) if "used_by_restore" in files.columns \
        else np.zeros(len(files), dtype=bool)
    roles = ["snapshot loaded", "delta replayed", "snapshot", "delta"]
    data["role"] = np.where(used, np.where(data["kind"] == "snapshot", roles[0], roles[1]),
                            data["kind"])
    target = files.attrs.get("restore_version")
    if title is None:
        title = "Spark's state files per partition" + (
            f": what a restore of version {target} reads" if target is not None else "")
    providers = set(files.attrs.get("providers", ()))
    names = {"rocksdb": "N.changelog / N.zip: RocksDB with changelog checkpointing",
             "hdfs": "N.delta / N.snapshot: Spark's default, HDFS-backed provider"}
    subtitle = ["One delta file per version (a batch's changes), now and then a snapshot "
                "(a full copy): " + ("; ".join(names[p] for p in sorted(providers) if p in names)
                                      or "names by provider") + ".",
                "A restore loads the newest snapshot and replays the deltas after it."]
    tooltip = typed_tooltips(data, ("partition", "version", "batch", "kind", "file", "bytes",
                           "modified", "role"))
    return alt.Chart(inline(data)).mark_point(filled=True, size=90).encode(
        x=alt.X("version:Q", title="state version (= batch + 1)",
                axis=alt.Axis(format="d", tickMinStep=1)),
        y=alt.Y("partition:O", title="partition"),
        yOffset=alt.YOffset("kind:N", sort=["snapshot", "delta"]),
        shape=alt.Shape("kind:N", title="file", scale=alt.Scale(
            domain=["snapshot", "delta"], range=["square", "circle"])),
        color=alt.Color("role:N", title="restore", scale=alt.Scale(
            domain=roles, range=["#e45756", "#f58518", "#d9d9d9", "#bdbdbd"])),
        tooltip=tooltip,
    ).properties(title=alt.Title(title, subtitle=subtitle), width=560,
                 height=max(80, 44 * data["partition"].nunique()))
