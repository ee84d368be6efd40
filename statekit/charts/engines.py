"""Charts of one query on two engines: statekit on Spark beside the reference Kafka Streams
application (``statekit.kafka_streams.side_by_side``).

- ``held_by_engine_chart``: per window, the (key, window) each engine holds (``SideBySide.held()``),
  Spark's watermark marked: what only Kafka Streams holds ended before it;
- ``changelog_records_chart``: the changelog records each writer wrote, beside reference counts
  (the events, the windows);
- ``key_placement_chart``: key × partition on each engine, the windows each partition holds
  (Spark spreads a key's windows, Kafka Streams keeps them in one partition);
- ``segments_chart``: the rows of each time segment of a Kafka Streams window store on disk;
- ``failover_answers_chart``: after an instance is killed, each answer of the survivor for one
  key, by its role (``stale``: a standby's copy, then ``active``);
- ``restores_chart``: the same state restored by each engine, its seconds and what it read
  (``statekit.kafka_streams.compare_restores``).

Example:
    >>> import pandas as pd
    >>> held = pd.DataFrame({"player": ["p1", "p1"], "window_start": pd.to_datetime(
    ...     ["2026-01-05 10:00", "2026-01-05 10:10"]), "where": ["only in Kafka Streams", "both"],
    ...     "partition_spark": [None, 2], "partition_kafka_streams": [0, 0]})
    >>> held_by_engine_chart(held).to_dict()["layer"][0]["mark"]["type"]
    'bar'
    >>> changelog_records_chart({"Kafka Streams": 479}).to_dict()["layer"][0]["mark"]["type"]
    'bar'
"""

from __future__ import annotations

from collections.abc import Mapping

import altair as alt
import pandas as pd

from statekit.charts.data import inline
from statekit.charts.tooltips import typed_tooltips
from statekit.errors import BadArgument
from statekit.validate import require_columns

WHERE = ("both", "only in Kafka Streams", "only on Spark")
WHERE_COLOURS = ("#4c78a8", "#f58518", "#e45756")
ENGINES = {"partition_spark": "Spark (murmur3 of window and key)",
           "partition_kafka_streams": "Kafka Streams (murmur2 of the key)"}


def held_by_engine_chart(held: pd.DataFrame, watermark: object = None,
                         title: str = "Which engine holds each window") -> alt.LayerChart:
    """Stacked bars per window start: how many keys' windows both engines hold, and how many
    only one does; ``watermark`` (Spark's last) drawn as a rule."""
    require_columns(held, ["window_start", "where"], "held frame", "as SideBySide.held() gives")
    unknown = sorted(set(held["where"]) - set(WHERE))
    if unknown:
        raise BadArgument("where", unknown[0], WHERE)
    spans = ["window_start", "window_end"] if "window_end" in held else ["window_start"]
    data = held.groupby([*spans, "where"]).size().rename("windows").reset_index()
    # stacked here: a bar spanning its window (x to x2) is not stacked by Vega-Lite
    data = data.sort_values([*spans, "where"], key=lambda c: c.map(WHERE.index)
                            if c.name == "where" else c, ignore_index=True)
    data["top"] = data.groupby(spans)["windows"].cumsum()
    data["bottom"] = data["top"] - data["windows"]
    bars = alt.Chart(inline(data)).mark_bar(stroke="white", strokeWidth=0.5).encode(
        x=alt.X("window_start:T", title="window (start to end)"),
        **({"x2": "window_end:T"} if "window_end" in held else {}),
        y=alt.Y("bottom:Q", title="(key, window) held"), y2="top:Q",
        color=alt.Color("where:N", title="held", sort=list(WHERE),
                        scale=alt.Scale(domain=list(WHERE), range=list(WHERE_COLOURS))),
        tooltip=typed_tooltips(data, [*spans, "where", "windows"]))
    layers = [bars]
    if watermark is not None:
        mark = pd.DataFrame({"watermark": [pd.Timestamp(watermark)],
                             "label": ["Spark's watermark"]})
        rule = alt.Chart(inline(mark)).encode(x="watermark:T")
        layers += [rule.mark_rule(color="black", strokeDash=[4, 3]),
                   rule.mark_text(align="left", dx=4, dy=-6, baseline="top", y=0).encode(
                       text="label:N")]
    return alt.layer(*layers).properties(width=520, height=220, title=alt.Title(
        title, subtitle="Spark removes a window once its watermark passes the window's end; "
                        "a running Kafka Streams app answers from its store and its record "
                        "cache"))


def changelog_records_chart(records: Mapping[str, int],
                            marks: Mapping[str, int] | None = None,
                            title: str = "Changelog records each writer wrote"
                            ) -> alt.LayerChart:
    """One bar per writer (``records``: name → records); ``marks`` (name → count, e.g. the
    events accepted, the windows held) drawn as labelled rules to read the bars against."""
    if not records:
        raise BadArgument("records", records, "a mapping of writer name to records written")
    data = pd.DataFrame({"writer": list(records), "records": [int(n) for n in records.values()]})
    base = alt.Chart(inline(data)).encode(
        y=alt.Y("writer:N", title=None, sort=list(records)),
        x=alt.X("records:Q", title="changelog records"))
    layers = [base.mark_bar(color="#4c78a8").encode(
                  tooltip=typed_tooltips(data, ["writer", "records"])),
              base.mark_text(align="left", dx=3).encode(text=alt.Text("records:Q", format=","))]
    if marks:
        lines = pd.DataFrame({"what": list(marks), "count": [int(n) for n in marks.values()]})
        rule = alt.Chart(inline(lines)).encode(x="count:Q")
        layers += [rule.mark_rule(color="#e45756", strokeDash=[4, 3]),
                   rule.mark_text(angle=270, align="left", dx=4, dy=-4, y=0, color="#e45756"
                                  ).encode(text="what:N")]
    return alt.layer(*layers).properties(width=480, height=40 * len(records) + 40,
                                         title=title)


