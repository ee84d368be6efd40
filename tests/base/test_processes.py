"""statekit.processes: the process table read from /proc, walked by parent, ended processes told
apart; real processes, and a hand-made table for the walk's pure logic."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from statekit.processes import (
    ProcessInfo,
    descendants,
    is_alive,
    process_info,
    process_table,
    spawn,
    stop,
)

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="Linux's /proc is needed")

#: a child that starts a grandchild, prints its pid and waits
PARENT = ("import subprocess, sys, time\n"
          "grandchild = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
          "print(grandchild.pid, flush=True)\n"
          "time.sleep(60)\n")


def test_a_child_and_its_grandchild_are_found_parents_first_with_their_command_lines():
    child = spawn([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    try:
        grandchild = int(child.stdout.readline())
        table = process_table()
        found = descendants(os.getpid(), table)
        assert found.index(child.pid) < found.index(grandchild)
        assert os.getpid() not in found
        assert table[child.pid].ppid == os.getpid() and table[grandchild].ppid == child.pid
        assert table[grandchild].cmdline == f"{sys.executable} -c import time; time.sleep(60)"
        assert table[child.pid].state in "RSD" and is_alive(grandchild)
        assert descendants(grandchild, table) == []
    finally:
        os.kill(grandchild, 9)
        stop(child)


def _spawn_sleep(started: list[subprocess.Popen]) -> None:
    started.append(spawn(["sleep", "30"]))


def test_children_of_threads_that_have_just_exited_are_all_found():
    """What the per-thread ``children`` files miss: a JVM thread that started a Python daemon
    and is exiting as the table is read (``tests/spark/test_early_workers.py`` saw it)."""
    for _ in range(5):
        started: list[subprocess.Popen] = []
        threads = [threading.Thread(target=_spawn_sleep, args=(started,)) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
        try:
            assert {p.pid for p in started} <= set(descendants(os.getpid()))
        finally:
            for proc in started:
                stop(proc)


def test_a_command_name_with_spaces_and_parentheses_is_parsed_after_its_last_parenthesis(
        tmp_path):
    odd = tmp_path / "a) b (c"
    odd.symlink_to(sys.executable)
    proc = spawn([str(odd), "-c", "import time; time.sleep(60)"])
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the name is the executable's once exec is done
            info = process_info(proc.pid)
            if info and info.cmdline.startswith(str(odd)):
                break
            time.sleep(0.02)
        assert info.ppid == os.getpid() and info.state in "RSD" and info.cpu_s >= 0
        assert info.cmdline == f"{odd} -c import time; time.sleep(60)"
    finally:
        stop(proc)


def test_a_zombie_is_not_alive_and_a_reaped_process_has_no_entry():
    proc = subprocess.Popen(["sleep", "30"])
    assert is_alive(proc.pid)
    os.kill(proc.pid, 9)
    deadline = time.monotonic() + 30
    while process_info(proc.pid).state != "Z" and time.monotonic() < deadline:
        time.sleep(0.02)
    assert process_info(proc.pid).state == "Z" and not is_alive(proc.pid)  # ended, not reaped
    proc.wait(10)
    assert process_info(proc.pid) is None and not is_alive(proc.pid)
    assert proc.pid not in process_table()


def test_the_cpu_a_process_spent_is_counted():
    busy = "import time\nend = time.process_time() + 0.4\nwhile time.process_time() < end: pass\n" \
           "print('done', flush=True)\ntime.sleep(60)\n"
    proc = spawn([sys.executable, "-c", busy], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "done\n"
        assert 0.35 <= process_info(proc.pid).cpu_s < 30
    finally:
        stop(proc)


def _info(pid: int, ppid: int) -> ProcessInfo:
    return ProcessInfo(pid, ppid, "S", 0.0, f"p{pid}")


def test_the_walk_goes_by_parent_level_by_level_and_a_loop_cannot_hang_it():
    table = {pid: _info(pid, ppid) for pid, ppid in
             [(1, 0), (10, 1), (11, 1), (20, 10), (21, 11), (30, 20), (99, 98)]}
    assert descendants(1, table) == [10, 11, 20, 21, 30]
    assert descendants(11, table) == [21] and descendants(30, table) == []
    assert descendants(7, table) == [] and descendants(1, {}) == []
    # pids reused while the table was read can make a loop: each pid is listed once
    looped = {5: _info(5, 6), 6: _info(6, 5)}
    assert descendants(5, looped) == [6] and descendants(6, looped) == [5]


def test_a_pid_that_never_was_has_no_entry():
    assert process_info(2**22 + 12345) is None and not is_alive(2**22 + 12345)
