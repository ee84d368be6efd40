"""The changelog's exactly-once under faults: a stalled or restarted broker, two writers on one
topic, a full disk. Each fault test runs its own embedded broker (the session's is shared)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from helpers.shipping import assert_each_batch_once as each_batch_once
from helpers.shipping import finished_checkpoint, state_copy, wait_for

import statekit as sk
from statekit.atomic import VersionedJsonFile
from statekit.changelog import writer as writer_module
from statekit.changelog.reader import read_meta
from statekit.changelog.rounds import transactional_id
from statekit.changelog.writer import ChangelogWriter
from statekit.datasets import GAME_EVENT_SCHEMA, GAME_SPEC
from statekit.errors import (
    BrokerUnreachable,
    ChangelogError,
    ChangelogFenced,
    CheckpointError,
    DataLoss,
    DiskFull,
    StatekitError,
)
from statekit.kafka import EmbeddedBroker
from statekit.kafka.clients import plain_consumer
from statekit.kafka.offsets import end_offsets
from statekit.kafka.topics import create_topic, delete_topic, list_topics
from statekit.spark_state.state_reader import StateReader


# --- a finished query, each test shipping a copy of its checkpoint ----------------------
@pytest.fixture(scope="module")
def finished(spark, broker, games, tmp_path_factory) -> Path:
    """The checkpoint of a query that read the game events in 500-record batches
    (changelog off: each test ships a copy of it with writers of its own)."""
    return finished_checkpoint(spark, broker, games, tmp_path_factory.mktemp("faults"),
                               "faults")


@pytest.fixture()
def state(spark, finished, tmp_path) -> StateReader:
    return state_copy(spark, finished, tmp_path)


@pytest.fixture()
def kafka():
    """An embedded broker of this test's own: fault tests stall and restart it."""
    with EmbeddedBroker() as own:
        yield own
        if own.running:  # a test that failed while the broker was stopped
            os.kill(own.pid, signal.SIGCONT)


TOPIC = "faults-aggregate-changelog"


def assert_each_batch_once(kafka, state: StateReader, topic: str = TOPIC) -> None:
    each_batch_once(kafka, state, topic)


def ships_the_rest_once(writer: ChangelogWriter, kafka, state: StateReader) -> None:
    """``writer`` ships every committed batch left, and the topic then holds each once."""
    assert writer.ship() == state.batch_range()[1]
    assert_each_batch_once(kafka, state)


def committed_ends(kafka, topic: str = TOPIC) -> dict[int, int]:
    consumer = plain_consumer(kafka)
    try:
        return {p: hi for p, (_, hi) in end_offsets(consumer, topic, [0, 1, 2]).items()}
    finally:
        consumer.close()


def stall_when_shipping(monkeypatch, kafka) -> None:
    """Stop the broker (SIGSTOP) just as the next shipping round starts producing."""
    real = writer_module.ship_round

    def stalled(*args, **kwargs):
        os.kill(kafka.pid, signal.SIGSTOP)
        return real(*args, **kwargs)

    monkeypatch.setattr(writer_module, "ship_round", stalled)


def ledger_of(state: StateReader) -> Path:
    return Path(state.checkpoint.ledger_path(TOPIC))


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_state_file_removed_while_its_round_reads_is_named_and_nothing_is_shipped(
        state, kafka, tmp_path, monkeypatch):
    """A live query's cleanup can remove a file between the round's listing and its read:
    the round fails with a CheckpointError naming the file, ships nothing, and once the
    file is back the next round ships each batch once."""
    writer = ChangelogWriter(state, kafka, TOPIC)
    assert writer.ship(through=1) == 1
    gone = Path(state.checkpoint.path) / "state" / "0" / "0" / "3.changelog"
    aside = tmp_path / "3.changelog"
    built = writer.source.changes_frame

    def frame_then_cleanup(first, last):
        frame = built(first, last)
        shutil.move(gone, aside)
        return frame

    monkeypatch.setattr(writer.source, "changes_frame", frame_then_cleanup)
    with pytest.raises(CheckpointError, match=r"cannot read the changes of batches 2\.\.3 "
                                              r"for 'faults-aggregate-changelog': .*"
                                              r"state/0/0/3\.changelog does not exist"):
        writer.ship(through=3)
    monkeypatch.undo()
    assert writer.shipped_batch == 1
    shutil.move(aside, gone)
    ships_the_rest_once(writer, kafka, state)


