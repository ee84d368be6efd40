"""Spark's restore after a restart, read from the state store log: parser, timeline, summary.

Unit tests on real lines of a restart (Spark 4.3, RocksDB state store, changelog
checkpointing; ids abbreviated, long lines cut), then a real restart, in the test session,
of a small windowed aggregation whose first run took frequent snapshots in a child process.
"""

from __future__ import annotations

import doctest
import json
import os
from pathlib import Path
from string import Template

import pandas as pd
import pytest
from helpers.filestream import add_events_file, build_snapshot_checkpoint, start_windowed_count

import statekit.spark_state.restart as restart_module
import statekit.spark_state.store_log as store_log_module
from statekit.charts.restore import restore_gantt_chart
from statekit.errors import BadArgument, CheckpointError, StatekitError
from statekit.spark.session import state_store_log
from statekit.spark_state.restart import restart_summary, restart_timeline
from statekit.spark_state.spark_files import restore_plan, state_files
from statekit.spark_state.store_log import EVENT_COLUMNS, parse_lines, state_store_events

RUN = "c947a992-d28d-45e2-9deb-44b88bddaf12"   # the run after the restart
OLD = "f3f0d6cb-a834-49e9-9aac-a0a96dfd271d"   # the run before it (its providers closing)


def _provider(partition: int, run: str) -> str:
    return (f"StateStoreProviderId[ storeId=StateStoreId[ operatorId=0, partitionId={partition}, "
            f"storeName=default ], queryRunId={run} ]")


