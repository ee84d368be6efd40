"""Atomic file writes (``statekit.atomic``): a whole file or the old one, never a mix."""

from __future__ import annotations

import pytest


def test_threads_writing_the_same_file_at_once_each_leave_a_whole_file(tmp_path):
    import threading

    from statekit.atomic import write_atomic

    target, errors = tmp_path / "progress" / "0000000001.json", []
    contents = [f'{{"writer": {n}, "pad": "{"x" * 20_000}"}}' for n in range(8)]
    start = threading.Barrier(len(contents))

    def write(text: str) -> None:
        start.wait()
        try:
            for _ in range(20):
                write_atomic(target, text)
        except Exception as exc:  # the race CI hit: a shared temporary name
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(text,)) for text in contents]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert target.read_text() in contents  # one writer's whole file, never a mix
    assert [p.name for p in target.parent.iterdir()] == [target.name]  # no temporary left


def test_a_failed_atomic_write_leaves_the_old_file_and_no_temporary(tmp_path):
    from statekit.atomic import write_atomic

    target = tmp_path / "ledger.json"
    write_atomic(target, "old")
    with pytest.raises(TypeError):
        write_atomic(target, 42)  # neither bytes nor text
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["ledger.json"]
