"""A real Kafka Streams state directory opened read-only: the reference app (two instances,
one standby, the real embedded broker) runs the leaderboard over the game events; its
answers over HTTP are kept, it is closed (Kafka Streams flushes and checkpoints every
store), and each instance's directory is opened: the active copies equal the app's answers
for every key, the standby copies equal the active ones, the checkpoints name the changelog
offsets, and nothing is written into the directory. Bad input is refused by name.
"""

from __future__ import annotations

import json
import shutil
from types import SimpleNamespace

import pandas as pd
import pytest
from helpers.shipping import wait_for
from helpers.tree import tree_digest

import statekit as sk
from statekit.datasets import GAME_SPEC, game_events
from statekit.errors import BadArgument, KafkaStreamsStateError
from statekit.kafka.dataset_replay import replay
from statekit.kafka_streams.frames import rows_frame
from statekit.model.query_spec import QuerySpec, session

SPEC = QuerySpec.from_dict({**GAME_SPEC.to_dict(), "watermark": "1 day"})
APP_ID = "ks-state-dir"


def _sorted_rows(rows: list[dict]) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True) for r in rows)


def _local_rows(app, instance: int) -> list[dict]:
    """The rows instance ``instance`` holds, active and standby (none while rebalancing)."""
    try:
        return app.client.call("/range", {"local": "stale"}, via=instance)["rows"]
    except sk.KafkaStreamsAppError:
        return []


def _key(text: str) -> object:
    """A key as the client takes it: several key columns' JSON array as a tuple."""
    return tuple(json.loads(text)) if text.startswith("[") else text


def _answers(app, instances: int = 2) -> tuple | None:
    """Every row, the players, each player's rows (routed), each instance's active
    partitions; None while the group rebalances (a store is not queryable then)."""
    try:
        every_row = app.client.range()
        players = sorted({r["key"] for r in every_row})
        by_key = {p: app.client.get(_key(p))["rows"] for p in players}
        actives = [{r["partition"] for r in app.client.call("/range", {"local": "active"},
                                                             via=i)["rows"]}
                   for i in range(instances)]
    except sk.KafkaStreamsAppError:
        return None
    return every_row, players, by_key, actives


@pytest.fixture(scope="module")
def run(broker, tmp_path_factory):
    """One app run: its answers, each instance's actives, what opening it live gave, and its
    state directories after a clean close."""
    topic = "ks-state-dir-games"
    replay(game_events(), broker.bootstrap_servers, topic, partitions=4, progress=False)
    root = tmp_path_factory.mktemp("ks-state")
    options = sk.kafka_streams.AppOptions(application_id=APP_ID, state_dir=root, streams_config={
        "windowstore.changelog.additional.retention.ms": 100 * 365 * 86_400_000})
    with sk.kafka_streams.start(topic, SPEC, kafka=broker, instances=2, standbys=1,
                                cache_max_bytes=0, options=options) as app:
        app.wait_until_consumed(timeout=120)
        answers = wait_for(lambda: _answers(app), 60, "the app's answers (not rebalancing)",
                           every=0.2)
        every_row, players, by_key, actives = answers
        # each instance holds every partition, as active or as standby: wait until the
        # standby copies have caught up with the actives' changelog
        wait_for(lambda: all(_sorted_rows(_local_rows(app, i)) == _sorted_rows(every_row)
                             for i in (0, 1)),
            60, "the standby copies to catch up", every=0.2)
        dirs = [i.state_dir / "state" for i in app.instances]
        with pytest.raises(KafkaStreamsStateError, match=r"is running \(pid \d+") as refused:
            sk.open_kafka_streams(dirs[0], APP_ID, spec=SPEC, if_running="refuse")
        live = sk.open_kafka_streams(dirs[0], APP_ID, spec=SPEC)
        pids = [i.process.pid for i in app.instances]
    return SimpleNamespace(every_row=every_row, players=players, by_key=by_key,
                           actives=actives, dirs=dirs, refused=str(refused.value), live=live,
                           pids=pids, broker=broker)