_IDS = {
    **{f"P{p}": _provider(p, RUN) for p in range(3)},
    **{f"OLD{p}": _provider(p, OLD) for p in range(3)},
    **{f"S{p}": f"StateStoreId[ operatorId=0, partitionId={p}, storeName=default ]"
       for p in range(3)},
    "T50": "Executor task launch worker for task 1.0 in stage 21.0 (TID 50)",
    "T51": "Executor task launch worker for task 2.0 in stage 21.0 (TID 51)",
    "ML": "state-store-maintenance-low-priority-0",
    "MH": "state-store-maintenance-high-priority-0",
}
# Lines of a real restart log (a backslash joins a long line; the HashMap lines continue
# the entry before them, as in the log).
LOG = Template("""\
2026-11-22T08:50:20.798 INFO RocksDBFileManager ${OLD1} [${ML}]: Estimated maximum version is 9 a\
nd minimum version is 1
2026-11-22T08:50:20.798 INFO RocksDB ${OLD1} [${ML}]: Cleaned old data, time taken: 0 ms
2026-11-22T08:50:22.793 INFO StateStore [${ML}]: Closing ${OLD1}
2026-11-22T08:50:22.793 INFO RocksDBStateMachine [${ML}]: Trying to close store ${S1}
2026-11-22T08:50:26.276 INFO RocksDB ${P1} [${T50}]: Set RocksDB native logging level to INFO_LEV\
EL
2026-11-22T08:50:26.285 INFO StateStore [${T50}]: Reported that the loaded instance ${P1} is acti\
ve, shouldForceSnapshotUpload=false
2026-11-22T08:50:26.285 INFO RocksDBStateMachine [${T50}]: New stamp: 1 issued for ${S1}
2026-11-22T08:50:26.285 INFO RocksDB ${P1} [${T50}]: Loading 9 with stateStoreCkptId:
2026-11-22T08:50:26.286 INFO RocksDBFileManager ${P1} [${T50}]: Loading checkpoint files for vers\
ion 8 checkpointUniqueId:
2026-11-22T08:50:26.617 INFO RocksDBFileManager ${P1} [${T50}]: Copied file:/tmp/scratch/ck3/stat\
e/0/1/SSTs/000011-ebb4b9a4-4c4f-49b1-ae77-ba760c9788f
2026-11-22T08:50:26.659 INFO RocksDBFileManager ${P1} [${T50}]: Copied 4 files (8064 bytes) from \
DFS to local with 0 files reused.
2026-11-22T08:50:26.660 INFO RocksDBFileManager ${P1} [${T50}]: RocksDB file mapping after loadin\
g checkpoint version 8 from DFS:
HashMap(000011.sst -> (8,RocksDBSstFile(000011.sst,000011-ebb4b9a4-4c4f-49b1-ae77-ba760c9788f2.ss\
t,2184)), 000010.sst -> (8,RocksDBSstFile(000010.sst,
2026-11-22T08:50:26.668 INFO RocksDB ${P1} [${T50}]: Opened DB with conf RocksDBConf(100,30,2,fal\
se,true,4,8,120000,true,5,true,-1,-1,-1,false,500,0.5
2026-11-22T08:50:26.672 INFO RocksDB ${P1} [${T50}]: Replaying changelog from version 8 -> Some(9)
2026-11-22T08:50:26.675 INFO RocksDB ${P1} [${T50}]: replaying changelog from version 9 with uniq\
ue Id: None
2026-11-22T08:50:26.677 INFO RocksDBFileManager ${P1} [${T50}]: Loaded change log reader version 1
2026-11-22T08:50:26.678 INFO RocksDB ${P1} [${T50}]: Loaded 9
2026-11-22T08:50:26.682 INFO RocksDB ${P1} [${T50}]: Loading 9 with stateStoreCkptId:
2026-11-22T08:50:26.682 INFO RocksDB ${P1} [${T50}]: Loaded 9
2026-11-22T08:50:26.760 INFO RocksDB ${P1} [${T50}]: Committed 10, stats = {"numCommittedKeys":36\
,"numUncommittedKeys":36,"numInternalKeys":0,"totalMe
2026-11-22T08:50:26.761 INFO RocksDBStateStoreProvider ${P1} [${T50}]: Committed 10 for ${S1}
2026-11-22T08:50:26.784 INFO RocksDB ${P2} [${T51}]: Loading 9 with stateStoreCkptId:
2026-11-22T08:50:26.785 INFO RocksDBFileManager ${P2} [${T51}]: Loading checkpoint files for vers\
ion 8 checkpointUniqueId:
2026-11-22T08:50:26.791 INFO RocksDBFileManager ${P1} [${ML}]: Estimated maximum version is 10 an\
d minimum version is 1
2026-11-22T08:50:26.791 INFO RocksDB ${P1} [${ML}]: Cleaned old data, time taken: 0 ms
2026-11-22T08:50:26.843 INFO RocksDBFileManager ${P2} [${T51}]: Copied 4 files (8114 bytes) from \
DFS to local with 0 files reused.
2026-11-22T08:50:26.843 INFO RocksDBFileManager ${P2} [${T51}]: RocksDB file mapping after loadin\
g checkpoint version 8 from DFS:
HashMap(000011.sst -> (8,RocksDBSstFile(000011.sst,000011-79636a89-2724-43e8-b70c-cc33d30a6bc2.ss\
t,1890)), 000010.sst -> (8,RocksDBSstFile(000010.sst,
2026-11-22T08:50:26.856 INFO RocksDB ${P2} [${T51}]: Opened DB with conf RocksDBConf(100,30,2,fal\
se,true,4,8,120000,true,5,true,-1,-1,-1,false,500,0.5
2026-11-22T08:50:26.858 INFO RocksDB ${P2} [${T51}]: Replaying changelog from version 8 -> Some(9)
2026-11-22T08:50:26.858 INFO RocksDB ${P2} [${T51}]: replaying changelog from version 9 with uniq\
ue Id: None
2026-11-22T08:50:26.859 INFO RocksDB ${P2} [${T51}]: Loaded 9
2026-11-22T08:50:26.867 INFO RocksDB ${P2} [${T51}]: Loading 9 with stateStoreCkptId:
2026-11-22T08:50:26.867 INFO RocksDB ${P2} [${T51}]: Loaded 9
2026-11-22T08:50:26.892 INFO RocksDBFileManager ${P1} [${MH}]: Saving RocksDB files to DFS for ve\
rsion 10 uniqueId:
2026-11-22T08:50:26.916 INFO RocksDBFileManager ${P1} [${MH}]: Copied 2 files (4531 bytes) from l\
ocal to DFS for version 10. 0 files reused without co
2026-11-22T08:50:26.943 INFO RocksDB ${P2} [${T51}]: Committed 10, stats = {"numCommittedKeys":28\
,"numUncommittedKeys":28,"numInternalKeys":0,"totalMe
2026-11-22T08:50:26.959 INFO RocksDBFileManager ${P1} [${MH}]: Saved checkpoint file for version \
10 checkpointUniqueId:
2026-11-22T08:50:26.959 INFO RocksDB ${P1} [${MH}]: ${P1}: Upload snapshot of version 10, with un\
iqueId: None time taken: 66 ms. Current lineage:
""").substitute(_IDS)


