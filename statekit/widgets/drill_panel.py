"""A small Jupyter panel to run a failover drill and watch its outcome.

Example:
    >>> panel = DrillPanel(broker, query.changelog_topic, spec, "/tmp/drill")  # doctest: +SKIP
    >>> panel            # tick scenarios, press "Run failover drill"  # doctest: +SKIP
    >>> panel.run()      # the same from code; returns the report    # doctest: +SKIP
"""

from __future__ import annotations

import os

import altair as alt
import ipywidgets as widgets
import pandas as pd

from statekit.charts.output import offline
from statekit.charts.restore import failover_chart
from statekit.drills.failover import SCENARIOS, failover_drill
from statekit.model.connection import Kafka, connect
from statekit.model.query_spec import QuerySpec


class DrillPanel(widgets.VBox):
    """Scenario checkboxes, a run button, a status line, the time-to-serve chart and report."""

    def __init__(self, kafka: Kafka, topic: str, spec: QuerySpec, workdir: str | os.PathLike):
        self.kafka, self.topic, self.spec = connect(kafka), topic, spec
        self.workdir = workdir
        self.offline = offline()
        self.choices = {s: widgets.Checkbox(value=True, description=s, indent=False,
                                            layout=widgets.Layout(width="auto"))
                        for s in SCENARIOS}
        self.button = widgets.Button(description="Run failover drill", icon="bolt",
                                     button_style="warning",
                                     layout=widgets.Layout(width="auto"))  # its whole label
        self.status = widgets.Label(value=f"ready: changelog {topic!r}")
        self.chart = alt.JupyterChart(alt.Chart(pd.DataFrame({"x": []})).mark_point())
        self.table = widgets.HTML()
        self.report: pd.DataFrame | None = None
        self.button.on_click(lambda _: self.run())
        super().__init__([widgets.HBox([*self.choices.values(), self.button]), self.status,
                          self.chart, self.table])

    @property
    def scenarios(self) -> list[str]:
        """The scenarios ticked."""
        return [s for s, box in self.choices.items() if box.value]

    def run(self) -> pd.DataFrame:
        """Run the drill for the ticked scenarios; show and return the report."""
        chosen = self.scenarios
        if not chosen:
            self.status.value = "tick at least one scenario"
            return pd.DataFrame()
        self.button.disabled = True
        self.status.value = f"running: {', '.join(chosen)} (each kills a store owner)…"
        try:
            report = failover_drill(self.kafka, self.topic, self.spec, self.workdir,
                                    scenarios=chosen)
        except Exception as exc:
            self.status.value = f"the drill failed: {exc}"
            raise
        finally:
            self.button.disabled = False
        self.report = report
        self.chart.chart = failover_chart(report)
        self.table.value = report.to_html(index=False, float_format="{:.3f}".format)
        fastest = report.loc[report["seconds_to_serve"].idxmin(), "scenario"]
        self.status.value = (f"done: {len(report)} scenarios, all correct: "
                             f"{bool(report['correct'].all())}; fastest to serve: {fastest}")
        return report
