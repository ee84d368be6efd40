"""Restoring local rocksdict stores from a real changelog topic; crash drills with kill -9."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import threading
import time
import warnings
from pathlib import Path

import pandas as pd
import pytest
from helpers.plainrun import assert_same_rows
from helpers.written_changelogs import store_values, write_changelog

import statekit as sk
from statekit.changelog.log import materialize
from statekit.changelog.naming import HOLD_COMPACTION
from statekit.changelog.reader import read_changelog
from statekit.datasets import GAME_EVENT_SCHEMA, GAME_SPEC, game_events, parse_game_events
from statekit.drills.worker import query_config, start_worker
from statekit.kafka.topics import create_topic, delete_topic
from statekit.options.query import RunOptions, SourceOptions
from statekit.processes import process_table
from statekit.reference.aggregates import windowed_reference
from statekit.restore import RestoreListener, compacted_copy, restore_stores
from statekit.restore.worker import STOP_GRACE_S
from statekit.spark_state.state_reader import StateReader
from statekit.stores import StoreMismatch

KEYS = ["window_start", "window_end", "player"]


def test_a_store_restored_up_to_a_batch_equals_that_snapshot(logged, broker, tmp_path):
    query, _ = logged
    for batch in sorted({1, query.last_batch // 2, query.last_batch}):
        with restore_stores(broker.bootstrap_servers, query.changelog_topic, query.spec,
                            tmp_path / f"b{batch}", to_batch=batch) as restored:
            assert sorted(restored.stores) == [0, 1, 2]
            assert_same_rows(restored.table(), query.snapshot(batch=batch), KEYS)


def test_in_memory_stores_restore_the_same(logged, broker):
    query, _ = logged
    with restore_stores(broker.bootstrap_servers, query.changelog_topic, query.spec) as restored:
        assert_same_rows(restored.table(), query.snapshot(), KEYS)


def test_the_compacted_view_restores_the_same_store_from_fewer_records(logged, broker, tmp_path):
    query, log = logged
    copy = compacted_copy(broker.bootstrap_servers, query.changelog_topic)
    with restore_stores(broker.bootstrap_servers, copy, query.spec, tmp_path,
                        store_name="counts") as restored:
        assert_same_rows(restored.table(), query.snapshot(), KEYS)
        assert restored.report["records"].sum() == len(log.compact()) < len(log)
    assert len(read_changelog(broker.bootstrap_servers, copy, check=False)) < len(log)


def test_a_second_restore_reads_only_the_new_offsets(logged, broker, tmp_path):
    query, log = logged
    half = query.last_batch // 2
    with restore_stores(broker.bootstrap_servers, query.changelog_topic, query.spec, tmp_path,
                        to_batch=half) as first:
        first_report = first.report.set_index("partition")
    with restore_stores(broker.bootstrap_servers, query.changelog_topic, query.spec,
                        tmp_path) as second:
        report = second.report.set_index("partition")
        assert_same_rows(second.table(), query.snapshot(), KEYS)
    assert (report["start_offset"] == first_report["end_offset"]).all()
    tail = log.records[log.records["batch"] > half].groupby("partition").size()
    assert report["records"].to_dict() == tail.to_dict()
    with restore_stores(broker.bootstrap_servers, query.changelog_topic, query.spec,
                        tmp_path) as third:
        assert third.report["records"].sum() == 0  # nothing new: nothing replayed


def test_listeners_hear_start_batches_and_end(logged, broker):
    query, log = logged
    heard = []

    class Recorder(RestoreListener):
        def on_restore_start(self, partition, start_offset, end_offset):
            heard.append(("start", partition, start_offset, end_offset))

        def on_batch_restored(self, partition, batch_end_offset, n):
            heard.append(("batch", partition, batch_end_offset, n))

        def on_restore_end(self, partition, total):
            heard.append(("end", partition, total))

    with restore_stores(broker.bootstrap_servers, query.changelog_topic, query.spec,
                        listeners=[Recorder()], chunk=100) as restored:
        events = restored.events
    sizes = log.records.groupby("partition").size()
    ends = log.records.groupby("partition")["offset"].max() + 1  # commit markers take offsets
    for p in range(3):
        mine = [e for e in heard if e[1] == p]
        assert mine[0] == ("start", p, 0, ends[p])
        assert mine[-1] == ("end", p, sizes[p])
        batches = [e for e in mine if e[0] == "batch"]
        assert sum(e[3] for e in batches) == sizes[p] and len(batches) >= sizes[p] // 100
        assert batches[-1][2] == ends[p] - 1
    assert events.groupby("partition")["records"].sum().to_dict() == sizes.to_dict()


def test_iterators_left_open_are_reported(logged, broker, tmp_path):
    query, _ = logged
    restored = restore_stores(broker.bootstrap_servers, query.changelog_topic, query.spec,
                              tmp_path)
    left_open = restored.stores[0].all()
    next(iter(left_open))
    assert restored.stores[0].open_iterators == 1
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        restored.close()
    assert any("1" in str(w.message) and issubclass(w.category, ResourceWarning)
               for w in caught)


# --- all partitions together (a changelog written here: no Spark needed) ---------------------
SYNTHETIC_SPEC = sk.QuerySpec(keys=["player"], window=sk.tumbling("1 hour"),
                              aggregates=["count", "sum(score)"])


@pytest.fixture(scope="module")
def synthetic(broker) -> tuple[str, dict]:
    """A 3-partition changelog of 6,000 records in 4 batches (updates and tombstones), and the
    latest (count, sum_score) per (player, window start) that a store must hold after it."""
    topic = "synthetic-together-changelog"
    return topic, write_changelog(broker.bootstrap_servers, topic, per_batch=500)


@pytest.mark.parametrize("consumers", ["auto", "processes", "per_partition", "one"])
def test_restoring_all_partitions_together_equals_one_after_another(synthetic, broker,
                                                                   tmp_path, consumers):
    topic, expected = synthetic
    with restore_stores(broker.bootstrap_servers, topic, SYNTHETIC_SPEC, tmp_path / "together",
                        chunk=700, consumers=consumers) as together:
        both = together.table()
        report = together.report
    one_by_one = []
    for p in range(3):
        with restore_stores(broker.bootstrap_servers, topic, SYNTHETIC_SPEC,
                            tmp_path / "one-by-one", partitions=[p]) as single:
            one_by_one.append(single.table())
    sequential = pd.concat(one_by_one, ignore_index=True)
    assert len(both) == len(sequential) == len(expected)
    assert store_values(both) == store_values(sequential) == expected
    assert report["records"].tolist() == [2000, 2000, 2000]
    assert report["end_offset"].tolist() == [2000, 2000, 2000]


def test_the_gantt_of_a_restore_shows_the_partitions_overlapping(synthetic, broker):
    from statekit.charts.restore import restore_gantt_chart

    topic, _ = synthetic
    with restore_stores(broker.bootstrap_servers, topic, SYNTHETIC_SPEC, chunk=200) as restored:
        report = restored.report
        events = restored.events
    assert report["started"].max() < report["finished"].min()   # every bar overlaps the others
    spec = restore_gantt_chart(report).to_dict()
    bars = next(iter(spec["datasets"].values()))
    assert sorted(b["row"] for b in bars) == ["partition 0", "partition 1", "partition 2"]
    assert max(b["from_s"] for b in bars) < min(b["to_s"] for b in bars)
    starts = events[events["event"] == "start"]["time"]
    assert starts.max() < events[events["event"] == "end"]["time"].min()  # all begun at once


@pytest.mark.parametrize("consumers", ["per_partition", "processes"])
def test_listeners_hear_one_event_at_a_time_while_partitions_restore_in_threads(
        synthetic, broker, tmp_path, consumers):
    """A consumer per partition writes from several threads (or worker processes); a
    listener that is not thread-safe still hears one event at a time, each partition's
    in offset order, every one of them (start, batches, end)."""
    topic, expected = synthetic
    inside, overlapped, threads = [0], [], set()
    heard: dict[int, list] = {0: [], 1: [], 2: []}

    class Unsafe(RestoreListener):
        def _enter(self):
            threads.add(threading.get_ident())
            inside[0] += 1
            if inside[0] > 1:
                overlapped.append(inside[0])
            time.sleep(0.002)   # widen the window another thread would enter
            inside[0] -= 1

        def on_restore_start(self, partition, start_offset, end_offset):
            self._enter()
            heard[partition].append(("start", start_offset, end_offset))

        def on_batch_restored(self, partition, batch_end_offset, n):
            self._enter()
            heard[partition].append(("batch", batch_end_offset, n))

        def on_restore_end(self, partition, total):
            self._enter()
            heard[partition].append(("end", total))

    with restore_stores(broker.bootstrap_servers, topic, SYNTHETIC_SPEC, tmp_path,
                        listeners=[Unsafe()], chunk=100, consumers=consumers) as restored:
        assert store_values(restored.table()) == expected
        report = restored.report
        events = restored.events
    assert not overlapped
    if consumers == "per_partition":
        assert len(threads) > 1   # the batches did come from the partitions' own threads
    else:   # heard here, from the workers' messages
        assert threads == {threading.get_ident()}
    for p, seen in heard.items():
        assert seen[0] == ("start", 0, 2000) and seen[-1] == ("end", 2000), p
        batches = seen[1:-1]
        assert all(e[0] == "batch" for e in batches), p
        offsets = [e[1] for e in batches]
        assert offsets == sorted(offsets) and offsets[-1] == 1999, p
        assert sum(e[2] for e in batches) == 2000 and len(batches) >= 20, p
    assert events.groupby("partition")["records"].sum().tolist() == [2000, 2000, 2000]
    assert report["started"].max() < report["finished"].min()


def test_a_failure_in_one_partitions_thread_is_raised_and_stops_the_others(games, broker,
                                                                           logged):
    from statekit.kafka.topics import partition_count

    assert partition_count(broker.bootstrap_servers, games) > 1
    started = time.monotonic()
    with pytest.raises(sk.ChangelogError, match="not a statekit changelog"):
        restore_stores(broker.bootstrap_servers, games, logged[0].spec,
                       consumers="per_partition")
    assert time.monotonic() - started < 30   # no thread left reading the rest of the topic
    assert not [t for t in threading.enumerate() if t.name.startswith(f"restore-{games}")]


def test_a_partition_already_at_its_end_restores_nothing_beside_the_others(synthetic, broker,
                                                                           tmp_path):
    topic, expected = synthetic
    restore_stores(broker.bootstrap_servers, topic, SYNTHETIC_SPEC, tmp_path,
                   partitions=[1]).close()
    with restore_stores(broker.bootstrap_servers, topic, SYNTHETIC_SPEC, tmp_path) as restored:
        records = restored.report.set_index("partition")["records"].to_dict()
        assert store_values(restored.table()) == expected
    assert records == {0: 2000, 1: 0, 2: 2000}


def test_a_restore_to_a_batch_stops_every_partition_there(synthetic, broker):
    topic, _ = synthetic
    with restore_stores(broker.bootstrap_servers, topic, SYNTHETIC_SPEC, to_batch=1,
                        chunk=300) as restored:
        assert restored.report["records"].tolist() == [1000, 1000, 1000]
        assert restored.report["end_offset"].tolist() == [1000, 1000, 1000]


# --- worker processes (consumers="processes") ------------------------------------------
def _children() -> dict[int, str]:
    """This process's child processes (zombies too): pid → command line."""
    return {pid: info.cmdline for pid, info in process_table().items()
            if info.ppid == os.getpid()}


