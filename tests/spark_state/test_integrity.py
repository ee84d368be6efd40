"""A damaged checkpoint is named the same way everywhere: the query API, ``open_checkpoint``
and ``describe()`` (``statekit.spark_state.integrity`` is the one owner of the checks).

The query tests run one real statekit query (a windowed count over JSON files, RocksDB with
changelog checkpointing) and damage its checkpoint one way per test, restoring it after; the
snapshot tests read a checkpoint built in a child process that uploads RocksDB snapshots
(``N.zip`` and their SST files), which the test session's JVM does not do soon enough.
"""

from __future__ import annotations

import contextlib
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from helpers.filestream import add_events_file, build_snapshot_checkpoint, start_windowed_count
from helpers.plainrun import session_conf

from statekit.drills.spark_restart import MIN_DELTAS
from statekit.errors import CheckpointError
from statekit.inspect import open_checkpoint
from statekit.spark_state.checkpoint import Checkpoint
from statekit.spark_state.file_checks import LZ4_MAGIC, lz4_stream_problem
from statekit.spark_state.integrity import checkpoint_problems, structure_problems

FILES = 5


# --- the checks alone, on folders made by hand ---------------------------------------------------
def lz4_block(payload: bytes) -> bytes:
    n = len(payload).to_bytes(4, "little")
    return LZ4_MAGIC + bytes([0x15]) + n + n + bytes(4) + payload


LZ4_END = LZ4_MAGIC + bytes([0x15]) + bytes(12)


def test_an_lz4_stream_cut_anywhere_is_truncated():
    whole = lz4_block(b"a" * 40) + lz4_block(b"b" * 7) + LZ4_END
    assert lz4_stream_problem(whole) is None
    for cut in (1, 20, 30, len(whole) - len(LZ4_END), len(whole) - 1):
        assert "truncated" in lz4_stream_problem(whole[:cut]), cut
    assert "not an LZ4 block stream" in lz4_stream_problem(b"PK\x03\x04" + bytes(40))
    assert "after its closing block" in lz4_stream_problem(whole + b"x")


