"""Spark state files (snapshots and deltas, ``N.zip`` and ``N.changelog``) and what a restore
reads.

Unit tests on a file listing made of empty files, then one real checkpoint written
by a tiny streaming aggregation with frequent snapshots (in a Spark session of a child
process: see filestream).
"""

from __future__ import annotations

import doctest
import os
import threading
from pathlib import Path

import pytest
from helpers.filestream import build_snapshot_checkpoint

import statekit.spark_state.spark_files as files_module
from statekit.charts.changelog import state_files_chart
from statekit.errors import BadArgument, CheckpointError
from statekit.spark_state.integrity import _versions
from statekit.spark_state.spark_files import restore_plan, state_files, with_restore_use
from statekit.spark_state.state_reader import committed_batches


def make_checkpoint(root: Path, partitions=(0, 1), deltas=range(1, 11), snapshots=(5, 10),
                    operator: int = 0) -> Path:
    """A checkpoint folder with empty state files named as Spark names them."""
    for partition in partitions:
        folder = root / "state" / str(operator) / str(partition)
        (folder / "SSTs").mkdir(parents=True)
        (folder / "_metadata").mkdir()
        (folder / "_metadata" / "schema").write_text("")
        for n in ("000008-aa.sst", "000009-bb.sst"):
            (folder / "SSTs" / n).write_text("")
        for version in deltas:
            (folder / f"{version}.changelog").write_text("x" * version)
            (folder / f".{version}.changelog.crc").write_text("")
        for version in snapshots:
            (folder / f"{version}.zip").write_text("zip")
    (root / "state" / str(operator) / "_metadata").mkdir(exist_ok=True)
    return root


# --- listing ----------------------------------------------------------------------------------
def test_listing_has_one_row_per_snapshot_and_delta(tmp_path):
    files = state_files(make_checkpoint(tmp_path))
    assert list(files.columns) == ["partition", "version", "batch", "kind", "file", "bytes",
                                   "modified", "unique_id"]
    assert len(files) == 2 * (10 + 2)
    assert files.groupby("kind").size().to_dict() == {"delta": 20, "snapshot": 4}
    assert (files["batch"] == files["version"] - 1).all()
    p0 = files[files["partition"] == 0]
    assert p0.loc[p0["kind"] == "delta", "version"].tolist() == list(range(1, 11))
    assert p0.loc[p0["kind"] == "snapshot", "version"].tolist() == [5, 10]
    assert p0.loc[p0["version"] == 7, "bytes"].tolist() == [7]
    assert not files["file"].str.contains("crc|sst|_metadata").any()
    assert files["modified"].dtype == "datetime64[ns]"
    assert files.attrs["sst_files"] == {0: 2, 1: 2}
    assert files.attrs["operator_id"] == 0


def test_checkpoint_format_v2_names_carry_a_unique_id(tmp_path):
    folder = make_checkpoint(tmp_path, partitions=(0,), deltas=(), snapshots=()) \
        / "state" / "0" / "0"
    for name in ("1_0a1b-c2.changelog", "2_77ff-01.changelog", "2_77ff-01.zip"):
        (folder / name).write_text("")
    files = state_files(tmp_path)
    assert files[["version", "kind", "unique_id"]].values.tolist() == [
        [1, "delta", "0a1b-c2"], [2, "delta", "77ff-01"], [2, "snapshot", "77ff-01"]]
    assert restore_plan(files)["snapshot_version"].tolist() == [2]


def test_missing_checkpoint_or_state_folder_names_the_path(tmp_path):
    with pytest.raises(CheckpointError, match="nowhere"):
        state_files(tmp_path / "nowhere")
    (tmp_path / "commits").mkdir()
    with pytest.raises(CheckpointError, match=str(tmp_path)) as err:
        state_files(tmp_path)
    assert "no stateful operator" in str(err.value)
    make_checkpoint(tmp_path / "ck")
    with pytest.raises(CheckpointError, match="operators present: 0"):
        state_files(tmp_path / "ck", operator_id=3)


# --- restore plan -----------------------------------------------------------------------------
def test_restore_loads_the_newest_snapshot_and_replays_the_deltas_after_it(tmp_path):
    files = state_files(make_checkpoint(tmp_path))
    latest = restore_plan(files)
    assert latest["target_version"].tolist() == [10, 10]
    assert latest["snapshot_version"].tolist() == [10, 10]
    assert latest["delta_files"].tolist() == [0, 0]
    assert latest["replay_versions"].tolist() == ["none", "none"]
    seven = restore_plan(files, version=7).iloc[0]
    assert seven["snapshot_version"] == 5
    assert seven["snapshot_file"].endswith("/0/0/5.zip")
    assert seven["delta_files"] == 2 and seven["replay_versions"] == "6-7"
    assert [Path(f).name for f in seven["replay_files"]] == ["6.changelog", "7.changelog"]