@pytest.fixture()
def log_file(tmp_path) -> Path:
    path = tmp_path / "state-store.log"
    path.write_text(LOG)
    return path


# --- the parser -------------------------------------------------------------------------------
def test_restore_lines_become_events_in_order():
    events = parse_lines(LOG.splitlines(keepends=True))
    assert list(events.columns) == EVENT_COLUMNS
    p1 = events[(events["partition"] == 1) & (events["run_id"] == RUN)]
    assert p1["event"].tolist() == [
        "load start", "load snapshot", "snapshot copied", "opened", "replay", "replay file",
        "loaded", "load start", "loaded", "committed", "upload start", "snapshot uploaded"]
    first = p1.drop_duplicates("event").set_index("event")
    assert first.loc[["load start", "load snapshot"], "version"].tolist() == [9, 8]  # snapshot 8
    assert first.loc["replay", ["from_version", "to_version"]].tolist() == [8, 9]
    assert first.loc["replay file", "version"] == 9
    assert first.loc["committed", "version"] == 10
    copied = p1[p1["event"] == "snapshot copied"].iloc[0]
    assert (copied["files"], copied["bytes"]) == (4, 8064)
    assert p1["time"].iloc[0] == pd.Timestamp("2026-11-22 08:50:26.285")
    assert events["time"].dtype == "datetime64[ns]"
    assert p1["operator_id"].eq(0).all() and p1["store"].eq("default").all()
    assert p1["thread"].iloc[0] == _IDS["T50"]
    uploaded = p1[p1["event"] == "snapshot uploaded"].iloc[0]
    assert uploaded["version"] == 10 and uploaded["thread"] == _IDS["MH"]
    p2 = events[events["partition"] == 2]
    assert p2["event"].tolist()[:7] == ["load start", "load snapshot", "snapshot copied",
                                        "opened", "replay", "replay file", "loaded"]


def test_other_lines_are_left_out():
    events = parse_lines(LOG.splitlines())
    assert set(events["event"]) <= set(store_log_module.EVENTS)
    # "Loaded change log reader version 1" and the provider's "Committed 10 for ..." are not
    # loads or commits; the old run only closed its stores
    assert (events["event"] == "loaded").sum() == 4
    assert (events["event"] == "committed").sum() == 2
    assert not (events["run_id"] == OLD).any()
    assert not events["message"].str.contains("HashMap").any()


def test_continuation_lines_stay_with_their_entry():
    lines = [
        "2026-01-05T10:00:00.000 INFO RocksDB StateStoreId(opId=1,partId=7,name=left) "
        "[task 3]: Loading 5",
        "2026-01-05T10:00:00.050 INFO RocksDBFileManager [task 3]: Saving checkpoint files "
        "for version 4 - 2 files",
        "\t/tmp/x/000008.sst - 1967 bytes",
        "\t/tmp/x/MANIFEST-000005 - 120 bytes",
        "2026-01-05T10:00:00.100 INFO RocksDB [task 3]: Loaded 5",
    ]
    orphan = ["HashMap(a -> b)"]           # a continuation with nothing before it
    events = parse_lines(orphan + lines)
    assert events["event"].tolist() == ["load start", "upload start", "loaded"]
    assert events["message"].iloc[1].count("\n") == 2
    assert events["version"].tolist() == [5, 4, 5]
    # a line without a store id belongs to the last store its thread worked on
    assert events["partition"].tolist() == [7, 7, 7]
    assert events[["operator_id", "store"]].drop_duplicates().values.tolist() == [[1, "left"]]
    assert events["run_id"].isna().all()


