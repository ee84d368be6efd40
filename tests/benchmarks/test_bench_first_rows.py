"""bench.first_rows's pure parts: the README example it runs, its per-step summary."""

from __future__ import annotations

import doctest

import pytest

from bench import first_rows


def test_the_example_is_the_readmes_up_to_its_first_snapshot():
    statements = first_rows.readme_example()
    assert statements[0] == "import statekit as sk"
    assert "spark = sk.spark_session()" in statements
    assert statements[-1] == "query.snapshot()" and statements.count("query.snapshot()") == 1
    assert "query.wait_until_drained()" in statements


def test_a_readme_without_the_example_is_named(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("# nothing here\n")
    with pytest.raises(ValueError, match="no ```python block under '## In a notebook'"):
        first_rows.readme_example(readme)


def test_the_figures_give_the_examples_ratio_to_the_floor():
    runs = {"example": [{"first_rows_s": 6.0, "marks": [["a", 6.0]]}],
            "floor": [{"first_rows_s": 10.0, "marks": [["b", 10.0]]}]}
    figures = first_rows.figures_of({v: first_rows.summarize(r) for v, r in runs.items()})
    example = next(f for f in figures if f.name.startswith("example: README"))
    assert example.ratio == 0.6 and example.met is True


def test_docstring_examples():
    assert doctest.testmod(first_rows).failed == 0
