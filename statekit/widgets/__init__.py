"""Jupyter widgets over statekit's charts: the top layer, above the charts and drills they drive.

``ChangelogScrubber`` scrubs a changelog batch by batch next to its compaction;
``DrillPanel`` runs a failover drill from a notebook; ``Dashboard`` watches a statekit
query and ``AttachedDashboard`` any query attached with ``statekit.attach``. They show
Altair charts in an offline ``alt.JupyterChart`` (Vega bundled by vl-convert).
"""

from statekit._lazy import lazy_exports

_NAMES = {
    "AttachedDashboard": "statekit.widgets.attached",
    "show_attached": "statekit.widgets.attached",
    "ChangelogScrubber": "statekit.widgets.scrubber",
    "Dashboard": "statekit.widgets.dashboard",
    "show_dashboard": "statekit.widgets.dashboard",
    "DrillPanel": "statekit.widgets.drill_panel",
    "HiddenSolution": "statekit.widgets.solution",
    "LiveLeaderboard": "statekit.widgets.leaderboard",
}
__getattr__, __dir__ = lazy_exports(__name__, _NAMES)
__all__ = sorted(_NAMES)