def test_a_store_named_on_another_line_of_the_thread_is_used():
    events = parse_lines([
        "2026-01-05T10:00:00.000 INFO RocksDBStateMachine [task 5]: New stamp: 1 issued for "
        "StateStoreId[ operatorId=0, partitionId=4, storeName=default ]",
        "2026-01-05T10:00:00.001 INFO RocksDB [task 5]: Loading 3",
        "2026-01-05T10:00:00.002 INFO RocksDB [task 6]: Loading 3",    # no store known: left out
    ])
    assert events[["partition", "event", "version"]].values.tolist() == [[4, "load start", 3]]


def test_lines_without_any_store_are_dropped():
    events = parse_lines(["2026-01-05T10:00:00.000 INFO RocksDB [task 9]: Loaded 4"])
    assert events.empty and list(events.columns) == EVENT_COLUMNS


def test_reading_from_an_offset_reads_only_what_followed(log_file):
    everything = state_store_events(log_file)
    assert everything.attrs["next_offset"] == log_file.stat().st_size
    text = log_file.read_bytes()
    mark = text.index(b"2026-11-22T08:50:26.784")        # partition 2 starts loading
    later = state_store_events(log_file, since=mark)
    assert later["time"].min() == pd.Timestamp("2026-11-22 08:50:26.784")
    pd.testing.assert_frame_equal(
        later, everything[everything["time"] >= later["time"].min()].reset_index(drop=True))
    inside = state_store_events(log_file, since=mark + 5)  # mid-line: starts at the next line
    assert inside["time"].min() > pd.Timestamp("2026-11-22 08:50:26.784")
    assert state_store_events(log_file, since=len(text)).empty
    only = state_store_events(log_file, query_run_id=OLD)
    assert only.empty


def test_a_line_still_being_written_is_left_for_the_next_read(log_file):
    complete = log_file.read_text()
    with open(log_file, "a") as out:
        out.write("2026-11-22T08:50:27.100 INFO RocksDB " + _IDS["P0"] + " [x]: Loadi")
    events = state_store_events(log_file)
    assert events.attrs["next_offset"] == len(complete.encode())
    with open(log_file, "a") as out:
        out.write("ng 11 with stateStoreCkptId:\n")
    more = state_store_events(log_file, since=events.attrs["next_offset"])
    assert more[["partition", "event", "version"]].values.tolist() == [[0, "load start", 11]]


def test_thread_names_with_brackets():
    line = ("2026-11-22T08:50:27.100 INFO RocksDB " + _IDS["P0"] + " [stream execution thread "
            "for q [id = 1b, runId = 2c]]: Loaded 3")
    events = parse_lines([line])
    assert events[["thread", "event", "version"]].values.tolist() == [
        ["stream execution thread for q [id = 1b, runId = 2c]", "loaded", 3]]


def test_bad_log_arguments(log_file, tmp_path):
    with pytest.raises(StatekitError, match="no state store log at .*spark_session"):
        state_store_events(tmp_path / "nowhere.log")
    with pytest.raises(BadArgument, match="log offset"):
        state_store_events(log_file, since=log_file.stat().st_size + 1)
    with pytest.raises(BadArgument, match="log offset"):
        state_store_events(log_file, since=-1)


