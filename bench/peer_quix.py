"""The Quix Streams side of ``bench.peer``: one child process, run as a script.

It runs under an interpreter of its own (``make peer-venv`` builds ``.venv-peer``: Quix
Streams 3.28 pins confluent-kafka and pydantic lower than statekit's ``.venv``), so it
imports only the standard library and ``quixstreams``::

    .venv-peer/bin/python -I bench/peer_quix.py spec.json     # writes spec.out.json

(``-I``: bench/ is not put on the path, where ``bench/inspect.py`` would shadow the
standard library's ``inspect``.)

The spec (written by ``bench.peer``) names the broker, the input topic, the consumer
group, the state directory and the mode:

- ``"process"``: the windowed ``count`` and ``sum(score)`` (1-minute tumbling windows per
  player, 10 s grace) over the topic. This member of a group of ``members`` processes
  waits for the others to be ready (a barrier of marker files in ``sync_dir``) before
  ``app.run``; it stops once every input partition it holds is read to the end offset
  the spec gives, and leaves the group only when every member is done (so no member's
  leaving moves partitions, and their state, to one still at work). It reports, in
  ``time.monotonic()`` seconds (one clock for every process of the machine): the
  partitions' assignment (``on_assign``), its first windowed output, a sample of
  (time, records processed, CPU seconds of its process tree) every ``step`` records, and
  the end of each checkpoint commit (which flushes the changelog producer and commits the
  input offsets): the run's end is the first commit after its last record. Also the
  final [count, sum] of every (player, window start) and the records dropped as late.
- ``"restore"``: the same application with the same consumer group on an empty state
  directory: Quix restores the state from its changelog topic
  (``RecoveryManager.do_recovery``, timed from its first start to its last end), then
  stops once idle.
"""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import datetime
from pathlib import Path

WINDOW_MS, GRACE_MS = 60_000, 10_000
BARRIER_TIMEOUT_S = 600.0


