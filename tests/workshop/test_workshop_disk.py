"""The checks of the on-disk exercises: an open iterator (01.5), compression (09.8) and the
local state folders (09.9): right answers written differently pass, wrong ones stay wrong."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from statekit.errors import BadArgument
from statekit.workshop import check

STEPS = pd.DataFrame({"step": ["filled", "opened", "deleted", "closed"],
                      "live_bytes": [9000, 9000, 0, 0], "pinned_bytes": [0, 0, 9000, 0],
                      "versions": [1, 1, 2, 1], "store_entries": [80, 80, 0, 0],
                      "iterator_reads": pd.array([None, 1, 80, None], dtype="Int64")})
SIZES = {"none": 6443, "snappy": 3169, "lz4": 3044, "zstd": 2389}


def texts(verdict) -> str:
    return " | ".join(p.text for p in verdict.points)


@pytest.mark.parametrize("answer", [80, "80", " 80 ", 80.0, np.int64(80), "+80"])
def test_01_5_the_version_it_opened_on(answer):
    verdict = check("01.5", answer, steps=STEPS)
    assert verdict.right and "9,000 bytes" in texts(verdict)


@pytest.mark.parametrize(("answer", "said"), [
    (0, "what a new read sees"), ("0", "what a new read sees"),
    (1, "the entry read before the deletes"), (79, "reads that version"),
    (81, "reads that version"), ("all", "not a count"), (True, "not a count"),
    (-80, "not a count"), (80.5, "not a count")])
def test_01_5_wrong_answers_stay_wrong(answer, said):
    verdict = check("01.5", answer, steps=STEPS)
    assert verdict.status == "wrong" and said in texts(verdict)


def test_01_5_needs_the_measured_steps():
    with pytest.raises(BadArgument, match="iterator_pinning"):
        check("01.5", 80, steps=None)
    assert check("01.5", ..., steps=STEPS).status == "unanswered"


@pytest.mark.parametrize("answer", ["zstd", "ZSTD", " Zstandard ", "'zstd'", "Zstd"])
def test_09_8_the_smallest_codec(answer):
    verdict = check("09.8", answer, sizes=SIZES)
    assert verdict.right and "37%" in texts(verdict)


@pytest.mark.parametrize(("answer", "said"), [
    ("lz4", "lz4 keeps 3,044 bytes"), ("LZ4", "lz4 keeps"), ("snappy", "snappy keeps"),
    ("none", "no compression is the biggest"), ("No-Compression", "the biggest"),
    ("zlib", "name one codec"), (3, "name one codec"), ("b", "name one codec")])
def test_09_8_wrong_codecs_stay_wrong(answer, said):
    verdict = check("09.8", answer, sizes=SIZES)
    assert verdict.status == "wrong" and said in texts(verdict)


def test_09_8_follows_what_was_measured():
    assert check("09.8", "lz4", sizes={**SIZES, "lz4": 1000}).right
    assert not check("09.8", "zstd", sizes={**SIZES, "lz4": 1000}).right


@pytest.mark.parametrize("right", ["b", "B", " (b) ", "b) nothing durable"])
def test_09_9_local_folders_are_working_copies(right):
    assert check("09.9", right).right


@pytest.mark.parametrize(("wrong", "said"), [("a", "durable copy is the checkpoint"),
                                             ("c", "written to the checkpoint at every"),
                                             ("z", "not one of the choices")])
def test_09_9_wrong_choices_stay_wrong(wrong, said):
    verdict = check("09.9", wrong)
    assert verdict.status == "wrong" and said in texts(verdict)