# --- the timeline on a made-up checkpoint -----------------------------------------------------
def _progress(folder: Path, batch: int, run: str, timestamp: str, ms: int) -> None:
    report = {"id": "q", "runId": run, "batchId": batch, "timestamp": timestamp,
              "batchDuration": ms, "durationMs": {"triggerExecution": ms},
              "stateOperators": [{"customMetrics": {"rocksdbNumReplayChangelogFiles": 0,
                                                    "rocksdbFilesCopied": 12,
                                                    "SnapshotLastUploaded.partition_1_default":
                                                        -1}}]}
    (folder / f"{batch:010d}.json").write_text(json.dumps(report))


def fake_checkpoint(root: Path, partitions=(1, 2), deltas=range(1, 11),
                    snapshots=(2, 4, 6, 8, 10)) -> Path:
    """The files and progress reports of the logged restart (empty state files)."""
    for partition in partitions:
        folder = root / "state" / "0" / str(partition)
        folder.mkdir(parents=True)
        for version in deltas:
            (folder / f"{version}.changelog").write_text("")
        for version in snapshots:
            (folder / f"{version}.zip").write_text("")
    progress = root / "_statekit" / "progress"
    progress.mkdir(parents=True)
    _progress(progress, 7, OLD, "2026-11-22T08:50:15.034Z", 1836)
    _progress(progress, 8, OLD, "2026-11-22T08:50:16.876Z", 2270)
    _progress(progress, 9, RUN, "2026-11-22T08:50:25.092Z", 1934)
    return root


def test_timeline_has_the_phases_of_each_partitions_first_load(tmp_path, log_file):
    timeline = restart_timeline(fake_checkpoint(tmp_path / "ck"), log_file)
    assert timeline.attrs["run_id"] == RUN and timeline.attrs["version"] == 9
    assert timeline.attrs["first_batch"] == 9
    assert timeline.attrs["progress_metrics"]["rocksdbFilesCopied"] == 12
    assert timeline[["partition", "phase"]].values.tolist() == [
        [-1, "first batch"], [1, "load snapshot"], [1, "replay deltas"],
        [2, "load snapshot"], [2, "replay deltas"]]
    p1 = timeline[timeline["partition"] == 1].set_index("phase")
    assert p1.loc["load snapshot", "start"] == pd.Timestamp("2026-11-22 08:50:26.285")
    assert p1.loc["load snapshot", "end"] == pd.Timestamp("2026-11-22 08:50:26.672")
    assert p1.loc["replay deltas", "end"] == pd.Timestamp("2026-11-22 08:50:26.678")
    assert p1.loc["load snapshot", "seconds"] == pytest.approx(0.387)
    assert p1.loc["load snapshot", "detail"] == "snapshot 8 (8.zip): 4 SST files, 8,064 bytes"
    assert p1.loc["replay deltas", "detail"] == "delta 9"
    parts = timeline[timeline["partition"] >= 0]
    assert parts["snapshot_version"].tolist() == [8] * 4
    assert parts["delta_files"].tolist() == [1] * 4
    assert parts["plan_snapshot_version"].tolist() == [8] * 4     # 10.zip came later
    assert parts["matches_plan"].all()
    batch = timeline[timeline["phase"] == "first batch"].iloc[0]
    assert batch["start"] == pd.Timestamp("2026-11-22 08:50:25.092")
    assert batch["seconds"] == pytest.approx(1.934) and batch["detail"] == "batch 9"
    assert (timeline["seconds"] >= 0).all()
    assert timeline["start"].dtype == "datetime64[ns]"


def test_a_restore_with_cleaned_up_files_has_no_plan(tmp_path, log_file):
    ck = fake_checkpoint(tmp_path / "ck", deltas=range(10, 11), snapshots=(10,))
    timeline = restart_timeline(ck, log_file)
    parts = timeline[timeline["partition"] >= 0]
    assert parts["snapshot_version"].tolist() == [8] * 4       # what Spark did, from the log
    assert parts["plan_snapshot_version"].isna().all()
    assert parts["matches_plan"].isna().all()