def _statekit_processes():
    """``statekit/processes.py`` loaded by its path: the one reader of the process table,
    standard library only, so this interpreter (which has no statekit) can use it too."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "statekit" / "processes.py"
    found = importlib.util.spec_from_file_location("_statekit_processes", path)
    module = importlib.util.module_from_spec(found)
    found.loader.exec_module(module)
    return module


_PROCESSES = _statekit_processes()


def tree_cpu_seconds() -> float:
    """CPU seconds of this process's tree: its threads, and the children it has reaped
    (``os.times``, the same clock ticks as ``/proc``).

    A Quix process starts no processes (its Kafka client, RocksDB and Python all run in
    it), so that is the whole tree: ``refuse_child_processes`` checks it once, at the end,
    rather than reading the process table at each of a run's ~1,000 samples (~1.5 ms a
    read, a few per cent of the run, in the very process being measured).

    Example:
        >>> tree_cpu_seconds() >= 0                    # doctest: +SKIP
        True
    """
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def refuse_child_processes() -> None:
    """Raise, naming them, when this process has child processes (running, or ended and not
    yet reaped), whose CPU ``tree_cpu_seconds`` would leave out."""
    table = _PROCESSES.process_table()
    children = _PROCESSES.descendants(os.getpid(), table)
    if children:
        named = ", ".join(f"{pid} ({table[pid].cmdline or table[pid].state})"
                          for pid in children)
        raise RuntimeError(f"the Quix process has child processes, whose CPU its figures "
                           f"would leave out: {named}")


def event_ms(value, headers, timestamp, timestamp_type) -> int:
    """The event time of a game event (its ``ts`` field) in epoch milliseconds."""
    return int(datetime.fromisoformat(value["ts"]).timestamp() * 1000)


def _wait_for_markers(folder: Path, prefix: str, members: int, what: str) -> None:
    deadline = time.monotonic() + BARRIER_TIMEOUT_S
    while len(list(folder.glob(f"{prefix}-*"))) < members:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: {len(list(folder.glob(f'{prefix}-*')))} of "
                               f"{members} members after {BARRIER_TIMEOUT_S:.0f} s")
        time.sleep(0.02)


def _application(spec: dict, on_late=None):
    from quixstreams import Application
    from quixstreams.dataframe.windows import Count, Sum

    app = Application(broker_address=spec["bootstrap"], consumer_group=spec["group"],
                      state_dir=spec["state_dir"], auto_offset_reset="earliest",
                      loglevel="WARNING")
    topic = app.topic(spec["topic"], value_deserializer="json", key_deserializer="str",
                      timestamp_extractor=event_ms)
    sdf = app.dataframe(topic).tumbling_window(WINDOW_MS, grace_ms=GRACE_MS, on_late=on_late)
    return app, sdf.agg(count=Count(), sum_score=Sum("score")).current()


def _timed_recovery(spans: list[list[float | None]]) -> None:
    """Record each ``RecoveryManager.do_recovery`` call's [start, end, CPU seconds at the
    start, at the end] in ``spans``."""
    from quixstreams.state.recovery import RecoveryManager

    real = RecoveryManager.do_recovery

    def do_recovery(self):
        start, cpu = time.monotonic(), tree_cpu_seconds()
        try:
            return real(self)
        finally:
            spans.append([start, time.monotonic(), cpu, tree_cpu_seconds()])

    RecoveryManager.do_recovery = do_recovery


def process(spec: dict) -> dict:
    """The windowed aggregation until this member's partitions are read; its figures."""
    from quixstreams import message_context
    from quixstreams.checkpointing.checkpoint import Checkpoint

    imported = time.monotonic()
    ends = {int(p): int(end) for p, end in spec["ends"].items()}
    step, sync = max(1, int(spec["step"])), Path(spec["sync_dir"])
    member, members = int(spec["member"]), int(spec["members"])
    windows: dict[str, list[int]] = {}
    late: list[str] = []
    last_offset: dict[int, int] = {}
    assigned: set[int] = set()
    seen = {"processed": 0, "outputs": 0}
    marks: dict[str, float | None] = {"first_output": None, "done": None}
    samples: list[list[float | None]] = []
    commits: list[list[float | None]] = []
    assignments: list[dict] = []
    recovery: list[list[float | None]] = []
    _timed_recovery(recovery)

    real_commit = Checkpoint.commit

    def commit(self, *args, **kwargs):
        processed = seen["processed"]
        out = real_commit(self, *args, **kwargs)
        commits.append([time.monotonic(), processed, tree_cpu_seconds()])
        return out

    Checkpoint.commit = commit

    def finished(partition: int) -> bool:
        return last_offset.get(partition, -1) >= ends[partition] - 1

    def account(partition: int, offset: int) -> None:
        seen["processed"] += 1
        last_offset[partition] = offset
        if seen["processed"] % step == 0:
            samples.append([time.monotonic(), seen["processed"], tree_cpu_seconds()])
        if (offset >= ends[partition] - 1 and marks["done"] is None and assigned
                and all(finished(p) for p in assigned)):
            marks["done"] = time.monotonic()
            samples.append([marks["done"], seen["processed"], tree_cpu_seconds()])
            app.stop()

    def on_late(value, key, timestamp_ms, late_by_ms, start, *where) -> bool:
        # where: the window's end, its name, and the record's topic, partition, offset
        late.append(f"{key}|{start}")
        account(where[-2], where[-1])
        return False  # counted here, not logged

    def record(value, key, timestamp, headers) -> None:
        if marks["first_output"] is None:
            marks["first_output"] = time.monotonic()
        seen["outputs"] += 1
        windows[f"{key}|{value['start']}"] = [value["count"], value["sum_score"]]
        context = message_context()
        account(context.partition, context.offset)

    app, sdf = _application(spec, on_late)
    sdf.update(record, metadata=True)
    real_on_assign, real_on_revoke = app._on_assign, app._on_revoke

    def on_assign(consumer, partitions):
        at = time.monotonic()
        mine = [tp for tp in partitions if tp.topic == spec["topic"]]
        if mine:
            committed = app._consumer.committed(partitions=mine, timeout=30)
            for tp in committed:  # read to the end by a member before: nothing left here
                if tp.offset >= ends[tp.partition]:
                    last_offset[tp.partition] = max(last_offset.get(tp.partition, -1),
                                                    tp.offset - 1)
            assigned.update(tp.partition for tp in mine)
            assignments.append({"at": at, "assigned": sorted(tp.partition for tp in mine),
                                "committed": {str(tp.partition): tp.offset
                                              for tp in committed}})
        return real_on_assign(consumer, partitions)

    def on_revoke(consumer, partitions):
        mine = [tp.partition for tp in partitions if tp.topic == spec["topic"]]
        if mine:
            assigned.difference_update(mine)
            assignments.append({"at": time.monotonic(), "revoked": sorted(mine)})
        return real_on_revoke(consumer, partitions)

    app._on_assign, app._on_revoke = on_assign, on_revoke
    real_close = app._consumer.close

    def close():  # leave the group only once every member is done
        (sync / f"done-{member}").touch()
        _wait_for_markers(sync, "done", members, "members done")
        real_close()

    app._consumer.close = close
    (sync / f"ready-{member}").touch()
    _wait_for_markers(sync, "ready", members, "members ready")
    ready = time.monotonic()
    samples.append([ready, 0, tree_cpu_seconds()])
    app.run(timeout=120.0, collect=False)
    exited = time.monotonic()
    if marks["done"] is None:
        raise RuntimeError(f"member {member} of group {spec['group']!r} stopped before its "
                           f"partitions {sorted(assigned)} were read to {ends} (last offsets "
                           f"{last_offset}, {seen['processed']} records processed)")
    after_done = [c for c in commits if c[1] == seen["processed"] and c[0] >= marks["done"]]
    if not after_done:
        raise RuntimeError(f"member {member}: no checkpoint commit after its last record "
                           f"(commits: {commits})")
    end = after_done[0]
    return {"mode": "process", "member": member, "imported": imported, "ready": ready,
            "first_assigned": assignments[0]["at"] if assignments else None,
            "assignments": assignments, "first_output": marks["first_output"],
            "done": marks["done"], "end": end[0], "end_cpu": end[2], "exited": exited,
            "processed": seen["processed"], "outputs": seen["outputs"], "samples": samples,
            "commits": commits, "recovery_spans": recovery, "late": late,
            "windows": windows}


def restore(spec: dict) -> dict:
    """Start the application on an empty state directory; time Quix's recovery."""
    imported = time.monotonic()
    recovery: list[list[float | None]] = []
    _timed_recovery(recovery)
    app, _ = _application(spec)
    app.run(timeout=3.0, collect=False)
    if not recovery:
        raise RuntimeError(f"group {spec['group']!r}: Quix did not recover any state "
                           f"(state directory {spec['state_dir']!r})")
    first, last = recovery[0], recovery[-1]
    cpu = None if first[2] is None or last[3] is None else last[3] - first[2]
    return {"mode": "restore", "imported": imported, "recovery_spans": recovery,
            "restore_s": last[1] - first[0], "restore_cpu_s": cpu}


def main(argv: list[str]) -> None:
    if len(argv) != 1:
        sys.exit("usage: peer_quix.py SPEC.json (written by python -m bench.peer)")
    spec_path = Path(argv[0])
    spec = json.loads(spec_path.read_text())
    out = process(spec) if spec["mode"] == "process" else restore(spec)
    refuse_child_processes()
    from importlib.metadata import version

    out["quixstreams"] = version("quixstreams")
    spec_path.with_suffix(".out.json").write_text(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1:])