def _workers() -> dict[int, str]:
    return {pid: cmd for pid, cmd in _children().items() if "statekit.restore.worker" in cmd}


@pytest.mark.timeout(300)
def test_processes_restore_the_same_stores_as_one_consumer_key_for_key(synthetic, broker,
                                                                       tmp_path):
    topic, expected = synthetic
    restored = {}
    for consumers in ("one", "processes"):
        with restore_stores(broker.bootstrap_servers, topic, SYNTHETIC_SPEC,
                            tmp_path / consumers, chunk=300, consumers=consumers) as result:
            restored[consumers] = (
                {p: _entries(store) for p, store in result.stores.items()},
                result.report.drop(columns=["seconds", "records_per_s", "started",
                                            "finished"]),
                result.events.groupby("partition")["records"].sum())
            assert all(store.is_open for store in result.stores.values())
            assert store_values(result.table()) == expected
    (one_raw, one_report, one_events), (raw, report, events) = restored["one"], \
        restored["processes"]
    assert raw == one_raw and sum(map(len, raw.values())) == len(expected)
    pd.testing.assert_frame_equal(report, one_report)
    pd.testing.assert_series_equal(events, one_events)
    assert not _workers()


@pytest.mark.timeout(120)
def test_a_worker_restores_without_pandas_numpy_or_pyarrow(synthetic, broker, tmp_path):
    """A worker writes raw bytes: it must not pay a second to import pandas (the lazy
    modules of ``statekit._lazy``), yet write the same store a thread does."""
    import pickle
    import sys

    from statekit.model.connection import KafkaConnection
    from statekit.restore.worker import WorkerJob

    topic, expected = synthetic
    job = WorkerJob(KafkaConnection(broker.bootstrap_servers), topic, SYNTHETIC_SPEC,
                    topic.removesuffix("-changelog"), str(tmp_path / "worker"),
                    {0: (0, 2000), 2: (0, 2000)}, None, 300)
    (tmp_path / "job.pickle").write_bytes(pickle.dumps(job))
    script = ("import pickle, sys; from statekit.restore.readers import restore_group; "
              "from statekit.restore.listener import RecordingListener; "
              "heard = RecordingListener(); "
              "restore_group(pickle.loads(open(sys.argv[1], 'rb').read()), heard); "
              "print(sum(e[4] for e in heard.events), "
              "sorted(m for m in ('pandas', 'numpy', 'pyarrow') if m in sys.modules))")
    ran = subprocess.run([sys.executable, "-c", script, str(tmp_path / "job.pickle")],
                         capture_output=True, text=True, timeout=100, check=True)
    assert ran.stdout.split(" ", 1) == ["4000", "[]\n"]
    with restore_stores(broker.bootstrap_servers, topic, SYNTHETIC_SPEC, tmp_path / "worker",
                        partitions=[0, 2], consumers="one") as reopened:
        assert reopened.report["records"].tolist() == [0, 0]   # the worker's checkpoints
        got = store_values(reopened.table())
    assert got == {k: v for k, v in expected.items() if k[0].startswith(("p0-", "p2-"))}


