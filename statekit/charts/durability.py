"""Charts of how durable a changelog is: what its transactions leave in the topic, how many
brokers it can lose, and what getting a store back costs with and without it.

- ``transaction_marks_chart``: per partition, offsets holding records and offsets holding
  none (commit markers) (``statekit.changelog.transaction_marks``);
- ``replication_chart``: what a partition does as brokers go down, per setting
  (``statekit.kafka.replication.outcomes``);
- ``recovery_reads_chart``: records read to get a store back, restored or recomputed
  (``statekit.changelog.recovery_reads``).

Example:
    >>> import pandas as pd
    >>> reads = pd.DataFrame({"source": ["a", "b"], "records": [10, 100], "needs": ["x", "y"]})
    >>> recovery_reads_chart(reads).to_dict()["mark"]["type"]
    'bar'
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from statekit.charts.data import inline
from statekit.charts.tooltips import typed_tooltips
from statekit.validate import require_columns

BLUE, ORANGE, RED, GREEN, GREY = "#4c78a8", "#f58518", "#e45756", "#54a24b", "#bdbdbd"


def transaction_marks_chart(marks: pd.DataFrame,
                            title: str = "What the changelog's transactions leave in the log"
                            ) -> alt.Chart:
    """Stacked bars per partition: offsets holding a record, offsets holding none."""
    require_columns(marks, ["partition", "records", "without_record", "transactions"],
                    "transaction marks frame", "as statekit.changelog.transaction_marks gives")
    data = marks[["partition", "batches", "transactions", "records", "without_record"]].melt(
        id_vars=["partition", "batches", "transactions"],
        value_vars=["records", "without_record"], var_name="offset holds", value_name="count")
    data["offset holds"] = data["offset holds"].map(
        {"records": "a record (a put or a tombstone)",
         "without_record": "no record: a commit marker"})
    return alt.Chart(inline(data)).mark_bar().encode(
        x=alt.X("partition:O", title="changelog partition", axis=alt.Axis(labelAngle=0)),
        y=alt.Y("count:Q", title="offsets"),
        color=alt.Color("offset holds:N", title=None, scale=alt.Scale(range=[BLUE, ORANGE])),
        tooltip=typed_tooltips(data, ["partition", "offset holds", "count", "batches",
                                      "transactions"]),
    ).properties(width=300, height=220, title=alt.Title(
        title, subtitle="each transaction ends with a marker in every partition it wrote to"))


def replication_chart(outcomes: pd.DataFrame,
                      title: str = "Brokers down: what a changelog partition does"
                      ) -> alt.LayerChart:
    """A grid: setting × brokers down, coloured by what the partition does."""
    require_columns(outcomes, ["setting", "brokers_down", "outcome", "survives_losing"],
                    "replication outcomes frame", "as statekit.kafka.replication.outcomes gives")
    order = list(dict.fromkeys(outcomes["setting"]))
    kinds = ["writes go on", "writes refused (NOT_ENOUGH_REPLICAS), reads go on",
             "partition offline"]
    base = alt.Chart(inline(outcomes)).encode(
        x=alt.X("brokers_down:O", title="brokers down", axis=alt.Axis(labelAngle=0)),
        y=alt.Y("setting:N", title=None, sort=order, axis=alt.Axis(labelLimit=320)))
    cells = base.mark_rect(stroke="white").encode(
        color=alt.Color("outcome:N", title=None, scale=alt.Scale(domain=kinds,
                                                                 range=[GREEN, ORANGE, RED])),
        tooltip=typed_tooltips(outcomes, ["setting", "brokers_down", "outcome",
                                          "survives_losing"]))
    text = base.mark_text(fontSize=10).encode(
        text=alt.Text("survives_losing:Q"))
    return alt.layer(cells, text).properties(width=260, height=36 * len(order), title=alt.Title(
        title, subtitle="number in a cell: brokers that can be lost with no acknowledged "
                        "record lost"))


def recovery_reads_chart(reads: pd.DataFrame,
                         title: str = "Getting a lost store back: records read") -> alt.Chart:
    """Horizontal bars: records read to restore from the changelog or recompute the store."""
    require_columns(reads, ["source", "records", "needs"], "recovery reads frame",
                    "as statekit.changelog.recovery_reads gives")
    colours = [BLUE, GREEN, RED][:len(reads)]
    return alt.Chart(inline(reads)).mark_bar().encode(
        y=alt.Y("source:N", title=None, sort=list(reads["source"]),
                axis=alt.Axis(labelLimit=320)),
        x=alt.X("records:Q", title="records read"),
        color=alt.Color("source:N", legend=None, sort=list(reads["source"]),
                        scale=alt.Scale(range=colours)),
        tooltip=typed_tooltips(reads, ["source", "records", "needs"]),
    ).properties(width=420, height=30 * len(reads), title=alt.Title(
        title, subtitle="logging off saves every changelog write, and pays at recovery"))
