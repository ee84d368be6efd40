"""Altair charts of state: pure functions from pandas DataFrames to charts.

Example:
    >>> chart = state_rows_chart(query.progress())                       # doctest: +SKIP
    >>> save_chart(chart, "statekit-out/state_rows")                     # doctest: +SKIP
"""

from statekit.charts.output import offline, save_chart
from statekit.charts.progress import change_feed_chart, state_rows_chart

__all__ = ["change_feed_chart", "offline", "save_chart", "state_rows_chart"]