def test_before_the_first_snapshot_a_restore_starts_empty(tmp_path):
    plan = restore_plan(state_files(make_checkpoint(tmp_path)), version=4)
    assert plan["snapshot_version"].isna().all()
    assert plan["snapshot_version"].dtype == "Int64"
    assert plan["replay_versions"].tolist() == ["1-4", "1-4"]
    assert restore_plan(state_files(tmp_path), version=1)["replay_versions"].tolist() == ["1", "1"]
    assert restore_plan(state_files(tmp_path), version=0)["delta_files"].tolist() == [0, 0]


def test_cleaned_up_deltas_without_a_snapshot_cannot_be_restored(tmp_path):
    make_checkpoint(tmp_path, partitions=(0,), deltas=range(4, 11), snapshots=(5, 10))
    files = state_files(tmp_path)
    assert restore_plan(files, version=8)["replay_versions"].tolist() == ["6-8"]
    with pytest.raises(CheckpointError) as err:
        restore_plan(files, version=4)
    message = str(err.value)
    assert "version 4" in message and "version 1 (cleaned up" in message
    assert "deltas 4-10, snapshots 5, 10" in message
    with pytest.raises(CheckpointError, match="version 11 .never committed"):
        restore_plan(files, version=11)


def test_a_missing_delta_in_the_middle_is_named(tmp_path):
    make_checkpoint(tmp_path, partitions=(0,), snapshots=(5,))
    (tmp_path / "state" / "0" / "0" / "7.changelog").unlink()
    with pytest.raises(CheckpointError, match="no delta file of version 7"):
        restore_plan(state_files(tmp_path), version=9)
    assert restore_plan(state_files(tmp_path), version=6)["replay_versions"].tolist() == ["6"]


def test_with_restore_use_marks_the_files_read(tmp_path):
    files = state_files(make_checkpoint(tmp_path))
    used = with_restore_use(files, version=8)
    read = used[used["used_by_restore"] & (used["partition"] == 0)]
    assert read[["version", "kind"]].values.tolist() == [
        [5, "snapshot"], [6, "delta"], [7, "delta"], [8, "delta"]]
    assert used["used_by_restore"].sum() == 8
    assert used.attrs["restore_version"] == 8
    assert "used_by_restore" not in files.columns
    chart = state_files_chart(used).to_dict()
    assert "restore of version 8" in chart["title"]["text"]


def test_of_duplicate_v2_files_the_newest_is_used(tmp_path):
    folder = make_checkpoint(tmp_path, partitions=(0,), deltas=(1,), snapshots=()) \
        / "state" / "0" / "0"
    old, new = folder / "2_aaaa.changelog", folder / "2_bbbb.changelog"
    old.write_text("")
    new.write_text("")
    os.utime(old, (1_700_000_000, 1_700_000_000))
    used = with_restore_use(state_files(tmp_path))
    assert used.loc[used["used_by_restore"], "unique_id"].tolist() == [None, "bbbb"]


def _cleaning_up(folder: Path, stop: threading.Event) -> None:
    """What a live query's maintenance does to a store folder, much faster: new versions
    (from 1000 on) come, and each is removed (the ``.crc`` first, then the file) five
    versions later, over and over."""
    version = 1000
    while not stop.is_set():
        (folder / f"{version}.changelog").write_text("x")
        (folder / f".{version}.changelog.crc").write_text("")
        if version >= 1005:
            (folder / f".{version - 5}.changelog.crc").unlink()
            (folder / f"{version - 5}.changelog").unlink()
        version += 1


def test_a_listing_while_spark_removes_old_versions_keeps_the_files_still_there(tmp_path):
    """A file listed, then removed before it is looked at, is left out: no FileNotFoundError
    (seen when an attached query's shipper listed a store as Spark's cleanup ran), and the
    files that stay (versions 1..10 here) are always there, to the listing and to the
    restore plan alike (the restore plan once saw the whole folder empty)."""
    ck = make_checkpoint(tmp_path, partitions=(0,), snapshots=())
    folder = ck / "state" / "0" / "0"
    stop = threading.Event()
    churn = threading.Thread(target=_cleaning_up, args=(folder, stop), daemon=True)
    churn.start()
    try:
        for _ in range(300):
            files = state_files(ck)
            assert set(range(1, 11)) <= set(files["version"])
            assert set(files["kind"]) == {"delta"}
            assert all(name.endswith(".changelog") for name in files["file"])
            deltas, snapshots = _versions(folder)
            assert set(range(1, 11)) <= set(deltas) and not snapshots
    finally:
        stop.set()
        churn.join(10)
    assert files_module.folder_state_files(folder)
    assert files_module.folder_state_files(tmp_path / "not-there") == []
    (tmp_path / "a-file").write_text("")
    assert files_module.folder_state_files(tmp_path / "a-file") == []