# --- a full disk ------------------------------------------------------------------------
def small_fs(folder: Path, size: str):
    """A tmpfs of ``size`` mounted on ``folder`` (the tests run as root on Linux): an object
    whose ``fill()`` takes all its space and ``free()`` gives it back; ``umount()`` at the end."""
    folder.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                          capture_output=True, text=True)
    if done.returncode:
        pytest.skip(f"cannot mount a small tmpfs here (needs root): {done.stderr.strip()}")
    filler = folder / "filler"

    class Small:
        path = folder

        @staticmethod
        def fill() -> None:
            with open(filler, "ab", buffering=0) as out, pytest.raises(OSError):
                while True:
                    out.write(b"\0" * 4096)

        @staticmethod
        def free() -> None:
            filler.unlink(missing_ok=True)

        @staticmethod
        def umount() -> None:
            subprocess.run(["umount", "-l", str(folder)], capture_output=True)

    return Small


@pytest.fixture()
def tiny_fs(tmp_path):
    """A 64 KiB tmpfs on a folder of ``tmp_path``."""
    tiny = small_fs(tmp_path / "tiny", "64k")
    try:
        yield tiny
    finally:
        tiny.umount()


@pytest.mark.timeout(30)
def test_a_full_disk_names_the_file_the_bytes_and_keeps_the_old_file(tiny_fs):
    ledger = VersionedJsonFile(tiny_fs.path / "_statekit" / "ledger.json", "example", 1)
    ledger.write({"last_batch": 3})
    tiny_fs.fill()
    with pytest.raises(DiskFull) as info:
        ledger.write({"last_batch": 4, "pad": "x" * 5000})
    err = info.value
    assert isinstance(err, OSError) and err.errno == 28
    assert err.folder == str(tiny_fs.path / "_statekit")
    assert err.needed > 5000 and err.free is not None and err.free < err.needed
    assert f"{err.needed:,} bytes" in str(err) and str(tiny_fs.path / "_statekit") in str(err)
    assert ledger.read() == {"last_batch": 3}  # nothing lost
    assert os.listdir(tiny_fs.path / "_statekit") == ["ledger.json"]  # no temp file left
    tiny_fs.free()  # following the message: free space, run again
    ledger.write({"last_batch": 4})
    assert ledger.read() == {"last_batch": 4}


@pytest.mark.timeout(30)
def test_a_folder_that_cannot_be_created_on_a_full_disk_is_named(tiny_fs):
    tiny_fs.fill()
    target = Path(tiny_fs.path) / "a" / "b" / "file.json"
    with pytest.raises(DiskFull, match=r"no space left to write .*file\.json"):
        VersionedJsonFile(target, "example", 1).write({"x": 1})