def _entries(store) -> list:
    """Every (key, value) of a store, in key order."""
    with store.all() as entries:
        return list(entries)


@pytest.mark.timeout(300)
def test_processes_checkpoint_as_the_threads_do(synthetic, broker, tmp_path):
    """Up to a batch, then the rest, then nothing: each restore reads from the last one's
    checkpoint, as with threads."""
    topic, expected = synthetic
    with restore_stores(broker.bootstrap_servers, topic, SYNTHETIC_SPEC, tmp_path,
                        to_batch=1, chunk=300, consumers="processes") as first:
        assert first.report["records"].tolist() == [1000, 1000, 1000]
        assert first.report["end_offset"].tolist() == [1000, 1000, 1000]
    with restore_stores(broker.bootstrap_servers, topic, SYNTHETIC_SPEC, tmp_path,
                        consumers="processes") as second:
        assert second.report["start_offset"].tolist() == [1000, 1000, 1000]
        assert second.report["records"].tolist() == [1000, 1000, 1000]
        assert store_values(second.table()) == expected
    with restore_stores(broker.bootstrap_servers, topic, SYNTHETIC_SPEC, tmp_path,
                        consumers="processes") as third:
        assert third.report["records"].sum() == 0   # nothing new: nothing replayed
        assert third.report["end_offset"].tolist() == [2000, 2000, 2000]
        assert store_values(third.table()) == expected
    assert not _workers()