def test_bad_arguments(tmp_path):
    files = state_files(make_checkpoint(tmp_path))
    with pytest.raises(BadArgument, match="state version"):
        restore_plan(files, version=-1)
    with pytest.raises(BadArgument, match="missing column 'kind'"):
        restore_plan(files.drop(columns="kind"))
    with pytest.raises(CheckpointError, match="nothing to restore"):
        restore_plan(files.iloc[:0])


def test_doctests():
    result = doctest.testmod(files_module, verbose=False)
    assert result.failed == 0


# --- a real checkpoint ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def real_checkpoint(tmp_path_factory):
    """A checkpoint of a windowed count over JSON files, ~6 batches, with zip snapshots.

    Written by Spark's own groupBy/count in a Spark session of a child process that takes a
    snapshot every 2 versions and runs maintenance every second from its start (see filestream).
    """
    built = build_snapshot_checkpoint(tmp_path_factory.mktemp("state-files"), query="plain",
                                      files=6, players=5, rows=12, shuffle_partitions=3)
    return Path(built["checkpoint"])


@pytest.mark.slow   # builds its checkpoint with a Spark query in a child process
def test_real_checkpoint_lists_a_delta_per_committed_version(real_checkpoint):
    files = state_files(real_checkpoint)
    last_version = committed_batches(str(real_checkpoint))[-1] + 1
    assert last_version >= 6
    assert set(files["partition"]) == {0, 1, 2}   # the builder's 3 shuffle partitions
    for _, group in files.groupby("partition"):
        logs = group[group["kind"] == "delta"]
        assert logs["version"].tolist() == list(range(1, last_version + 1))
        assert (logs["bytes"] > 0).all()
        assert group["file"].map(os.path.isfile).all()
    assert (files["batch"] == files["version"] - 1).all()
    assert files["unique_id"].isna().all()   # checkpoint format v1
    assert sum(files.attrs["sst_files"].values()) > 0


@pytest.mark.slow
def test_real_checkpoint_has_snapshots_and_a_restore_plan_that_uses_them(real_checkpoint):
    files = state_files(real_checkpoint)
    snapshots = files[files["kind"] == "snapshot"]
    assert set(snapshots["partition"]) == {0, 1, 2}, "maintenance uploaded no snapshot"
    last_version = int(files["version"].max())
    plan = restore_plan(files).set_index("partition")
    for partition, group in snapshots.groupby("partition"):
        newest = int(group["version"].max())
        row = plan.loc[partition]
        assert row["target_version"] == last_version
        assert row["snapshot_version"] == newest
        assert row["delta_files"] == last_version - newest
        assert Path(row["snapshot_file"]).name == f"{newest}.zip"
    # before the first snapshot: everything from version 1 is replayed
    first = int(snapshots["version"].min())
    early = restore_plan(files, version=first - 1)
    assert early["snapshot_version"].isna().all()
    assert (early["delta_files"] == first - 1).all()
    used = with_restore_use(files)
    assert used["used_by_restore"].sum() == plan["delta_files"].sum() + len(plan)
    assert isinstance(state_files_chart(used).to_dict(), dict)



# --- a checkpoint whose state files this process cannot see ------------------------------
def _driver_side_only(root: Path, batches=range(3)) -> Path:
    """What a driver sees of a checkpoint on executors' own disks: the logs and Spark's
    ``_metadata``, no state file."""
    (root / "commits").mkdir(parents=True)
    for batch in batches:
        (root / "commits" / str(batch)).write_text("v1\n{}\n")
    (root / "state" / "0" / "_metadata").mkdir(parents=True)
    (root / "state" / "0" / "_metadata" / "metadata").write_text("v1\n")
    (root / "state" / "0" / "0" / "_metadata").mkdir(parents=True)
    (root / "state" / "0" / "0" / "_metadata" / "schema").write_text("")
    return root


def test_committed_state_with_no_visible_state_file_names_the_shared_file_system(tmp_path):
    from statekit.errors import CheckpointNotShared
    from statekit.spark_state.spark_files import require_state_files_visible

    root = _driver_side_only(tmp_path / "ck")
    with pytest.raises(CheckpointNotShared, match=r"committed batches 0-2, but this process "
                                                  r"sees no state file of operator 0.*mount"):
        require_state_files_visible(root)


@pytest.mark.parametrize("state_file", ["1/3.changelog", "0/left-keyToNumValues/2.delta",
                                        "2/4_0a1b-c2.zip"])
def test_one_visible_state_file_is_enough(tmp_path, state_file):
    from statekit.spark_state.spark_files import require_state_files_visible

    root = _driver_side_only(tmp_path / "ck")
    path = root / "state" / "0" / state_file
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")
    require_state_files_visible(root)  # no error
    require_state_files_visible(tmp_path / "ck", operator_id=5)  # no such operator: not its job


def test_a_checkpoint_before_its_first_commit_is_not_suspect(tmp_path):
    from statekit.spark_state.spark_files import require_state_files_visible

    require_state_files_visible(_driver_side_only(tmp_path / "ck", batches=()))
