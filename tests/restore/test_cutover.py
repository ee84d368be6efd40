"""Moving a store cold or warm: the restores side by side, and the time nothing answers."""

from __future__ import annotations

import pandas as pd
import pytest

from statekit.errors import BadArgument
from statekit.restore.cutover import DOWN, SERVING, cutover_times
from statekit.restore.result import RestoreResult

T0 = pd.Timestamp("2026-12-06 23:00:00")


def _result(records: int, seconds: float) -> RestoreResult:
    report = pd.DataFrame({"partition": [0, 1], "records": [records - records // 2,
                                                            records // 2],
                           "started": [T0, T0],
                           "finished": [T0 + pd.Timedelta(seconds=seconds),
                                        T0 + pd.Timedelta(seconds=seconds / 2)]})
    return RestoreResult({}, report)


def test_warm_is_down_only_for_the_tail():
    times = cutover_times(_result(9000, 3.0), _result(6000, 2.0), _result(3000, 1.0))
    down = times[times["phase"] == DOWN].set_index("strategy")
    assert down.loc["cold", "seconds"] == 3.0 and down.loc["warm", "seconds"] == 1.0
    assert down.loc["warm", "records"] == 3000
    assert times.loc[times["phase"] == SERVING, "records"].tolist() == [6000]


def test_a_restore_that_is_not_one_is_named():
    with pytest.raises(BadArgument, match="catch_up"):
        cutover_times(_result(1, 1.0), _result(1, 1.0), "fast")