@pytest.mark.timeout(300)
def test_a_bad_record_in_a_worker_is_raised_as_with_threads(broker, tmp_path, topic_name):
    """A record without a key in partition 1: the same error type and message as the
    thread mode, naming the partition; no worker left; the other stores restore on."""
    topic = f"{topic_name}-changelog"
    expected = write_changelog(broker.bootstrap_servers, topic, per_batch=250,
                                keyless=(1, 600))
    errors = {}
    for consumers in ("per_partition", "processes"):
        before = _children()
        with pytest.raises(sk.StatekitError) as raised:
            restore_stores(broker.bootstrap_servers, topic, SYNTHETIC_SPEC,
                           tmp_path / consumers, chunk=100, consumers=consumers)
        errors[consumers] = raised.value
        assert set(_children()) <= set(before)   # no worker (nor zombie) left
    threads, processes = errors["per_partition"], errors["processes"]
    assert type(processes) is type(threads) is sk.BadArgument
    assert re.sub(r"#\d+", "#N", str(processes)) == re.sub(r"#\d+", "#N", str(threads))
    assert "bad raw record" in str(processes)   # its index is the chunk's, which may differ
    assert f"(while restoring partition 1 of {topic!r})" in processes.__notes__
    assert any("restore worker process" in note and "partition" in note
               for note in processes.__notes__)
    assert "Traceback" in str(processes.__cause__)
    # the others' stores are whole or as their checkpoints say: they restore on
    with restore_stores(broker.bootstrap_servers, topic, SYNTHETIC_SPEC,
                        tmp_path / "processes", partitions=[0, 2]) as rest:
        assert rest.report["end_offset"].tolist() == [1000, 1000]
        table = rest.table()
    assert store_values(table) == {k: v for k, v in expected.items()
                                   if k[0].startswith(("p0", "p2"))}


