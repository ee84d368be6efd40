"""bench/results.py and bench/report.py: the results format, its validation, the README tables.

Fast, no Spark: files in a temp folder, and the results files committed in bench/results/.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import report
from bench.results import (
    FORMAT,
    RESULTS,
    BadResults,
    Figure,
    Results,
    Run,
    read,
    read_all,
    write,
)

pytestmark = pytest.mark.timeout(60)

README = Path(report.__file__).resolve().parent / "README.md"


def figures() -> list[Figure]:
    return [Figure("baseline read", 2.5, "s"),
            Figure("statekit read", 2.0, "s", baseline="baseline read", ratio=0.8,
                   target="ratio <= 1.0"),
            Figure("p99", 21.5, "µs", target="value < 20"),
            Figure("not measured here", None, "s")]


def written(tmp_path: Path) -> Path:
    return Run("demo").write(figures(), {"repeats": 3, "runs": [1.0, 2.0]}, folder=tmp_path)


def test_round_trip(tmp_path: Path):
    path = written(tmp_path)
    assert path == tmp_path / "demo.json"
    result = read(path)
    assert result.format == FORMAT and result.bench == "demo" and result.source == "measured"
    assert result.figures == figures()
    assert [f.met for f in result.figures] == [None, True, False, None]
    assert result.details == {"repeats": 3, "runs": [1.0, 2.0]}
    assert result.cpus >= 1 and isinstance(result.command, str) and result.commit
    assert result.dirty in (True, False, None)
    assert result.load_start is None or len(result.load_start) == 3
    assert result.timestamp.endswith("Z")
    # what read returns writes back the same bytes
    before = path.read_text()
    write(result, tmp_path)
    assert path.read_text() == before
    assert not list(tmp_path.glob(".*.tmp"))  # the atomic write left no temp file


def test_nan_is_not_measured(tmp_path: Path):
    # a median of nothing is NaN: stored as null (strict JSON), its target not judged
    path = Run("demo").write([Figure("rate", float("nan"), "records/s", target="value > 1")],
                             {"median_s": float("nan"), "runs": [float("inf"), 1.0]},
                             folder=tmp_path)
    assert "NaN" not in path.read_text() and "Infinity" not in path.read_text()
    result = read(path)
    assert result.figures == [Figure("rate", None, "records/s", target="value > 1", met=None)]
    assert result.details["median_s"] is None and result.details["runs"] == [None, 1.0]


def test_git_state_outside_a_repo(tmp_path: Path):
    from bench.results import git_state

    assert git_state(tmp_path) == ("unknown", None)


def _bad(tmp_path: Path, change) -> str:
    path = written(tmp_path)
    payload = json.loads(path.read_text())
    change(payload)
    path.write_text(json.dumps(payload))
    with pytest.raises(BadResults) as caught:
        read(path)
    message = str(caught.value)
    assert str(path) in message
    return message


def test_missing_field_is_named(tmp_path: Path):
    message = _bad(tmp_path, lambda p: p.pop("commit"))
    assert "'commit' is missing" in message


def test_missing_figure_field_is_named(tmp_path: Path):
    message = _bad(tmp_path, lambda p: p["figures"][1].pop("unit"))
    assert "figures[1]" in message and "'unit' is missing" in message


@pytest.mark.parametrize(("field", "value"), [
    ("cpus", "two"), ("cpus", True), ("dirty", "no"), ("load_start", [1.0, 2.0]),
    ("timestamp", "yesterday"), ("figures", []), ("source", "made up"), ("command", 3)])
def test_wrong_type_is_named(tmp_path: Path, field: str, value):
    message = _bad(tmp_path, lambda p: p.__setitem__(field, value))
    assert f"field '{field}'" in message


@pytest.mark.parametrize(("field", "value"), [
    ("value", "2.0"), ("value", True), ("ratio", None), ("met", "yes"), ("baseline", "nobody"),
    ("target", "ratio is small")])
def test_bad_figure_is_named(tmp_path: Path, field: str, value):
    message = _bad(tmp_path, lambda p: p["figures"][1].__setitem__(field, value))
    assert "figures[1]" in message and f"'{field}'" in message


def test_met_must_agree_with_the_target(tmp_path: Path):
    message = _bad(tmp_path, lambda p: p["figures"][2].__setitem__("met", True))
    assert "figures[2]" in message and "'met'" in message and "value < 20" in message


@pytest.mark.parametrize("version", [2, 0, "1", 1.0, True])
def test_wrong_version_is_refused(tmp_path: Path, version):
    message = _bad(tmp_path, lambda p: p.__setitem__("format", version))
    assert "field 'format'" in message


def test_not_json_and_misnamed(tmp_path: Path):
    path = tmp_path / "demo.json"
    path.write_text("{ not json")
    with pytest.raises(BadResults, match="demo.json: not a readable JSON file"):
        read(path)
    written(tmp_path).rename(tmp_path / "other.json")
    with pytest.raises(BadResults, match="other.json: field 'bench' is 'demo'"):
        read(tmp_path / "other.json")


def test_nothing_invalid_is_written(tmp_path: Path):
    with pytest.raises(BadResults, match="'baseline'"):
        Run("demo").write([Figure("a", 1.0, "s", baseline="b", ratio=1.0)], folder=tmp_path)
    with pytest.raises(BadResults, match="benchmark name"):
        Run("../escape")
    assert not list(tmp_path.iterdir())


def test_transcribed_source_is_shown(tmp_path: Path):
    result = Results(bench="old", figures=[Figure("x", 1.0, "s")], load_start=None,
                     load_end=None, cpus=2, commit="unknown", dirty=None,
                     timestamp="2026-11-23", command="python -m bench.old",
                     source="transcribed from bench/README.md (measured 2026-11-23)")
    read(write(result, tmp_path))
    table = report.table(result)
    assert "transcribed from bench/README.md (measured 2026-11-23)" in table
    assert "| x | 1.00 s |" in table


def test_render_is_stable_and_keeps_the_prose(tmp_path: Path):
    result = read(written(tmp_path))
    text = ("# title\nprose `<!-- results:demo -->` quoted\n\n<!-- results:demo -->\nhand-kept\n"
            "<!-- /results:demo -->\n\nmore prose\n")
    once = report.render(text, {"demo": result})
    assert report.render(once, {"demo": result}) == once
    assert once.startswith("# title\nprose `<!-- results:demo -->` quoted\n\n")
    assert once.endswith("<!-- /results:demo -->\n\nmore prose\n")
    assert "hand-kept" not in once and "| statekit read | 2.00 s |" in once
    assert report.stale(text, once) == ["demo"] and report.stale(once, once) == []


def test_render_refuses_bad_markers(tmp_path: Path):
    result = read(written(tmp_path))
    with pytest.raises(BadResults, match="no closing"):
        report.render("<!-- results:demo -->\ntable\n", {"demo": result})
    with pytest.raises(BadResults, match="no results file bench/results/gone.json"):
        report.render("<!-- results:gone -->\n<!-- /results:gone -->\n", {"demo": result})


def test_committed_results_files_validate():
    results = read_all(RESULTS)
    assert results, f"no results files in {RESULTS}"
    for name, result in results.items():
        assert result.bench == name


def test_readme_tables_are_generated_and_up_to_date():
    text = README.read_text()
    results = read_all(RESULTS)
    once = report.render(text, results)
    assert report.render(once, results) == once
    assert report.stale(text, once) == [], "run python -m bench.report (make bench-report)"
    assert report.main(["--check"]) == 0


def test_docstring_examples():
    # bench/ is outside pytest's doctest paths (tests, statekit): run its two modules' here
    import doctest

    import bench.results

    for module in (bench.results, report):
        assert doctest.testmod(module).failed == 0, module.__name__
