"""The charts of state on disk and of a changelog's durability draw the frames their
functions give, and name a frame that lacks a column."""

from __future__ import annotations

import pandas as pd
import pytest

from statekit import charts
from statekit.changelog.recovery_reads import recovery_reads
from statekit.changelog.transaction_marks import transaction_marks
from statekit.errors import BadArgument
from statekit.kafka.replication import outcomes


def test_each_chart_draws_its_frame():
    marks = transaction_marks(pd.DataFrame({"partition": [0, 0, 1], "offset": [0, 2, 0],
                                            "batch": [0, 1, 1]}), ends={0: 4, 1: 2})
    grid = outcomes({"rf3": (3, 2, "all"), "rf1": (1, 1, "all")})
    reads = recovery_reads(changelog_records=10, compacted_records=3, input_records=50)
    steps = pd.DataFrame({"step": ["a", "b"], "live_bytes": [5, 0], "pinned_bytes": [0, 5],
                          "versions": [1, 2], "store_entries": [3, 0],
                          "iterator_reads": [None, 3]})
    sizes = pd.DataFrame({"codec": ["none", "zstd"], "sst_bytes": [10, 4], "ratio": [1, 0.4]})
    disk = pd.DataFrame({"place": ["checkpoint", "local"], "what": ["deltas", "working"],
                         "files": [2, 0], "bytes": [10, 0]})
    for chart in (charts.transaction_marks_chart(marks), charts.replication_chart(grid),
                  charts.recovery_reads_chart(reads), charts.pinned_files_chart(steps),
                  charts.compression_chart(sizes), charts.state_on_disk_chart(disk)):
        assert chart.to_dict()["$schema"]


@pytest.mark.parametrize("draw", [charts.transaction_marks_chart, charts.replication_chart,
                                  charts.recovery_reads_chart, charts.pinned_files_chart,
                                  charts.compression_chart, charts.state_on_disk_chart])
def test_a_frame_without_the_columns_is_named(draw):
    with pytest.raises(BadArgument, match="as statekit"):
        draw(pd.DataFrame({"x": [1]}))