@pytest.mark.timeout(300)
def test_a_topic_that_is_not_a_changelog_is_refused_by_a_worker(games, broker, tmp_path):
    started = time.monotonic()
    with pytest.raises(sk.ChangelogError,
                       match=r"not a statekit changelog: the record at partition \d offset"):
        restore_stores(broker.bootstrap_servers, games, SYNTHETIC_SPEC, tmp_path,
                       consumers="processes")
    assert time.monotonic() - started < 60
    assert not _workers()


@pytest.fixture(scope="module")
def larger(broker) -> tuple[str, dict]:
    """A 3-partition changelog of 60,000 records (as ``synthetic``): workers restore it
    long enough to be stopped or killed in the middle."""
    topic = "larger-changelog"
    return topic, write_changelog(broker.bootstrap_servers, topic, per_batch=5000)


@pytest.mark.timeout(300)
def test_a_killed_worker_is_named_and_the_restore_goes_on_after_it(larger, broker, tmp_path):
    """kill -9 of the workers mid-restore: RestoreWorkerLost naming the signal and the
    partitions, none left running; the next restore goes on from the checkpoints."""
    from statekit.restore import RestoreWorkerLost

    topic, expected = larger
    killed = []

    class Killer(RestoreListener):
        def on_batch_restored(self, partition, batch_end_offset, n):
            if not killed:
                for pid in _workers():
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)

    with pytest.raises(RestoreWorkerLost, match=r"\(pid \d+\) of .* partitions? [\d, ]+ was "
                                                r"killed by signal SIGKILL; its stores keep"):
        restore_stores(broker.bootstrap_servers, topic, SYNTHETIC_SPEC, tmp_path,
                       listeners=[Killer()], chunk=500, consumers="processes")
    assert killed and not _workers()
    with restore_stores(broker.bootstrap_servers, topic, SYNTHETIC_SPEC, tmp_path,
                        consumers="processes") as after:
        assert after.report["end_offset"].tolist() == [20_000] * 3
        assert store_values(after.table()) == expected


