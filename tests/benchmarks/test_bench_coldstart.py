"""bench.coldstart's pure parts: the warning for runs whose JVM did not map the archive."""

from __future__ import annotations

import doctest

from bench import coldstart


def runs(*mapped: bool | None) -> list[dict]:
    return [{} if flag is None else {"archive_mapped": flag} for flag in mapped]


def test_every_run_mapped_warns_of_nothing():
    assert coldstart.unmapped_warnings({"default": runs(True, True, True),
                                        "full_jit": runs(True)}) == []


def test_a_variant_without_the_archive_by_design_is_not_warned_of():
    assert coldstart.unmapped_warnings({"no_archive": runs(False, False),
                                        "zip": runs(False),
                                        "connect_warm_server": runs(False)}) == []


def test_each_variant_that_missed_it_is_named_with_its_count():
    lines = coldstart.unmapped_warnings({"default": runs(True, False, False),
                                         "no_early_workers": runs(False),
                                         "no_archive": runs(False)})
    assert [line.split(":")[1].strip() for line in lines] == ["default", "no_early_workers"]
    assert "in 2 of 3 runs" in lines[0] and "in 1 of 1 runs" in lines[1]
    assert all("make jvm-classes" in line for line in lines)


def test_a_run_that_did_not_record_it_counts_as_not_mapped():
    assert "in 1 of 2 runs" in coldstart.unmapped_warnings({"default": runs(True, None)})[0]


def test_docstring_examples():
    assert doctest.testmod(coldstart).failed == 0
