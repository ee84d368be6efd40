"""Charts of state on disk: what an open iterator pins, what compression saves, and where a
query's state lives.

- ``pinned_files_chart``: live and pinned SST bytes at each step of
  ``statekit.stores.pinning.iterator_pinning``;
- ``compression_chart``: the same rows' SST bytes per codec
  (``statekit.stores.compression.compressed_sizes``);
- ``state_on_disk_chart``: checkpoint and local bytes by kind
  (``statekit.spark_state.disk.state_on_disk``).

Example:
    >>> import pandas as pd
    >>> sizes = pd.DataFrame({"codec": ["none", "lz4"], "sst_bytes": [100, 40],
    ...                       "ratio": [1.0, 0.4]})
    >>> compression_chart(sizes).to_dict()["layer"][0]["mark"]["type"]
    'bar'
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from statekit.charts.data import inline
from statekit.charts.tooltips import typed_tooltips
from statekit.validate import require_columns

BLUE, RED, GREY = "#4c78a8", "#e45756", "#bdbdbd"


def pinned_files_chart(steps: pd.DataFrame,
                       title: str = "What an open iterator keeps on disk") -> alt.Chart:
    """Stacked bars per step: SST bytes the store uses (live) and bytes kept only for the
    open iterator (pinned)."""
    require_columns(steps, ["step", "live_bytes", "pinned_bytes"], "iterator pinning frame",
                    "as statekit.stores.pinning.iterator_pinning gives")
    order = list(steps["step"])
    data = steps.melt(id_vars=[c for c in steps.columns if c not in ("live_bytes",
                                                                      "pinned_bytes")],
                      value_vars=["live_bytes", "pinned_bytes"], var_name="files",
                      value_name="bytes")
    data["files"] = data["files"].map({"live_bytes": "live (the store's current version)",
                                       "pinned_bytes": "pinned (kept for the open iterator)"})
    tips = typed_tooltips(data, ["step", "files", "bytes", "versions", "store_entries",
                                 "iterator_reads"])
    return alt.Chart(inline(data)).mark_bar().encode(
        x=alt.X("step:N", sort=order, title=None, axis=alt.Axis(labelAngle=0,
                                                                labelLimit=150)),
        y=alt.Y("bytes:Q", title="SST bytes on disk"),
        color=alt.Color("files:N", title=None, scale=alt.Scale(range=[BLUE, RED])),
        tooltip=tips,
    ).properties(width=560, height=220, title=alt.Title(
        title, subtitle="deleted and compacted away, yet still on disk until the iterator "
                        "is closed"))


def compression_chart(sizes: pd.DataFrame,
                      title: str = "The same state under each compression codec"
                      ) -> alt.LayerChart:
    """Bars of SST bytes per codec, labelled with the ratio to no compression."""
    require_columns(sizes, ["codec", "sst_bytes", "ratio"], "compression sizes frame",
                    "as statekit.stores.compression.compressed_sizes gives")
    data = sizes.copy()
    data["label"] = [f"{r:.0%}" for r in data["ratio"]]
    base = alt.Chart(inline(data)).encode(
        x=alt.X("codec:N", sort=list(data["codec"]), title="compression codec",
                axis=alt.Axis(labelAngle=0)),
        y=alt.Y("sst_bytes:Q", title="SST bytes on disk"))
    bars = base.mark_bar(color=BLUE).encode(
        tooltip=typed_tooltips(data, ["codec", "sst_bytes", "ratio", "rows", "raw_bytes"]))
    labels = base.mark_text(dy=-6).encode(text="label:N")
    return alt.layer(bars, labels).properties(width=360, height=220, title=alt.Title(
        title, subtitle="labels: size against no compression"))


def state_on_disk_chart(disk: pd.DataFrame,
                        title: str = "Where the query's state lives on disk") -> alt.Chart:
    """Horizontal bars of bytes by place (checkpoint, local) and kind."""
    require_columns(disk, ["place", "what", "files", "bytes"], "state on disk frame",
                    "as statekit.spark_state.disk.state_on_disk gives")
    data = disk[disk["files"] > 0].copy()
    return alt.Chart(inline(data)).mark_bar().encode(
        y=alt.Y("what:N", title=None, sort=list(data["what"]),
                axis=alt.Axis(labelLimit=300)),
        x=alt.X("bytes:Q", title="bytes"),
        color=alt.Color("place:N", title=None, scale=alt.Scale(
            domain=["checkpoint", "local"], range=[BLUE, GREY])),
        tooltip=typed_tooltips(data, ["place", "what", "files", "bytes"]),
    ).properties(width=420, height=max(60, 28 * len(data)), title=alt.Title(
        title, subtitle="the checkpoint is the durable copy; the local folders are rebuilt "
                        "from it"))