@pytest.mark.timeout(300)
def test_a_listener_that_fails_stops_the_workers_at_their_next_chunk(larger, broker,
                                                                     tmp_path):
    """A listener's error (here, in this process) is raised as it is; the workers stop at
    their next chunk and close their stores (no need to terminate them), which restore
    on from there."""
    topic, expected = larger
    before = _children()

    class Failing(RestoreListener):
        def on_batch_restored(self, partition, batch_end_offset, n):
            raise KeyError(f"no chart for partition {partition}")

    started = time.monotonic()
    with pytest.raises(KeyError, match="no chart for partition"):
        restore_stores(broker.bootstrap_servers, topic, SYNTHETIC_SPEC, tmp_path,
                       listeners=[Failing()], chunk=500, consumers="processes")
    assert time.monotonic() - started < STOP_GRACE_S   # stopped, not terminated
    assert set(_children()) <= set(before)
    with restore_stores(broker.bootstrap_servers, topic, SYNTHETIC_SPEC, tmp_path,
                        consumers="processes") as after:
        assert after.report["end_offset"].tolist() == [20_000] * 3
        assert store_values(after.table()) == expected


@pytest.mark.timeout(300)
def test_auto_restores_in_processes_from_its_threshold(synthetic, broker, tmp_path,
                                                       monkeypatch):
    from statekit.options import restore as options
    from statekit.restore import readers

    topic, expected = synthetic
    started = []

    class Counting(readers.RestoreWorkers):
        def __init__(self, jobs):
            started.append(sorted(p for job in jobs for p in job.ranges))
            super().__init__(jobs)

    monkeypatch.setattr(readers, "RestoreWorkers", Counting)
    for module in (options, readers):   # the choice of processes, and how many
        monkeypatch.setattr(module, "available_cpus", lambda: 2)
    monkeypatch.setattr(options, "PROCESSES_FROM", 4000)
    with restore_stores(broker.bootstrap_servers, topic, SYNTHETIC_SPEC, tmp_path / "a",
                        partitions=[0, 1]) as restored:   # 4,000 records: processes
        assert store_values(restored.table()) == {k: v for k, v in expected.items()
                                             if k[0].startswith(("p0", "p1"))}
    assert started == [[0, 1]]
    restore_stores(broker.bootstrap_servers, topic, SYNTHETIC_SPEC, tmp_path / "b",
                   partitions=[2], to_batch=None).close()   # one partition: threads
    restore_stores(broker.bootstrap_servers, topic, SYNTHETIC_SPEC).close()   # in memory
    restore_stores(broker.bootstrap_servers, topic, SYNTHETIC_SPEC, tmp_path / "c",
                   to_batch=0).close()   # a batch: still 6,000 to read from the start
    assert started == [[0, 1], [0, 1, 2]]
    for module in (options, readers):
        monkeypatch.setattr(module, "available_cpus", lambda: 1)
    restore_stores(broker.bootstrap_servers, topic, SYNTHETIC_SPEC, tmp_path / "d").close()
    assert started == [[0, 1], [0, 1, 2]]   # one CPU: threads


def test_processes_need_stores_on_disk(synthetic, broker):
    with pytest.raises(sk.BadArgument, match="consumers: 'processes'; accepted: 'auto', "
                                             "'per_partition' or 'one' for in-memory stores"):
        restore_stores(broker.bootstrap_servers, synthetic[0], SYNTHETIC_SPEC,
                       consumers="processes")


# --- bad input --------------------------------------------------------------------------
def test_a_directory_of_another_store_is_refused(logged, broker, tmp_path):
    query, _ = logged
    restore_stores(broker.bootstrap_servers, query.changelog_topic, query.spec, tmp_path,
                   partitions=[0]).close()
    other = sk.QuerySpec(keys=["game"], window=sk.tumbling("10 minutes"), aggregates=["count"])
    with pytest.raises(StoreMismatch, match="player"):
        restore_stores(broker.bootstrap_servers, query.changelog_topic, other, tmp_path,
                       partitions=[0])


