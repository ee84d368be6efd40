"""bench/peer.py's bookkeeping: the Quix figures, the window agreement, the run order, the
Quix interpreter. Fast, no Spark, no broker, no Quix."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from bench import peer

pytestmark = pytest.mark.timeout(60)


def member(samples, end, end_cpu, windows, first_output=4.0, late=()):
    return {"ready": 1.0, "first_assigned": 3.0, "first_output": first_output,
            "samples": samples, "end": end, "end_cpu": end_cpu,
            "processed": samples[-1][1], "outputs": samples[-1][1],
            "assignments": [{"at": 3.0, "assigned": [0, 1]}], "late": list(late),
            "recovery_spans": [], "windows": windows, "quixstreams": "3.28.1"}


def test_quix_figures_of_two_members():
    # together they pass 10 of 100 records at t=5 (4 + 6); the later commit ends at 12
    a = member([[1.0, 0, 0.0], [4.0, 4, 1.0], [9.0, 50, 3.0]], 11.0, 3.5,
               {"p1|0": [50, 7]}, first_output=3.5)
    b = member([[1.0, 0, 0.0], [5.0, 6, 2.0], [10.0, 50, 4.0]], 12.0, 4.5,
               {"p2|0": [50, 9]}, late=["p3|0"])
    f = peer.quix_figures([a, b], 0.0, 100)
    assert f["first_result_from_spawn_s"] == 3.5
    assert f["steady_rows"] == 90 and f["steady_s"] == 7.0
    assert f["steady_cpu_s"] == pytest.approx(8.0 - 3.0)  # (3.5 + 4.5) - (1.0 + 2.0)
    assert f["windows"] == {"p1|0": [50, 7], "p2|0": [50, 9]}
    assert f["late_windows"] == ["p3|0"] and f["rebalances"] == 0
    assert f["group_join_s"] == 2.0


def test_quix_figures_refuse_a_short_run():
    with pytest.raises(RuntimeError, match="processed 5 of 100"):
        peer.quix_figures([member([[1.0, 5, 0.0]], 2.0, 0.1, {})], 0.0, 100)


def test_windows_agree_or_raise():
    quix = {"p1|0": [3, 9], "p2|0": [2, 4], "p3|0": [5, 5]}
    same = peer.compare_windows(quix, set(), dict(quix), 0, "same")
    assert same == {"compared": 3, "left_out_late_quix": 0, "left_out_late_statekit": 0}
    # Quix dropped records of p2|0 as late: that window is left out
    assert peer.compare_windows(quix, {"p2|0"}, {**quix, "p2|0": [9, 9]}, 0, "q")[
        "compared"] == 2
    # statekit dropped 2 late events: p3|0 may lack up to 2 records, not more
    short = {**quix, "p3|0": [3, 3]}
    assert peer.compare_windows(quix, set(), short, 2, "s")["left_out_late_statekit"] == 1
    with pytest.raises(peer.WindowsDisagree, match="p3\\|0: Quix \\[5, 5\\] statekit"):
        peer.compare_windows(quix, set(), short, 1, "s")
    with pytest.raises(peer.WindowsDisagree, match="1 windows differ"):
        peer.compare_windows(quix, set(), {**quix, "p1|0": [3, 8]}, 0, "sum")
    with pytest.raises(peer.WindowsDisagree):  # a window only statekit has
        peer.compare_windows(quix, set(), {**quix, "p9|0": [1, 1]}, 0, "extra")


def test_order_alternates():
    labels = [[c.label for c in peer._order(r)] for r in range(3)]
    assert labels[0] == ["statekit local[1]", "statekit local[2]", "Quix ×1", "Quix ×2"]
    assert labels[1] == labels[0][::-1] and labels[2] == labels[0]


def test_missing_quix_interpreter_names_the_make_target(tmp_path: Path):
    with pytest.raises(FileNotFoundError, match="make peer-venv"):
        peer.quix_python(tmp_path / "nothing" / "python")
    assert not peer.quix_installed(tmp_path / "nothing")
    assert peer.quix_python(sys.executable) == Path(sys.executable)


def test_quix_child_imports_only_the_standard_library_and_quixstreams():
    tree = ast.parse(peer.QUIX_SCRIPT.read_text())
    roots = {alias.name.split(".")[0] for node in ast.walk(tree)
             if isinstance(node, ast.Import) for alias in node.names}
    roots |= {node.module.split(".")[0] for node in ast.walk(tree)
              if isinstance(node, ast.ImportFrom) and node.module and node.level == 0}
    roots.discard("__future__")
    assert roots - sys.stdlib_module_names == {"quixstreams"}


def test_docstring_examples():
    import doctest

    assert doctest.testmod(peer).failed == 0


QUIX_TREE = """
import runpy, subprocess, sys, time
quix = runpy.run_path(sys.argv[1], run_name="peer_quix")
before = quix["tree_cpu_seconds"]()
end = time.process_time() + 0.4
while time.process_time() < end:
    pass
reaped = subprocess.run([sys.executable, "-c", sys.argv[2]])   # its CPU counts once reaped
print(quix["tree_cpu_seconds"]() - before)
quix["refuse_child_processes"]()          # none left: no error
child = subprocess.Popen(["sleep", "30"])
try:
    quix["refuse_child_processes"]()
except RuntimeError as error:
    print(child.pid, error)
child.kill()
"""
BUSY = "import time\nend = time.process_time() + 0.4\nwhile time.process_time() < end: pass"


def test_the_quix_child_counts_its_cpu_and_refuses_to_leave_a_child_process_out():
    """peer_quix.py counts its own CPU and its reaped children's, and refuses to report when
    a child process runs whose CPU that leaves out; it loads statekit/processes.py by its
    path (its interpreter has no statekit): that file imports only the standard library."""
    import subprocess

    processes = peer.REPO / "statekit" / "processes.py"
    tree = ast.parse(processes.read_text())
    roots = {alias.name.split(".")[0] for node in ast.walk(tree)
             if isinstance(node, ast.Import) for alias in node.names}
    roots |= {node.module.split(".")[0] for node in ast.walk(tree)
              if isinstance(node, ast.ImportFrom) and node.module and node.level == 0}
    assert roots <= sys.stdlib_module_names
    out = subprocess.run([sys.executable, "-I", "-c", QUIX_TREE, str(peer.QUIX_SCRIPT), BUSY],
                         capture_output=True, text=True, timeout=50)
    assert out.returncode == 0, out.stderr
    spent, refused = out.stdout.splitlines()
    assert 0.75 <= float(spent) < 30   # its own 0.4 s and its reaped child's 0.4 s
    pid, message = refused.split(" ", 1)
    assert message == (f"the Quix process has child processes, whose CPU its figures would "
                       f"leave out: {pid} (sleep 30)")