# --- a stalled broker, a restarted broker ------------------------------------------------
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_round_cut_short_by_a_stalled_broker_is_shipped_once_when_it_is_back(
        state, kafka, monkeypatch):
    first = ChangelogWriter(state, kafka, TOPIC, flush_timeout=3)
    assert first.ship(through=2) == 2
    stall_when_shipping(monkeypatch, kafka)
    try:
        with pytest.raises(ChangelogError, match=r"shipping batches 3\.\.\d+ to "
                                                 r"'faults-aggregate-changelog' failed: .*3 s\. "
                                                 r"The round's transaction is not committed"):
            first.ship()
    finally:
        os.kill(kafka.pid, signal.SIGCONT)
        monkeypatch.undo()
    assert first.identity is None  # its producer is closed: nothing of the round can land
    again = ChangelogWriter(state, kafka, TOPIC)  # the restarted query
    last = state.batch_range()[1]
    assert again.ship() == last
    shipped = committed_ends(kafka)
    assert_each_batch_once(kafka, state)
    time.sleep(3)  # nothing of the failed round lands after the new writer's
    assert committed_ends(kafka) == shipped
    assert_each_batch_once(kafka, state)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_broker_killed_mid_round_comes_back_with_its_log_and_the_rest_ships_once(
        state, kafka, monkeypatch):
    """The broker stalls mid-round and is killed (kill -9), then starts again from its own log
    directory: every committed batch is still there, the cut round's transaction never becomes
    readable, and the restarted query's writer ships the rest once, with no remedy."""
    first = ChangelogWriter(state, kafka, TOPIC, flush_timeout=3)
    assert first.ship(through=2) == 2
    before = committed_ends(kafka)
    stall_when_shipping(monkeypatch, kafka)
    with pytest.raises(ChangelogError, match="not committed"):
        first.ship()
    monkeypatch.undo()
    kafka.kill()  # SIGKILL ends a stopped process too
    kafka.start()  # the same ports, the same log directory
    assert list_topics(kafka) == {TOPIC: 3, f"{TOPIC}-meta": 1}
    assert committed_ends(kafka) == before  # batches 0..2, nothing of the cut round
    again = ChangelogWriter(state, kafka, TOPIC)  # the restarted query
    ships_the_rest_once(again, kafka, state)
    assert again.skipped == 0  # the cut round was never committed: nothing to skip


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_writer_alive_through_a_broker_restart_ships_the_rest_once(state, kafka):
    """Its producer reconnects to the restarted broker, whose transaction coordinator kept the
    producer's id and epoch on disk: no remedy, no second writer."""
    writer = ChangelogWriter(state, kafka, TOPIC)
    assert writer.ship(through=2) == 2
    kafka.stop()
    kafka.start()
    ships_the_rest_once(writer, kafka, state)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_topic_deleted_under_its_ledger_is_named_and_the_remedy_works(state, kafka):
    """Someone deletes the changelog topic: the ledger says batches were shipped there, the
    error says so and what to do, and doing it works."""
    writer = ChangelogWriter(state, kafka, TOPIC)
    assert writer.ship(through=2) == 2
    delete_topic(kafka, TOPIC)
    with pytest.raises(ChangelogError, match=r"says batches up to 2 were shipped to topic "
                                             r"'faults-aggregate-changelog', but the broker has "
                                             r"no topic .* delete the ledger '(.*)' and the topic"
                       ) as info:
        writer.ship()
    assert str(ledger_of(state)) in str(info.value)
    os.remove(ledger_of(state))  # as the error says (the topic is not there)
    ships_the_rest_once(writer, kafka, state)
    assert list_topics(kafka)[f"{TOPIC}-meta"] == 1