def test_a_plan_that_differs_from_what_spark_loaded_is_flagged(tmp_path, log_file):
    ck = fake_checkpoint(tmp_path / "ck", snapshots=(2, 4, 6, 9))   # 9.zip written afterwards
    parts = restart_timeline(ck, log_file).query("partition >= 0")
    assert parts["plan_snapshot_version"].tolist() == [9] * 4
    assert not parts["matches_plan"].any()


def test_a_load_that_did_not_finish_has_no_end(tmp_path):
    log = tmp_path / "state-store.log"
    log.write_text("\n".join(line for line in LOG.splitlines()
                             if not line.startswith("2026-11-22T08:50:26.859")))  # p2 Loaded 9
    timeline = restart_timeline(fake_checkpoint(tmp_path / "ck"), log)
    p2 = timeline[timeline["partition"] == 2].set_index("phase")
    # the next 'Loaded 9' of the partition (its second, warm load) ends it instead
    assert p2.loc["replay deltas", "end"] == pd.Timestamp("2026-11-22 08:50:26.867")
    log.write_text("\n".join(line for line in LOG.splitlines()
                             if not ("Loaded 9" in line and _IDS["P2"] in line)))
    timeline = restart_timeline(fake_checkpoint(tmp_path / "ck2"), log)
    p2 = timeline[timeline["partition"] == 2].set_index("phase")
    assert pd.isna(p2.loc["replay deltas", "end"])
    assert pd.isna(p2.loc["replay deltas", "seconds"])
    summary = restart_summary(timeline).set_index("partition")
    assert pd.isna(summary.loc[2, "restore_seconds"])
    assert summary.loc[1, "restore_seconds"] == pytest.approx(0.393)


def test_summary_has_one_row_per_partition(tmp_path, log_file):
    summary = restart_summary(restart_timeline(fake_checkpoint(tmp_path / "ck"), log_file))
    assert summary["partition"].tolist() == [1, 2]
    assert summary["snapshot_version"].tolist() == [8, 8]
    assert summary["delta_files"].tolist() == [1, 1]
    assert summary["restore_seconds"].tolist() == pytest.approx([0.393, 0.075])
    assert summary["load_seconds"].tolist() == pytest.approx([0.387, 0.074])
    assert summary["first_batch_seconds"].tolist() == pytest.approx([1.934, 1.934])
    assert summary["matches_plan"].all()
    with pytest.raises(BadArgument, match="missing column 'phase'"):
        restart_summary(pd.DataFrame({"partition": [0]}))


def test_a_run_without_loads_in_the_log_says_what_to_do(tmp_path, log_file):
    ck = fake_checkpoint(tmp_path / "ck")
    with pytest.raises(CheckpointError) as err:
        restart_timeline(ck, log_file, run_id=OLD)
    message = str(err.value)
    assert OLD in message and str(log_file) in message and "spark_session" in message
    assert f"runs that loaded state there: {RUN}" in message
    mark = log_file.stat().st_size
    with pytest.raises(CheckpointError, match=f"from byte {mark}"):
        restart_timeline(ck, log_file, since=mark)
    with pytest.raises(CheckpointError, match="does not exist"):
        restart_timeline(tmp_path / "nowhere", log_file)


def test_without_progress_reports_the_run_comes_from_the_log(tmp_path, log_file):
    (tmp_path / "ck").mkdir()
    timeline = restart_timeline(tmp_path / "ck", log_file)
    assert timeline.attrs["run_id"] == RUN
    assert "first batch" not in set(timeline["phase"])
    assert timeline["plan_snapshot_version"].isna().all()   # no state files here


def test_doctests():
    for module in (restart_module, store_log_module):
        assert doctest.testmod(module, verbose=False).failed == 0