def test_the_active_copies_equal_the_apps_answers_for_every_key(run):
    before = [tree_digest(d) for d in run.dirs]
    opened = [sk.open_kafka_streams(d, APP_ID, spec=SPEC) for d in run.dirs]
    snapshots = [o.snapshot(sort=True) for o in opened]
    active = pd.concat([s[s["partition"].isin(run.actives[i])] for i, s in
                        enumerate(snapshots)]).sort_values(SPEC.key_columns, kind="stable",
                                                            ignore_index=True)
    assert len(active) > 400 and set(active["partition"]) == {0, 1, 2, 3}
    pd.testing.assert_frame_equal(active, rows_frame(run.every_row, SPEC))
    answers = rows_frame([r for p in run.players for r in run.by_key[p]], SPEC)
    pd.testing.assert_frame_equal(active, answers)
    assert [tree_digest(d) for d in run.dirs] == before  # nothing written


def test_the_standby_copies_equal_the_active_ones(run):
    first, second = (sk.open_kafka_streams(d, APP_ID, spec=SPEC) for d in run.dirs)
    # the aggregation's tasks 1_*: each instance holds all four, as active or standby
    assert first.stores()["task"].tolist() == second.stores()["task"].tolist() == [
        "1_0", "1_1", "1_2", "1_3"]
    assert sk.kafka_streams.compare_copies(first, second).empty
    # the same changelog offsets checkpointed on both sides
    assert first.stores()["changelog_offset"].tolist() == \
        second.stores()["changelog_offset"].tolist()


def test_stores_and_checkpoints_are_described(run):
    state = sk.open_kafka_streams(run.dirs[0], APP_ID, spec=SPEC)
    stores = state.stores()
    assert stores["task"].tolist() == ["1_0", "1_1", "1_2", "1_3"]
    assert set(stores["format"].str.replace(r"\d+ segments", "n", regex=True)) == {
        "timestamped window store, n"}
    assert stores["segments"].map(len).min() >= 1
    # segments(): each segment folder of each task, the windows in it, all of the snapshot's
    segments = state.segments()
    assert segments.groupby("task")["segment"].apply(list).tolist() == \
        stores["segments"].tolist()
    snapshot = state.snapshot()
    assert segments["rows"].sum() == len(snapshot)
    held = segments[segments["rows"] > 0]
    assert (held["first_window"] >= held["start"]).all()
    checkpoints = state.checkpoints()
    changelog = checkpoints[checkpoints["file"] == ".checkpoint"]
    assert set(changelog["topic"]) == {f"{APP_ID}-aggregate-changelog"}
    # the checkpointed offset of each partition: its last changelog record's, in the store
    records = state.read_changelog(run.broker)
    ends = records.groupby("partition")["offset"].max()
    assert changelog.set_index("partition")["offset"].sort_index().tolist() == \
        ends.sort_index().tolist()
    # without a spec, the common serdes decode the same records (values as bytes here)
    raw = sk.open_kafka_streams(run.dirs[0], APP_ID, window_size="10 minutes")
    plain = raw.read_changelog(run.broker)
    assert plain["key"].tolist() == records["key"].tolist()
    assert plain["window_start"].tolist() == records["window_start"].tolist()
    assert plain["value"].map(len).eq(8 + 32 * len(SPEC.aggregates)).all()
    # .position: the input (repartition) offsets the store reflects
    assert set(checkpoints[checkpoints["file"] == "aggregate.position"]["topic"]) <= {
        f"{APP_ID}-aggregate-repartition"}


def test_without_a_spec_the_common_serdes_decode(run):
    state = sk.open_kafka_streams(run.dirs[0], APP_ID, window_size="10 minutes")
    frame = state.snapshot(sort=True)
    assert list(frame.columns) == ["key", "window_start", "window_end", "value", "timestamp",
                                   "partition"]
    assert set(frame["key"]) == set(run.players)
    assert ((frame["window_end"] - frame["window_start"]) == pd.Timedelta(minutes=10)).all()
    assert (frame["timestamp"] >= frame["window_start"]).all()
    with pytest.raises(KafkaStreamsStateError, match="not a long"):
        sk.open_kafka_streams(run.dirs[0], APP_ID, value_serde="long").snapshot()


