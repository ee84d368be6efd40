"""The checks of restoration time and moving a store (04.4, 04.5), one zone down (05.5) and
a local get against a REST hop (06.4): right answers written differently pass; wrong ones
stay wrong."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from statekit.serve.hop_latency import LOCAL, REMOTE
from statekit.workshop import check


def texts(verdict) -> str:
    return " | ".join(p.text for p in verdict.points)


# ------------------------------------------------------------ 05.5 rack-aware standbys
OUTAGES = pd.DataFrame({"placement": ["round-robin", "round-robin", "rack-aware", "rack-aware"],
                        "zone": ["eu-1a", "eu-1b"] * 2, "partitions_lost": [1, 1, 0, 0]})


@pytest.mark.parametrize("answer", [1, "1", " 1", 1.0, np.int64(1)])
def test_05_5_round_robin_loses_one(answer):
    verdict = check("05.5", answer, outages=OUTAGES, zone="eu-1a")
    assert verdict.right and "rack-aware placement loses 0" in texts(verdict)


@pytest.mark.parametrize(("answer", "said"), [
    (0, "rack-aware placement's"), ("0", "rack-aware placement's"), (2, "both in eu-1a"),
    (3, "both in eu-1a"), ("one", "whole number"), (False, "whole number")])
def test_05_5_wrong_stays_wrong(answer, said):
    verdict = check("05.5", answer, outages=OUTAGES, zone="eu-1a")
    assert verdict.status == "wrong" and said in texts(verdict)


# ------------------------------------------------------------ 06.4 local against remote
def _hops(local: float, remote: float) -> pd.DataFrame:
    return pd.DataFrame({"kind": [LOCAL, LOCAL, REMOTE, REMOTE],
                         "seconds": [local, local * 3, remote, remote * 3]})


@pytest.mark.parametrize(("local", "remote", "right"), [
    (5e-6, 2e-3, "c"), (5e-6, 5e-5, "b"), (1e-4, 2e-4, "a"), (2e-3, 1e-3, "d")])
def test_06_4_the_measured_medians_decide(local, remote, right):
    hops = _hops(local, remote)
    for written in (right, right.upper(), f"({right})", f" {right}) "):
        assert check("06.4", written, latencies=hops).right
    for wrong in sorted({"a", "b", "c", "d"} - {right}):
        verdict = check("06.4", wrong, latencies=hops)
        assert verdict.status == "wrong" and f"so {right})" in texts(verdict)
    assert "one of a, b, c, d" in texts(check("06.4", "e", latencies=hops))
    assert "one of a, b, c, d" in texts(check("06.4", 3, latencies=hops))


# ------------------------------------------------------------ 04.4 restoration time, 04.5 moves
RESTORE = {"records": 6000, "seconds": 0.5}   # 12,000 records/s → 100 times: 50 s


@pytest.mark.parametrize("answer", [50, "50", "50.0", " 48 ", 52.5, np.float64(50), "100/2"])
def test_04_4_records_over_rate(answer):
    verdict = check("04.4", answer, **RESTORE)
    assert verdict.right and "12,000 records/s" in texts(verdict)


@pytest.mark.parametrize(("answer", "said"), [
    (0.5, "this changelog's restore"), ("0.5", "this changelog's restore"),
    (1_200_000, "divide the records by the rate"), (5, "records ÷ restore rate"),
    (500, "records ÷ restore rate"), ("fifty", "not a number"), (True, "not a number")])
def test_04_4_wrong_stays_wrong(answer, said):
    verdict = check("04.4", answer, **RESTORE)
    assert verdict.status == "wrong" and said in texts(verdict)


@pytest.mark.parametrize("right", ["b", "B", "(b)", "b) restore the new store"])
def test_04_5_warm_then_switch(right):
    assert check("04.5", right).right


@pytest.mark.parametrize(("wrong", "said"), [("a", "the cold move"), ("c", "not a consistent"),
                                             ("d", "wrong answers"),
                                             ("e", "not one of the choices")])
def test_04_5_wrong_orders_stay_wrong(wrong, said):
    verdict = check("04.5", wrong)
    assert verdict.status == "wrong" and said in texts(verdict)