def test_a_directory_of_a_newer_format_is_refused(logged, broker, tmp_path):
    query, _ = logged
    restore_stores(broker.bootstrap_servers, query.changelog_topic, query.spec, tmp_path,
                   partitions=[0]).close()
    meta = next(tmp_path.rglob("statekit-store.json"))
    data = json.loads(meta.read_text())
    data["format_version"] = data.get("format_version", 1) + 1
    meta.write_text(json.dumps(data))
    with pytest.raises(sk.StatekitError, match="format"):
        restore_stores(broker.bootstrap_servers, query.changelog_topic, query.spec, tmp_path,
                       partitions=[0])


def test_a_checkpoint_beyond_a_recreated_topic_is_named(logged, broker, tmp_path, topic_name):
    query, log = logged
    topic = f"{topic_name}-changelog"
    copy = compacted_copy(broker.bootstrap_servers, query.changelog_topic, topic)
    restore_stores(broker.bootstrap_servers, copy, query.spec, tmp_path).close()
    delete_topic(broker.bootstrap_servers, topic)
    time.sleep(0.5)
    create_topic(broker.bootstrap_servers, topic, 3, {"cleanup.policy": "compact"})
    with pytest.raises(sk.ChangelogError, match=r"restored up to offset \d+ .* now ends at "
                                                r"offset 0: the topic was deleted or recreated"):
        restore_stores(broker.bootstrap_servers, topic, query.spec, tmp_path)


def test_a_partition_that_does_not_exist_is_named(logged, broker):
    query, _ = logged
    with pytest.raises(sk.BadArgument, match="partition: 3; accepted: a partition of"):
        restore_stores(broker.bootstrap_servers, query.changelog_topic, query.spec,
                       partitions=[3])


def test_a_topic_that_is_not_a_changelog_is_refused(games, broker, logged):
    with pytest.raises(sk.ChangelogError, match="not a statekit changelog"):
        restore_stores(broker.bootstrap_servers, games, logged[0].spec, partitions=[0])


@pytest.mark.parametrize(("argument", "named"), [
    ({"chunk": 0}, "chunk: 0"),
    ({"chunk": "many"}, "chunk: 'many'"),
    ({"to_batch": -1}, "to_batch: -1"),
    ({"partitions": [0, 0]}, r"partitions: \[0, 0\]; accepted: distinct partitions"),
    ({"partitions": ["zero"]}, "partition: 'zero'"),
    ({"listeners": [print]}, "restore listener: <built-in function print>"),
    ({"listeners": RestoreListener()}, "listeners: .*accepted: a list of RestoreListener"),
    ({"consumers": "threads"},
     "consumers: 'threads'; accepted: 'auto', 'processes', 'per_partition' or 'one'"),
])
def test_bad_arguments_are_named_before_anything_is_read(synthetic, broker, tmp_path,
                                                         argument, named):
    with pytest.raises(sk.BadArgument, match=named):
        restore_stores(broker.bootstrap_servers, synthetic[0], SYNTHETIC_SPEC, tmp_path,
                       **argument)
    assert not list(tmp_path.iterdir())   # no store was opened


