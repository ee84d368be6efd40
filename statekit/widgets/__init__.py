"""Jupyter widgets over statekit's charts: the top layer, above the charts and drills they drive.

``ChangelogScrubber`` scrubs a changelog batch by batch next to its compaction;
``DrillPanel`` runs a failover drill from a notebook. Both show Altair charts in
an offline ``alt.JupyterChart`` (Vega bundled by vl-convert).
"""

from statekit._lazy import lazy_exports

_NAMES = {
    "ChangelogScrubber": "statekit.widgets.scrubber",
    "Dashboard": "statekit.widgets.dashboard",
    "show_dashboard": "statekit.widgets.dashboard",
    "DrillPanel": "statekit.widgets.drill_panel",
    "HiddenSolution": "statekit.widgets.solution",
    "LiveLeaderboard": "statekit.widgets.leaderboard",
}
__getattr__, __dir__ = lazy_exports(__name__, _NAMES)
__all__ = sorted(_NAMES)