# --- two writers on one topic --------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_writer_that_takes_over_mid_round_fences_the_other_which_names_it(
        spark, state, kafka, monkeypatch):
    """Writer A is about to produce a round when writer B (a restarted query on the same
    checkpoint) takes the topic over and ships: A's round must not land, A's error names
    B, and following it (A ships again) takes the topic back."""
    a = ChangelogWriter(state, kafka, TOPIC)
    assert a.ship(through=1) == 1
    b = ChangelogWriter(StateReader(spark, str(state.checkpoint), GAME_SPEC), kafka, TOPIC)
    real = writer_module.ship_round
    took_over = []

    def b_first(*args, **kwargs):
        if not took_over:  # A's round: first B takes over and ships, then A goes on
            took_over.append("b")
            took_over.append(b.ship(through=5))
        return real(*args, **kwargs)

    monkeypatch.setattr(writer_module, "ship_round", b_first)
    with pytest.raises(ChangelogFenced) as info:
        a.ship()
    monkeypatch.undo()
    assert took_over == ["b", 5] and a.shipped_batch == 5
    err = info.value
    assert err.other == b.identity
    assert (f"was fenced by the writer of checkpoint {b.identity.checkpoint!r} on host "
            f"{b.identity.host} (pid {os.getpid()}, started {b.identity.started})") in str(err)
    assert transactional_id(TOPIC) in str(err) and "ship() here again" in str(err)
    assert read_meta(kafka, TOPIC)[0].writer == b.identity
    # following the error: A ships again, taking the topic back
    last = state.batch_range()[1]
    assert a.ship() == last
    assert read_meta(kafka, TOPIC)[0].writer == a.identity != b.identity
    assert b.ship() == last  # nothing left to ship: B fences nobody
    assert_each_batch_once(kafka, state)
    schema, positions = read_meta(kafka, TOPIC)
    assert schema.writer == a.identity
    assert {p.batch for p in positions.values()} == {last}


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_two_writers_started_together_ship_each_batch_once(spark, state, kafka):
    writers = [ChangelogWriter(StateReader(spark, str(state.checkpoint), GAME_SPEC), kafka,
                               TOPIC) for _ in range(2)]
    errors: list[BaseException | None] = [None, None]
    start = threading.Barrier(2)

    def ship(i: int) -> None:
        start.wait()
        try:
            writers[i].ship()
        except ChangelogError as exc:
            errors[i] = exc

    threads = [threading.Thread(target=ship, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert_each_batch_once(kafka, state)
    for i, err in enumerate(errors):
        if err is not None:  # fenced by the other one (had both produced), which it names
            other = writers[1 - i].identity
            assert isinstance(err, ChangelogFenced), err
            assert err.other == other and f"pid {other.pid}" in str(err)
    assert sum(e is None for e in errors) >= 1


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_second_checkpoint_is_refused_without_fencing_the_writer_of_the_first(
        spark, state, kafka, tmp_path):
    a = ChangelogWriter(state, kafka, TOPIC)
    assert a.ship(through=2) == 2
    copy = tmp_path / "other"
    shutil.copytree(state.checkpoint.path, copy)
    os.remove(copy / "_statekit" / "changelog" / f"{TOPIC}.json")
    b = ChangelogWriter(StateReader(spark, str(copy), GAME_SPEC), kafka, TOPIC)
    with pytest.raises(ChangelogError, match="already holds records .* did not write: delete "
                                             "the topic"):
        b.ship()
    ships_the_rest_once(a, kafka, state)  # not fenced


# --- every remedy works when followed -------------------------------------------------------
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_every_remedy_of_the_writer_works_when_followed(state, kafka):
    # a topic with another partition count
    create_topic(kafka, TOPIC, 4, {"cleanup.policy": "compact,delete"})
    writer = ChangelogWriter(state, kafka, TOPIC)
    with pytest.raises(ChangelogError, match=r"has 4 partitions but the state store has 3: "
                                             r"delete the topic \(statekit\.kafka\.delete_topic"):
        writer.ship()
    delete_topic(kafka, TOPIC)
    assert writer.ship(through=3) == 3
    # a ledger that is not a ledger any more
    ledger = ledger_of(state)
    ledger.write_text("{not json")
    with pytest.raises(ChangelogError, match=r"is not JSON .*delete the ledger .* and the topic "
                                             r"'faults-aggregate-changelog'"):
        writer.ship()
    ledger.unlink()
    delete_topic(kafka, TOPIC)
    assert writer.ship(through=5) == 5
    # the topic deleted and recreated empty under the ledger
    delete_topic(kafka, TOPIC)
    create_topic(kafka, TOPIC, 3, {"cleanup.policy": "compact,delete"})
    with pytest.raises(ChangelogError, match=r"partition \d now spans offsets 0\.\.0, but the "
                                             r"ledger .* was the topic deleted or recreated\? "
                                             r"delete the ledger"):
        writer.ship()
    ledger.unlink()
    delete_topic(kafka, TOPIC)
    ships_the_rest_once(writer, kafka, state)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_checkpoint_without_its_first_batches_says_its_changelog_cannot_start_over(
        spark, state, kafka, tmp_path):
    from statekit.datasets import game_events
    from statekit.kafka.dataset_replay import replay

    os.remove(Path(state.checkpoint.path) / "commits" / "0")  # as Spark's retention does
    fresh = ChangelogWriter(StateReader(spark, str(state.checkpoint), GAME_SPEC), kafka, TOPIC)
    with pytest.raises(DataLoss, match=r"changes of batches 0\.\.0 are gone \(Spark keeps the "
                                       r"state and logs of the last spark\.sql\.streaming\."
                                       r"minBatchesToRetain batches.*\); this checkpoint no "
                                       r"longer keeps batches 0\.\.0, so its changelog cannot be "
                                       r"shipped again from the start: delete the topic "
                                       r"'faults-aggregate-changelog' and run the query from a "
                                       r"new checkpoint"):
        fresh.ship()
    # following it: the topic deleted, the query run again from a new checkpoint
    delete_topic(kafka, TOPIC)
    replay(game_events(), kafka.bootstrap_servers, "games", partitions=4, progress=False)
    query = sk.start_query("games", GAME_SPEC, spark=spark, kafka=kafka,
                           event_schema=GAME_EVENT_SCHEMA, checkpoint=str(tmp_path / "new"),
                           name="faults", trigger="available-now", max_offsets_per_trigger=2500)
    query.query.awaitTermination(300)
    query.close()
    assert query.changelog_topic == TOPIC
    assert_each_batch_once(kafka, query.reader)


# --- a full disk ----------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_full_disk_under_the_ledger_is_named_and_shipping_again_keeps_each_batch_once(
        state, kafka, tiny_fs):
    folder = ledger_of(state).parent
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "--bind", str(tiny_fs.path), str(folder)],
                          capture_output=True, text=True)
    if done.returncode:
        pytest.skip(f"cannot bind-mount the small tmpfs: {done.stderr.strip()}")
    try:
        writer = ChangelogWriter(state, kafka, TOPIC)
        assert writer.ship(through=2) == 2
        tiny_fs.fill()
        with pytest.raises(DiskFull, match=rf"no space left to write '{ledger_of(state)}': it "
                                           rf"needs [\d,]+ bytes and the file system of "
                                           rf"'{folder}' has [\d,]+ bytes free") as info:
            writer.ship()
        assert info.value.folder == str(folder)
        assert json.loads(ledger_of(state).read_text())["last_batch"] == 2  # kept whole
        tiny_fs.free()  # as the error says
        assert writer.ship() == state.batch_range()[1]
        assert writer.skipped > 0  # the round that was committed is not shipped twice
        assert_each_batch_once(kafka, state)
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_full_disk_under_the_broker_fails_the_round_and_after_room_is_made_the_rest_ships_once(
        state, tmp_path):
    """The broker's log folder fills up mid-query: Kafka takes its only log folder offline and
    stops; the round fails (nothing of it readable), the error names the broker; once there is
    room again the broker starts from its own log and the rest ships, each batch once."""
    disk = small_fs(tmp_path / "kafka-disk", "48m")
    broker = EmbeddedBroker(log_dir=disk.path / "kafka")
    try:
        broker.start()
        writer = ChangelogWriter(state, broker, TOPIC, flush_timeout=5)
        assert writer.ship(through=2) == 2
        before = committed_ends(broker)
        disk.fill()
        # the round fails (Kafka stops at its first append that finds no room: the round's,
        # or its metadata log's, twice a second): a statekit error, whichever came first
        with pytest.raises(StatekitError):
            writer.ship()
        wait_for(lambda: not broker.running, 60, "the broker stopped by its fatal fault")
        with pytest.raises(BrokerUnreachable) as info:  # any call says why it stopped
            list_topics(broker.bootstrap_servers, timeout=2)
        said = str(info.value)  # the broker, that it exited, why (its folder), and its log
        assert broker.bootstrap_servers in said
        assert (f"the embedded Apache Kafka broker on {broker.bootstrap_servers} exited" in said
                and "No space left on device" in said and str(broker.data_dir) in said)
        disk.free()  # as a person would: make room, start the broker again
        broker.stop()
        broker.start()
        assert committed_ends(broker) == before  # batches 0..2, nothing of the failed round
        ships_the_rest_once(writer, broker, state)
    finally:
        broker.close()
        disk.umount()
