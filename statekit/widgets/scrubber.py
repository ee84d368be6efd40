"""A Jupyter widget to scrub through a changelog batch by batch: the raw log next to its compaction.

Example:
    >>> log = pd.DataFrame({"partition": [0, 0, 0], "offset": [0, 1, 2],
    ...     "timestamp": pd.to_datetime(["2026-01-05 10:00"] * 3), "batch": [0, 1, 2],
    ...     "seq": [0, 0, 0], "tombstone": [False, False, True],
    ...     "key": ['{"k":"a"}', '{"k":"a"}', '{"k":"a"}']})
    >>> scrubber = ChangelogScrubber(log)   # in Jupyter: a slider, a summary line, the chart
    >>> scrubber.batch = 1                  # moves the slider; the chart follows
    >>> scrubber.compacted_view["offset"].tolist()
    [1]
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping

import altair as alt
import ipywidgets as widgets
import pandas as pd

from statekit.changelog.compaction import REQUIRED, compact, upto_batch
from statekit.changelog.log import Changelog, records_of, value_columns_of
from statekit.charts.changelog import log_vs_compacted_chart
from statekit.charts.output import offline
from statekit.errors import BadArgument
from statekit.validate import require_columns, whole_number

_COMPACT_OPTIONS = [name for name in inspect.signature(compact).parameters if name != "changelog"]


class ChangelogScrubber(widgets.VBox):
    """A batch slider over a changelog; shows the log up to that batch and what compaction keeps.

    Moving the slider to batch ``b`` recomputes ``compact(upto_batch(changelog, b),
    **compact_options)`` in Python and hands the new chart
    (``log_vs_compacted_chart``) to an ``alt.JupyterChart``. Vega is loaded offline
    from vl-convert's bundle; if that fails the chart falls back to Altair's default
    (Vega from a CDN, so it needs internet) and ``offline`` is False.

    Args:
        changelog: a ``Changelog`` (from ``read_changelog``) or its records frame.
        compact_options: keyword arguments of ``compact`` (``now``,
            ``delete_retention_ms``, ``min_compaction_lag_ms``, ``retention_ms``).
            Without ``now`` each view is compacted "just after" its last batch.
        max_points, bins: passed to ``log_vs_compacted_chart``.

    Attributes:
        batch: the batch shown (set it to move the slider).
        raw_view, compacted_view: the frames currently shown.
        summary: the text line under the slider.

    Example:
        >>> ChangelogScrubber(changelog, {"delete_retention_ms": 60_000})  # doctest: +SKIP
    """

    def __init__(self, changelog: Changelog | pd.DataFrame, compact_options: Mapping | None = None,
                 max_points: int = 5000, bins: int = 100):
        records = records_of(changelog)
        require_columns(records, (*REQUIRED, "batch"), "changelog records",
                        "as read_changelog() gives")
        if records.empty:
            raise BadArgument("changelog", "an empty frame", "a changelog with at least a record")
        options = dict(compact_options or {})
        unknown = [name for name in options if name not in _COMPACT_OPTIONS]
        if unknown:
            raise BadArgument("compact option", unknown[0], _COMPACT_OPTIONS)
        compact(records.iloc[:0], **options)  # bad values fail now, not on the first slide
        self._changelog, self._options = records, options
        self._values = value_columns_of(changelog)
        self._max_points, self._bins = max_points, bins
        self.offline = offline()
        batches = records["batch"].to_numpy()
        first, last = int(batches.min()), int(batches.max())
        self._slider = widgets.IntSlider(
            value=last, min=first, max=last, step=1, description="after batch",
            continuous_update=len(records) <= 200_000,
            style={"description_width": "initial"}, layout=widgets.Layout(width="520px"))
        self._label = widgets.Label()
        self._raw = self._compacted = records.iloc[:0]
        self._chart = alt.JupyterChart(self._make_chart(last))
        self._slider.observe(self._on_slide, names="value")
        super().__init__([self._slider, self._label, self._chart])

    # --- public --------------------------------------------------------------------------------
    @property
    def batch(self) -> int:
        """The batch shown: the log holds every record of batches up to this one."""
        return int(self._slider.value)

    @batch.setter
    def batch(self, value: int) -> None:
        low, high = self._slider.min, self._slider.max
        self._slider.value = whole_number(value, "batch", minimum=low, maximum=high,
                                          accepted=f"a batch id from {low} to {high}")

    @property
    def raw_view(self) -> pd.DataFrame:
        """The changelog up to the batch shown."""
        return self._raw

    @property
    def compacted_view(self) -> pd.DataFrame:
        """What log compaction keeps of ``raw_view``."""
        return self._compacted

    @property
    def summary(self) -> str:
        """The summary line: records and tombstones, raw and compacted."""
        return self._label.value

    @property
    def chart_widget(self) -> alt.JupyterChart:
        """The ``alt.JupyterChart`` showing the two logs (its ``.spec`` is the Vega-Lite dict)."""
        return self._chart

    # --- updating --------------------------------------------------------------------------
    def _make_chart(self, batch: int) -> alt.TopLevelMixin:
        raw = upto_batch(self._changelog, batch)
        compacted = compact(raw, **self._options)
        self._raw, self._compacted = raw, compacted
        n_raw, n_kept = len(raw), len(compacted)
        t_raw = int(raw["tombstone"].sum())
        t_kept = int(compacted["tombstone"].sum())
        kept = f", {n_kept / n_raw:.0%} kept" if n_raw else ""
        self._label.value = (f"After batch {batch}: raw log {n_raw:,} records ({t_raw:,} "
                             f"tombstones); compacted {n_kept:,} records ({t_kept:,} "
                             f"tombstones){kept}")
        return log_vs_compacted_chart(
            raw, compacted, max_points=self._max_points, bins=self._bins,
            value_columns=self._values,
            title=f"The changelog topic after batch {batch}: raw and compacted")

    def _on_slide(self, change) -> None:
        self._chart.chart = self._make_chart(int(change["new"]))