@pytest.mark.parametrize(("where", "why"), [
    ("a file", "{file!r} is not a directory"),
    ("a folder under a file", "{file!r} is not a directory"),
    ("/proc/statekit-stores", "a file cannot be written in '/proc': No such file or directory"),
    ("/proc/1/statekit/stores", "a file cannot be written in '/proc/1': "),
    ("/sys/statekit-stores", "a file cannot be written in '/sys': Permission denied"),
])
def test_a_destination_that_is_not_a_writable_directory_is_named_and_left_as_it_was(
        synthetic, broker, tmp_path, where, why):
    file = tmp_path / "stores.txt"
    file.write_text("not a folder")
    directory = {"a file": str(file), "a folder under a file": str(file / "stores")}.get(
        where, where)
    for consumers in ("one", "processes"):
        with pytest.raises(sk.BadArgument) as caught:
            restore_stores(broker.bootstrap_servers, synthetic[0], SYNTHETIC_SPEC, directory,
                           consumers=consumers)
        said = str(caught.value)
        assert said.startswith(f"bad directory: {directory!r}; accepted: a writable "
                               f"directory, or the path of a new one inside a writable "
                               f"directory ({why.format(file=str(file))}"), said
    assert sorted(p.name for p in tmp_path.iterdir()) == ["stores.txt"]  # nothing written
    assert file.read_text() == "not a folder"


def test_a_new_folder_given_as_text_is_made_and_restored_into(synthetic, broker, tmp_path):
    topic, latest = synthetic
    where = str(tmp_path / "new" / "stores")
    with restore_stores(broker.bootstrap_servers, topic, SYNTHETIC_SPEC, where) as restored:
        assert store_values(restored.table()) == latest
    assert sorted(p.name for p in Path(where).iterdir()) == [topic.removesuffix("-changelog")]


# --- crash drill --------------------------------------------------------------------------
def _worker(broker, topic, checkpoint, mode) -> subprocess.Popen:
    source = SourceOptions(kafka=broker, event_schema=GAME_EVENT_SCHEMA,
                           max_offsets_per_trigger=250)
    run = RunOptions(name="drill", checkpoint=str(checkpoint), trigger="200 milliseconds",
                     changelog_topic_config=HOLD_COMPACTION)
    return start_worker("query", query_config(topic, GAME_SPEC, source, run, mode=mode))


def _committed(checkpoint: Path) -> int:
    return sk.Checkpoint(checkpoint).last_batch


@pytest.mark.slow   # crash drill: five kill -9 of a query worker process, ~2-4 min
@pytest.mark.timeout(1200)
def test_crash_drill_five_kills_then_finish_matches_pandas(spark, broker, games, tmp_path):
    """kill -9 at a random moment five times, restarting each time; then finish the input."""
    checkpoint = tmp_path / "ck"
    rng = random.Random(7)
    kills = []
    for _ in range(5):
        before = _committed(checkpoint)
        worker = _worker(broker, games, checkpoint, "run")
        try:
            deadline = time.monotonic() + 240
            while _committed(checkpoint) <= before:  # let each run get somewhere
                assert worker.poll() is None, worker.stdout.read()
                assert time.monotonic() < deadline, "no batch committed in 240 s"
                time.sleep(0.05)
            time.sleep(rng.uniform(0, 2))
        finally:
            worker.send_signal(signal.SIGKILL)
            worker.wait(30)
        kills.append(_committed(checkpoint))
    finish = _worker(broker, games, checkpoint, "drain")
    out, _ = finish.communicate(timeout=300)
    assert finish.returncode == 0, out

    spec = GAME_SPEC
    state = StateReader(spark, str(checkpoint), spec)
    last = state.batch_range()[1]
    assert kills == sorted(kills) and kills[-1] < last
    watermark = pd.Timestamp(state.checkpoint.offset_metadata(last)["batchWatermarkMs"],
                             unit="ms")
    good, _ = parse_game_events(game_events().records["value"].tolist())
    events = good.rename(columns={"event_time": "ts"})
    events["ts"] = events["ts"].dt.tz_convert("UTC").dt.tz_localize(None)
    expected = windowed_reference(events, spec, watermark=watermark)
    snapshot = state.snapshot(last, sort=True).drop(columns="partition")
    mismatches = snapshot.merge(expected, how="outer", indicator=True)
    assert (mismatches["_merge"] != "both").sum() == 0
    pd.testing.assert_frame_equal(snapshot, expected, check_dtype=False)

    log = read_changelog(broker.bootstrap_servers, "drill-aggregate-changelog")
    assert_same_rows(materialize(log), state.snapshot(last), KEYS)
