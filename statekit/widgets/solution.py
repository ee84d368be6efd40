"""A hidden solution: a note and a button that shows, then runs, the solution's code.

``statekit.workshop.magic`` shows one in place of a ``%%solution`` cell's output in a
learner's kernel, so that Run All runs no solution and gives none away.

Example:
    >>> ran = []
    >>> panel = HiddenSolution("02.1", "answer = 9", ran.append)
    >>> panel.button.click()  # pressing it (outside Jupyter the code prints as a repr)
    <IPython.core.display.HTML object>
    >>> ran, panel.button.disabled
    (['answer = 9'], True)
"""

from __future__ import annotations

import html
from collections.abc import Callable

import ipywidgets as widgets


class HiddenSolution(widgets.VBox):
    """"Solution to <id>: hidden" and a button; pressed, it prints ``body`` and ``run(body)``."""

    def __init__(self, exercise: str, body: str, run: Callable[[str], object]):
        self.exercise, self.body, self._run = exercise, body, run
        self.note = widgets.HTML(f"<i>Solution to {html.escape(exercise)}: hidden — try the "
                                 "exercise first.</i>")
        self.button = widgets.Button(description="Show and run the solution", icon="eye",
                                     layout=widgets.Layout(width="auto"))
        self.output = widgets.Output()
        self.button.on_click(self._pressed)
        super().__init__([widgets.HBox([self.note, self.button]), self.output])
        self.add_class("statekit-solution")

    def _pressed(self, _button) -> None:
        from IPython.display import HTML, display

        self.button.disabled = True
        with self.output:
            display(HTML("<pre style='background:#f6f8fa;padding:6px'>"
                         f"{html.escape(self.body.strip())}</pre>"))
            self._run(self.body)