@pytest.mark.parametrize("spec", [
    QuerySpec(keys=["player"], window=session("5 minutes"), watermark="1 day",
              aggregates=["count", "max(score)"]),
    QuerySpec(keys=["player", "game"], window=None, aggregates=["count", "sum(score)"]),
], ids=["session", "timestamped-key-value"])
def test_session_and_key_value_stores_equal_the_apps_answers(broker, run, spec, tmp_path):
    """One instance, the record cache on: its directory, opened after a clean close, equals
    its answers (range and every key's)."""
    options = sk.kafka_streams.AppOptions(application_id=f"ks-dir-{spec.kind}",
                                          state_dir=tmp_path)
    with sk.kafka_streams.start("ks-state-dir-games", spec, kafka=broker, instances=1,
                                standbys=0, options=options) as app:
        app.wait_until_consumed(timeout=120)
        answers = wait_for(lambda: _answers(app, instances=1), 60, "the app's answers", 0.2)
        state_dir = app.instances[0].state_dir / "state"
    every_row, players, by_key, _ = answers
    state = sk.open_kafka_streams(state_dir, options.application_id, spec=spec)
    kind = {"session": "session store", "running": "timestamped key-value store"}[spec.kind]
    assert state.stores()["format"].str.startswith(kind).all()
    opened = state.snapshot(sort=True)
    assert len(opened) > 100
    pd.testing.assert_frame_equal(opened, rows_frame(every_row, spec))
    pd.testing.assert_frame_equal(
        opened, rows_frame([r for p in players for r in by_key[p]], spec))


def test_a_running_app_is_named_or_read_from_its_files(run):
    assert ".lock" in run.refused and any(f"pid {pid}" in run.refused for pid in run.pids)
    assert run.live.running_pid in run.pids
    assert "last checkpoint" in run.live.notes[0]


def test_bad_input_is_named_and_nothing_written(run, tmp_path):
    before = tree_digest(run.dirs[0])
    with pytest.raises(KafkaStreamsStateError, match=r"holds no application 'other'.*"
                                                     r"ks-state-dir"):
        sk.open_kafka_streams(run.dirs[0], "other")
    with pytest.raises(BadArgument, match="avro"):
        sk.open_kafka_streams(run.dirs[0], APP_ID, value_serde="avro")
    with pytest.raises(BadArgument, match="store"):
        sk.open_kafka_streams(run.dirs[0], APP_ID, spec=SPEC).snapshot("nope")
    assert tree_digest(run.dirs[0]) == before
    # a copy, changed: a checkpoint file of another version; a store with a column family
    # Kafka Streams 4.1 does not write
    copy = tmp_path / "state"
    shutil.copytree(run.dirs[0], copy)
    (copy / APP_ID / "1_0" / ".checkpoint").write_text("1\n0\n")
    with pytest.raises(KafkaStreamsStateError, match="format version 1"):
        sk.open_kafka_streams(copy, APP_ID, spec=SPEC).stores()
    shutil.rmtree(copy / APP_ID / "1_0")
    _store_with_families(copy / APP_ID / "1_0" / "rocksdb" / "counts",
                         ["keyValueWithTimestamp", "offsets"])
    with pytest.raises(KafkaStreamsStateError, match=r"'offsets'.*does not know"):
        sk.open_kafka_streams(copy, APP_ID)
    shutil.rmtree(copy / APP_ID / "1_0")
    _store_with_families(copy / APP_ID / "1_0" / "rocksdb" / "history", [],
                         key=b"\xff" * 8 + b"p07")  # a versioned store's latest value
    with pytest.raises(KafkaStreamsStateError, match="versioned key-value store"):
        sk.open_kafka_streams(copy, APP_ID, store_kinds={"aggregate": "window"}).snapshot(
            "history")
    shutil.rmtree(copy / APP_ID / "1_0")
    time_first = b"\x00" + (60_000).to_bytes(8, "big") + b"p07" + bytes(4)  # KIP-825's
    _store_with_families(copy / APP_ID / "1_0" / "final" / "final.0", [], key=time_first)
    with pytest.raises(KafkaStreamsStateError, match="time-ordered store"):
        sk.open_kafka_streams(copy, APP_ID, store_kinds={"final": "window"}).snapshot("final")


def _store_with_families(path, families, key=b"k"):
    from rocksdict import Options, Rdict

    path.parent.mkdir(parents=True)
    options = Options(raw_mode=True)
    options.create_missing_column_families(True)
    db = Rdict(str(path), options=options,
               column_families={f: Options(raw_mode=True) for f in families})
    db[key] = b"v"
    db.close()