def logs(root: Path, commits, offsets=None) -> Path:
    (root / "commits").mkdir(parents=True)
    (root / "offsets").mkdir()
    for batch in commits:
        (root / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')
    for batch in commits if offsets is None else offsets:
        (root / "offsets" / str(batch)).write_text(
            'v1\n{"batchWatermarkMs":0,"batchTimestampMs":0,'
            '"conf":{"spark.sql.shuffle.partitions":"3"}}\n-')
    return root


def test_a_commits_file_is_named_not_a_raw_os_error(tmp_path):
    ck = logs(tmp_path / "ck", [0, 1])
    shutil.rmtree(ck / "commits")
    (ck / "commits").write_text("x")
    with pytest.raises(CheckpointError, match=r"commit log '.*/commits' is a file, not a folder"):
        Checkpoint(ck).committed_batches()
    assert [p.kind for p in structure_problems(ck)] == ["not_a_folder"]


def test_log_holes_and_missing_folders_are_found_from_listings(tmp_path):
    ck = logs(tmp_path / "ck", [0, 1, 2, 4, 5], offsets=[0, 1, 2, 3, 4])
    found = structure_problems(ck)
    assert [(p.kind, Path(p.path).name) for p in found] == [
        ("commit_log_gap", "3"), ("offset_log_gap", "5")]
    # a stateful query (its progress reports say so) without its state folder
    (ck / "_statekit" / "progress").mkdir(parents=True)
    (ck / "_statekit" / "progress" / "0000000005.json").write_text(
        json.dumps({"batchId": 5, "stateOperators": [{"numRowsTotal": 3}]}))
    assert "missing_state" in [p.kind for p in structure_problems(ck)]
    assert "missing_state" not in [p.kind for p in structure_problems(ck, stateful=False)]
    # partition 1 of 3 gone (the operator metadata says 3)
    meta = ck / "state" / "0" / "_metadata"
    meta.mkdir(parents=True)
    (meta / "metadata").write_text('v1\n{"operatorInfo":{"operatorId":0},"stateStoreInfo":'
                                   '[{"storeName":"default","numPartitions":3}]}')
    for partition in (0, 2):
        (ck / "state" / "0" / str(partition)).mkdir()
        for version in range(1, 7):
            (ck / "state" / "0" / str(partition) / f"{version}.changelog").write_bytes(
                lz4_block(b"x") + LZ4_END)
    (ck / "state" / "0" / "2" / "4.changelog").unlink()
    found = {(p.kind, str(Path(p.path).relative_to(ck))) for p in checkpoint_problems(ck)}
    assert ("missing_partition", "state/0/1") in found
    assert ("missing_delta", "state/0/2/4.changelog") in found


# --- a real query, damaged one way per test -------------------------------------------------------
@pytest.fixture(scope="module")
def query(spark, tmp_path_factory):
    """The query, with no snapshot file: a delta test damages the newest delta, which a read
    needs only while no snapshot covers its version. With Spark's default (a snapshot every 10
    deltas) the session's maintenance thread could upload ``N.zip`` of the last version at any
    time after the query stopped, and a read then rightly skips the damaged delta (seen under
    load as 'DID NOT RAISE'). The setting is read when the query starts."""
    base = tmp_path_factory.mktemp("damaged")
    (base / "in").mkdir()
    with session_conf(spark, {MIN_DELTAS: "1000"}):
        running = start_windowed_count(spark, base / "in", base / "ck", "damaged")
    for i in range(FILES):
        add_events_file(base / "in", i, players=4, rows=10)
        running.wait_until_drained()
    running.close()
    assert not [p for p in running.checkpoint.state_dir.rglob("*.zip")], "no snapshot expected"
    yield running


@pytest.fixture()
def intact(query):
    """The query's snapshot and change feed before any damage (and a check that each test
    leaves the checkpoint as it found it)."""
    before = query.snapshot(sort=True), query.changes(from_batch=0)
    yield before
    pd.testing.assert_frame_equal(query.snapshot(sort=True), before[0])


@contextlib.contextmanager
def damaged(path: Path):
    """Back ``path`` (a file or folder) up, let the block damage it, put it back."""
    backup = path.with_name(path.name + ".backup")
    if path.is_dir():
        shutil.copytree(path, backup)
    else:
        shutil.copy2(path, backup)
    try:
        yield path
    finally:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()
        backup.rename(path)


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def flags_of(query) -> set[tuple[str, str]]:
    description = open_checkpoint(query.checkpoint).describe()
    root = str(query.checkpoint)
    return {(f.name, f.path.replace(root + "/", "")) for f in description.flags if f.path}


def last_delta(query, partition: int = 1) -> Path:
    return query.checkpoint.path / "state" / "0" / str(partition) / \
        f"{query.last_batch + 1}.changelog"


@pytest.mark.parametrize("keep_crc", [True, False])
def test_a_truncated_delta_is_named_by_snapshot_changes_and_describe(query, intact, keep_crc):
    delta = last_delta(query)
    crc = delta.with_name(f".{delta.name}.crc")
    with damaged(delta), damaged(crc):
        truncate(delta)
        if not keep_crc:
            crc.unlink()
        with pytest.raises(CheckpointError, match="truncated") as err:
            query.snapshot()
        assert str(delta) in str(err.value) and "getResult" not in str(err.value)
        with pytest.raises(CheckpointError, match=str(delta)):
            query.changes(from_batch=0)
        assert len(query.snapshot(batch=query.last_batch - 1)) > 0  # earlier state still reads
        found = flags_of(query)
        relative = str(delta.relative_to(query.checkpoint.path))
        assert ("corrupt_file", relative) in found
        assert (("no_checksum", relative) in found) == (not keep_crc)


def test_a_deleted_partition_folder_is_named(query, intact):
    folder = query.checkpoint.path / "state" / "0" / "2"
    with damaged(folder):
        shutil.rmtree(folder)
        for read in (query.snapshot, lambda: query.changes(from_batch=0)):
            with pytest.raises(CheckpointError, match=r"partition 2 of operator 0 has no folder "
                                                      r"\(the operator has 3 partitions\)"):
                read()
        assert ("missing_partition", "state/0/2") in flags_of(query)


def test_state_only_the_driver_wrote_is_named_an_unshared_checkpoint(query, intact):
    """What a driver sees of a checkpoint on each executor's own disk (Spark's ``_metadata``
    and no state file) is named as such, not reported as every partition folder gone."""
    from statekit.errors import CheckpointNotShared

    operator = query.checkpoint.path / "state" / "0"
    with damaged(operator):
        for partition in [p for p in operator.iterdir() if p.name.isdigit()]:
            shutil.rmtree(partition)
        (operator / "1" / "_metadata").mkdir(parents=True)  # one the driver made
        with pytest.raises(CheckpointNotShared, match=r"sees no state file of operator 0.*"
                                                      r"mount at the same path"):
            query.snapshot()


def test_a_hole_in_the_commit_log_is_named(query, intact):
    hole = query.last_batch - 1
    commit = query.checkpoint.commits_dir / str(hole)
    with damaged(commit):
        commit.unlink()
        with pytest.raises(CheckpointError, match=rf"batch {hole} has no commit file .*hole"):
            query.snapshot(batch=hole)
        pd.testing.assert_frame_equal(query.snapshot(sort=True), intact[0])  # others still read
        assert ("commit_log_gap", f"commits/{hole}") in flags_of(query)


def test_a_missing_state_folder_is_named(query, intact):
    state = query.checkpoint.state_dir
    with damaged(state):
        shutil.rmtree(state)
        with pytest.raises(CheckpointError, match=r"state folder .* is gone, but the query "
                                                  r"committed batches 0\.\."):
            query.snapshot()
        with pytest.raises(CheckpointError, match="is gone"):
            query.changes(from_batch=0)
        description = open_checkpoint(query.checkpoint).describe()
        assert description.flag_names == ["missing_state"]
        assert "keeps no state" not in " ".join(description.notes)


def test_a_commit_log_that_is_a_file_is_named(query, intact):
    commits = query.checkpoint.commits_dir
    with damaged(commits):
        shutil.rmtree(commits)
        commits.write_text("not a folder")
        with pytest.raises(CheckpointError, match="commit log .* is a file, not a folder"):
            query.snapshot()
        assert ("not_a_folder", "commits") in flags_of(query)


def flip_last_digit(path: Path) -> None:
    """Change one digit: the file still parses, but no longer matches its ``.crc``."""
    data = bytearray(path.read_bytes())
    at = max(data.rfind(bytes([d])) for d in b"0123456789")
    data[at] = ord("7") if data[at] != ord("7") else ord("3")
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("which", ["commits", "offsets", "operator metadata"])
def test_a_log_file_that_fails_its_checksum_is_named_with_what_to_do(query, intact, which):
    """Spark reads the last batch's offset and commit files and the operator metadata; Hadoop
    refused the damaged one with a bare ``ChecksumException`` (no remedy)."""
    ck = query.checkpoint.path
    last = query.last_batch
    bad = {"commits": ck / "commits" / str(last), "offsets": ck / "offsets" / str(last),
           "operator metadata": ck / "state" / "0" / "_metadata" / "metadata"}[which]
    with damaged(bad):
        flip_last_digit(bad)
        reads = {"snapshot": query.snapshot,
                 "open_checkpoint snapshot": lambda: open_checkpoint(ck).state().snapshot(),
                 "open_checkpoint changes": lambda: open_checkpoint(ck).state().changes(0)}
        for name, read in reads.items():
            with pytest.raises(CheckpointError) as err:
                read()
            message = str(err.value)
            assert repr(str(bad)) in message, (name, message)
            assert f"do not match its checksum file .{bad.name}.crc" in message, (name, message)
            assert "To fix it: restore it from a copy of the checkpoint" in message, name
            assert "delete that checksum file" in message, name
            assert "ChecksumException" not in message and "org.apache" not in message, message
        if which == "commits":
            assert f"as batch {last} is the last committed, delete it" in message


def test_a_damaged_log_file_read_without_spark_is_named_with_what_to_do(query, intact):
    bad = query.checkpoint.commits_dir / str(query.last_batch - 1)
    with damaged(bad):
        bad.write_bytes(b"\x00\xffnot a commit")
        with pytest.raises(CheckpointError, match=r"the commit log file .* is corrupt: it is "
                                                  r"not text .*To fix it: restore it from a "
                                                  r"copy") as err:
            open_checkpoint(query.checkpoint).commits()
        assert repr(str(bad)) in str(err.value)


def garbage(path: Path) -> None:
    path.write_bytes(b"\x00\xff garbage, not Spark's\n")


def broken_link(path: Path) -> None:
    shutil.rmtree(path)
    path.symlink_to(path.parent / "nowhere")


@pytest.mark.parametrize("relative, damage, kind", [
    ("commits/1", garbage, "corrupt_file"),
    ("offsets/1", truncate, "corrupt_file"),
    ("metadata", garbage, "corrupt_file"),
    ("state/0/_metadata/metadata", truncate, "corrupt_file"),
    ("state/0/1", broken_link, "missing_partition"),
], ids=["garbage commit", "truncated offsets", "metadata", "operator metadata",
        "partition link to nothing"])
def test_describe_flags_each_damaged_log_file_and_a_partition_link_to_nothing(
        query, intact, relative, damage, kind):
    path = query.checkpoint.path / relative
    with damaged(path):
        damage(path)
        description = open_checkpoint(query.checkpoint).describe()
        flagged = [f for f in description.flags if f.path == str(path)]
        assert [f.name for f in flagged] == [kind], description.flags
        assert "To fix it:" in flagged[0].message


def test_an_undamaged_checkpoint_has_no_problem(query, intact):
    assert checkpoint_problems(query.checkpoint) == []
    assert open_checkpoint(query.checkpoint).describe().flags == []


# --- RocksDB snapshots: the zip and its SST files ------------------------------------------
@pytest.fixture(scope="module")
def snapshots(tmp_path_factory):
    built = build_snapshot_checkpoint(tmp_path_factory.mktemp("zips"), query="plain", files=6,
                                      players=5, rows=12, shuffle_partitions=2)
    return Path(built["checkpoint"])


@pytest.mark.slow   # builds its checkpoint with a Spark query in a child process
@pytest.mark.timeout(600)
def test_a_truncated_snapshot_or_sst_file_is_flagged_while_spark_reads_around_it(
        spark, snapshots, tmp_path):
    expected = open_checkpoint(snapshots, spark).state().snapshot(sort=True)
    ck = Path(shutil.copytree(snapshots, tmp_path / "ck"))
    partition = ck / "state" / "0" / "0"
    newest = max(partition.glob("*.zip"), key=lambda p: int(p.stem))
    truncate(newest)
    (partition / f".{newest.name}.crc").unlink()
    sst = sorted((ck / "state" / "0" / "1" / "SSTs").glob("*.sst"))[-1]
    truncate(sst)
    view = open_checkpoint(ck, spark)
    description = view.describe()
    flagged = {(f.name, f.path) for f in description.flags}
    assert ("corrupt_file", str(newest)) in flagged
    assert ("no_checksum", str(newest)) in flagged
    assert ("corrupt_file", str(sst)) in flagged
    assert any("not a whole zip" in f.message for f in description.flags)
    # Spark skips a snapshot it cannot load and replays deltas from an older one
    pd.testing.assert_frame_equal(view.state().snapshot(sort=True), expected)
