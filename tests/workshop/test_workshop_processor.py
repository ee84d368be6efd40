"""Notebook 11's exercises: registered, and what the checks say to wrong answers (no Spark).

The right answer to 11.2 (a real processor query) is checked by running the notebook with
its solutions (``pytest --nbmake notebooks/11_write_a_stateful_processor.ipynb``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from statekit import workshop
from statekit.processor import Processor, key_value_store, plan_of, session_store
from statekit.workshop import check


def texts(verdict) -> str:
    return " | ".join(p.text for p in verdict.points)


def test_the_exercises_of_notebook_11_are_registered():
    table = workshop.exercises()
    ours = table[table["id"].str.startswith("11.")]
    assert ours["id"].tolist() == ["11.1", "11.2", "11.3", "11.4", "11.5", "11.6", "11.7"]
    assert set(ours["notebook"]) == {"11_write_a_stateful_processor"}
    assert ours.set_index("id").loc["11.2", "kind"] == "build"


def test_the_map_of_the_series_lists_every_notebook_and_notebook_11s_exercises():
    from pathlib import Path

    from statekit.workshop.setup import series

    table = series().set_index("notebook")
    stems = {p.stem for p in (Path(__file__).resolve().parents[2] / "notebooks").glob(
        "[0-9][0-9]_*.ipynb")}
    assert set(table.index) == stems
    assert "11.2 The session exercise as a processor (build)" in \
        table.loc["11_write_a_stateful_processor", "exercises"]
    assert "11_write_a_stateful_processor" in workshop.check("00.2", "11").points[0].text


def test_review_answers_say_why_each_is_right_or_wrong():
    assert workshop.check("11.1", "b").right
    assert "Kafka Streams" in texts(workshop.check("11.1", "a"))
    assert workshop.check("11.3", "A)").right
    assert "11:10 is still ahead" in texts(workshop.check("11.3", "c"))
    assert "timers belong to a grouping key" in texts(workshop.check("11.4", "a"))
    assert "ProcessingTime" in texts(workshop.check("11.5", "a"))
    assert "not one of the choices" in texts(workshop.check("11.5", "z"))


class _Query:
    """What the 11.2 check reads of a ProcessorQuery before it reads any state."""

    def __init__(self, processor, keys=("player",)):
        self.plan = plan_of(processor, list(keys))
        self.last_batch = 3

    def snapshot(self, store, batch=None):  # pragma: no cover - not reached
        raise AssertionError("a wrong plan is refused before any state is read")


class _Declared(Processor):
    output = "player string"

    def __init__(self, stores, time="event"):
        self._stores, self.time = stores, time

    def stores(self):
        return self._stores

    def process(self, key, rows):
        return None


EVENTS = pd.DataFrame({"player": ["p1"], "score": [1], "ts": [pd.Timestamp("2026-01-05")]})


def test_the_session_build_names_what_is_missing_from_the_processor():
    assert "start_processor(...) returned is expected" in texts(
        workshop.check("11.2", "sessions", events=EVENTS))
    no_sessions = _Query(_Declared([key_value_store("s", key="g string", value="n bigint")]))
    assert "declare a session store" in texts(workshop.check("11.2", no_sessions,
                                                             events=EVENTS))
    wrong = _Query(_Declared([session_store("s", value="count bigint",
                                            retention="30 minutes")]), keys=("game",))
    said = texts(workshop.check("11.2", wrong, events=EVENTS))
    assert "grouped by ['game']" in said and "needs an 'events' field" in said


def test_remote_lookup_seconds_reads_seconds_and_names_each_confusion():
    measured = {"remote_us": 134.0, "local_us": 0.35, "records": 50_000}
    for right in (6.7, "6.7", " 6.70 ", "67/10", 7.2, np.float64(6.3)):
        assert check("11.6", right, **measured).right, right
    texts = " | ".join(p.text for p in check("11.6", 0.0175, **measured).points)
    assert "local RocksDB" in texts
    texts = " | ".join(p.text for p in check("11.6", "6,700", **measured).points)
    assert "milliseconds" in texts
    texts = " | ".join(p.text for p in check("11.6", 6_700_000, **measured).points)
    assert "microseconds" in texts
    assert not check("11.6", 134, **measured).right
    assert "not a number" in check("11.6", "six seconds", **measured).points[0].text
    assert check("11.6", ..., **measured).status == "unanswered"


def test_custom_store_review():
    assert check("11.7", "B").right and check("11.7", "b) spark: a jvm class").right
    for wrong in ("a", "c", "d"):
        assert not check("11.7", wrong).right
    assert "JVM" in " ".join(p.text for p in check("11.7", "a").points)