def key_placement_chart(held: pd.DataFrame, key: str,
                        title: str = "Where each engine keeps a key's windows") -> alt.HConcatChart:
    """Key × partition, one panel per engine: how many of the key's windows each partition
    holds (over the (key, window) both engines hold)."""
    require_columns(held, [key, "where", *ENGINES], "held frame", "as SideBySide.held() gives")
    both = held[held["where"] == "both"]
    panels = []
    for column, engine in ENGINES.items():
        data = (both.groupby([key, column]).size().rename("windows").reset_index()
                .rename(columns={column: "partition"}))
        data["partition"] = data["partition"].astype(int)
        panels.append(alt.Chart(inline(data)).mark_rect().encode(
            x=alt.X("partition:O", title="partition", axis=alt.Axis(labelAngle=0)),
            y=alt.Y(f"{key}:N", title=key),
            color=alt.Color("windows:Q", title="windows", scale=alt.Scale(scheme="blues")),
            tooltip=typed_tooltips(data, [key, "partition", "windows"]),
        ).properties(width=120, title=engine))
    return alt.hconcat(*panels).properties(title=alt.Title(
        title, subtitle="one row per key: Spark's row spreads over partitions, Kafka Streams' "
                        "stays in one"))


def segments_chart(segments: pd.DataFrame,
                   title: str = "A Kafka Streams window store on disk: one RocksDB per segment"
                   ) -> alt.Chart:
    """Bars per segment (``segment``: its folder's name) and ``partition``: the rows it holds."""
    require_columns(segments, ["segment", "partition", "rows"], "segments frame",
                    "one row per (partition, segment) with its rows")
    data = segments[["segment", "partition", "rows"]].copy()
    return alt.Chart(inline(data)).mark_bar().encode(
        x=alt.X("segment:N", title="segment folder", axis=alt.Axis(labelAngle=-30)),
        y=alt.Y("rows:Q", title="rows (key, window)"),
        color=alt.Color("partition:N", title="task partition"),
        xOffset="partition:N",
        tooltip=typed_tooltips(data, ["segment", "partition", "rows"]),
    ).properties(width=420, height=200, title=title)


#: the roles of an answer after a kill, in the order they come
ANSWER_ROLES = ("no answer", "stale", "active")
ANSWER_COLOURS = ("#888888", "#9ecae9", "#4c78a8")


def failover_answers_chart(answers: pd.DataFrame,
                           title: str = "The survivor's answers for one key after a kill"
                           ) -> alt.Chart:
    """One tick per answer (``seconds`` since the kill, ``role``), as
    ``statekit.workshop.kafka_streams.watch_failover`` gives."""
    require_columns(answers, ["seconds", "role"], "answers frame",
                    "as statekit.workshop.kafka_streams.watch_failover gives")
    unknown = sorted(set(answers["role"]) - set(ANSWER_ROLES))
    if unknown:
        raise BadArgument("role", unknown[0], ANSWER_ROLES)
    data = answers[["seconds", "role", *(c for c in ("served_by", "rows") if c in answers)]]
    return alt.Chart(inline(data)).mark_tick(thickness=2, size=18).encode(
        x=alt.X("seconds:Q", title="seconds since the kill"),
        y=alt.Y("role:N", title=None, sort=list(ANSWER_ROLES)),
        color=alt.Color("role:N", title="answered as", sort=list(ANSWER_ROLES), legend=None,
                        scale=alt.Scale(domain=list(ANSWER_ROLES), range=list(ANSWER_COLOURS))),
        tooltip=typed_tooltips(data, list(data.columns)),
    ).properties(width=480, height=90, title=alt.Title(
        title, subtitle="stale: the survivor's standby copy answers at once; active: once the "
                        "group has noticed the death and moved the partition"))


def restores_chart(table: pd.DataFrame,
                   title: str = "The same state restored by each engine") -> alt.HConcatChart:
    """Two bars per engine (``RestoreComparison.table``): the seconds its restore took, and
    what it read (changelog records, or Spark's snapshot and delta files)."""
    require_columns(table, ("engine", "records", "files", "seconds"), "restores table",
                    "as compare_restores(...).table gives")
    read = table.assign(
        amount=table["records"].fillna(table["files"]).astype("int64"),
        unit=table["records"].isna().map({True: "checkpoint files", False: "changelog records"}))
    data = read[["engine", "seconds", "amount", "unit"]]
    base = alt.Chart(inline(data)).encode(y=alt.Y("engine:N", title=None,
                                                  sort=list(data["engine"])))
    seconds = base.mark_bar(color="#4c78a8").encode(
        x=alt.X("seconds:Q", title="restore, seconds"),
        tooltip=typed_tooltips(data, ["engine", "seconds"]))
    amount = base.mark_bar(color="#72b7b2").encode(
        x=alt.X("amount:Q", title="what it read (records or files)"),
        tooltip=typed_tooltips(data, ["engine", "amount", "unit"]))
    labels = base.mark_text(align="left", dx=3).encode(
        x="amount:Q", text=alt.Text("label:N")).transform_calculate(
        label="format(datum.amount, ',') + ' ' + datum.unit")
    return alt.hconcat(seconds.properties(width=220, height=90),
                       (amount + labels).properties(width=260, height=90)
                       ).properties(title=title)