# --- a real restart ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def restarted(spark, tmp_path_factory):
    """A windowed count over JSON files: 6 batches in a child process, restarted here.

    The first run takes a snapshot every 2 versions (its own Spark session, see filestream);
    the restart, one more batch, runs in the test session, so its restore is in this process's
    state store log.
    """
    built = build_snapshot_checkpoint(tmp_path_factory.mktemp("restart"), query="statekit",
                                      files=6, players=7, rows=14, name="restart-timeline",
                                      shuffle_partitions=3, snapshot_before_last=2)
    source, checkpoint, before = Path(built["source"]), Path(built["checkpoint"]), \
        built["last_batch"]
    # Maintenance may have snapshotted the last version itself: drop the snapshots of the last
    # two versions (as if not uploaded yet) so the restore also replays delta files.
    for folder in (checkpoint / "state" / "0").iterdir():
        for zipped in folder.glob("*.zip"):
            if int(zipped.stem) > before - 1:
                zipped.unlink()
                (folder / f".{zipped.name}.crc").unlink(missing_ok=True)
    log = state_store_log()
    mark = os.path.getsize(log) if log.exists() else 0
    query = start_windowed_count(spark, source, checkpoint, "restart-timeline")
    try:
        add_events_file(source, 6, players=7, rows=14)
        query.wait_for_batches(1, timeout=60)
        run_id = str(query.query.runId)
    finally:
        query.close()
    return {"checkpoint": checkpoint, "log": log, "mark": mark, "run_id": run_id,
            "version": before + 1}


@pytest.mark.slow   # its checkpoint's first run is a Spark query in a child process
def test_real_restart_loads_the_planned_snapshot_and_replays_the_deltas_after_it(restarted):
    checkpoint, version = restarted["checkpoint"], restarted["version"]
    timeline = restart_timeline(checkpoint, restarted["log"], since=restarted["mark"])
    assert timeline.attrs["run_id"] == restarted["run_id"]
    assert timeline.attrs["version"] == version
    parts = timeline[timeline["partition"] >= 0]
    assert set(parts["partition"]) == {0, 1, 2}
    for _, group in parts.groupby("partition"):
        assert group["phase"].tolist() == ["load snapshot", "replay deltas"]
        assert group["delta_files"].iloc[0] >= 2
        assert group["start"].iloc[1] == group["end"].iloc[0]
    plan = restore_plan(state_files(checkpoint), version).set_index("partition")
    loaded = parts.drop_duplicates("partition").set_index("partition")
    for partition, row in loaded.iterrows():
        assert row["snapshot_version"] == plan.loc[partition, "snapshot_version"]
        assert row["delta_files"] == plan.loc[partition, "delta_files"]
        assert row["matches_plan"]
    assert loaded["snapshot_version"].notna().all()         # snapshots were uploaded
    assert (timeline["seconds"] >= 0).all() and timeline["end"].notna().all()
    batch = timeline[timeline["phase"] == "first batch"]
    assert len(batch) == 1 and batch["partition"].iloc[0] == -1
    assert batch["detail"].iloc[0] == f"batch {version}"   # batch N loads version N
    slack = pd.Timedelta(milliseconds=50)
    assert parts["start"].min() >= batch["start"].iloc[0] - slack
    assert parts["end"].max() <= batch["end"].iloc[0] + slack

    summary = restart_summary(timeline)
    assert summary["partition"].tolist() == [0, 1, 2]
    assert (summary["restore_seconds"] > 0).all()
    assert (summary["first_batch_seconds"] >= summary["restore_seconds"]).all()
    spec = restore_gantt_chart(timeline).to_dict()
    assert len(spec["datasets"][spec["data"]["name"]]) == len(timeline)


@pytest.mark.slow
def test_real_restart_events_of_the_run(restarted):
    events = state_store_events(restarted["log"], since=restarted["mark"],
                                query_run_id=restarted["run_id"])
    starts = events[events["event"] == "load start"]
    assert set(starts["partition"]) == {0, 1, 2}
    assert (starts.groupby("partition")["version"].first() == restarted["version"]).all()
    assert (events["run_id"] == restarted["run_id"]).all()
