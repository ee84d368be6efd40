"""The state directory reader on small directories laid out as Kafka Streams 4.1 lays them
out (made here with rocksdict, no app): the common serdes, a timestamped store's two column
families, the offset checkpoint files and their bad forms, a running application's lock.
The real app's directories are read in test_state_dir.py."""

from __future__ import annotations

import fcntl
import json
import os
import struct
import subprocess
import sys

import pandas as pd
import pytest
from helpers.tree import tree_digest

import statekit as sk
from statekit.errors import BadArgument, KafkaStreamsStateError, StoreCorrupt
from statekit.kafka_streams.offset_checkpoint import read_offset_checkpoint


def _rocksdb(path, entries: dict, timestamped: dict | None = None):
    from rocksdict import Options, Rdict

    path.mkdir(parents=True)
    options = Options(raw_mode=True)
    options.create_missing_column_families(True)
    families = {"keyValueWithTimestamp": Options(raw_mode=True)} if timestamped else None
    db = Rdict(str(path), options=options, column_families=families)
    for key, value in entries.items():
        db[key] = value
    for key, value in (timestamped or {}).items():
        db.get_column_family("keyValueWithTimestamp")[key] = value
    db.close()
    (path / "rocksdict-config.json").unlink(missing_ok=True)


@pytest.fixture()
def state_dir(tmp_path):
    """``app``: task 0_0 with a timestamped key-value store ``totals`` (long values; one
    entry not upgraded yet, in ``default``) and task 0_1 with a session store ``visits``
    (JSON values), each with a ``.checkpoint``."""
    app = tmp_path / "app"
    stamp = struct.pack(">q", 1_000)
    _rocksdb(app / "0_0" / "rocksdb" / "totals", {b"old": struct.pack(">q", 7)},
             timestamped={b"a": stamp + struct.pack(">q", 42), b"b": stamp + struct.pack(">q", -1)})
    session_key = b"u1" + struct.pack(">qq", 90_000, 60_000)  # end, then start
    _rocksdb(app / "0_1" / "visits" / "visits.0", {session_key: json.dumps({"n": 3}).encode()})
    (app / "0_0" / ".checkpoint").write_text("0\n1\napp-totals-changelog 0 41\n")
    (app / "0_1" / ".checkpoint").write_text("0\n1\napp-visits-changelog 1 -4\n")
    (app / ".lock").touch()
    return tmp_path


def test_the_common_serdes_decode_each_store(state_dir):
    before = tree_digest(state_dir)
    state = sk.open_kafka_streams(state_dir, "app", value_serde="long")
    assert state.store_names() == ["totals", "visits"]
    totals = state.snapshot("totals", sort=True)
    assert totals["key"].tolist() == ["a", "b", "old"]
    assert totals["value"].tolist() == [42, -1, 7]
    assert totals["timestamp"].tolist()[:2] == [pd.Timestamp(1_000, unit="ms")] * 2
    assert pd.isna(totals["timestamp"].iloc[2])  # not upgraded yet: no timestamp
    visits = sk.open_kafka_streams(state_dir, "app", value_serde="json").snapshot("visits")
    assert visits.drop(columns="timestamp").to_dict("records") == [{
        "key": "u1", "window_start": pd.Timestamp(60_000, unit="ms"),
        "window_end": pd.Timestamp(90_000, unit="ms"), "value": {"n": 3}, "partition": 1}]
    assert visits["timestamp"].isna().all()  # a session store keeps no record timestamp
    stores = state.stores()
    assert stores[["task", "store", "kind", "format"]].to_dict("records") == [
        {"task": "0_0", "store": "totals", "kind": "key-value",
         "format": "timestamped key-value store"},
        {"task": "0_1", "store": "visits", "kind": "session",
         "format": "session store, 1 segments"}]
    assert stores["changelog_offset"].astype(object).where(
        stores["changelog_offset"].notna(), None).tolist() == [41, None]  # -4: not known
    assert state.checkpoints()["offset"].fillna(-1).tolist() == [41, -1]
    assert tree_digest(state_dir) == before


def test_bad_arguments_are_named(state_dir):
    with pytest.raises(BadArgument, match="'protobuf'.*'string'"):
        sk.open_kafka_streams(state_dir, "app", key_serde="protobuf")
    with pytest.raises(BadArgument, match="if_running"):
        sk.open_kafka_streams(state_dir, "app", if_running="wait")
    with pytest.raises(KafkaStreamsStateError, match=r"no application 'other'.*\['app'\]"):
        sk.open_kafka_streams(state_dir, "other")
    with pytest.raises(BadArgument, match="state_dir"):
        sk.open_kafka_streams(state_dir / "nowhere", "app")
    with pytest.raises(KafkaStreamsStateError, match="8-byte value is not a integer"):
        sk.open_kafka_streams(state_dir, "app", value_serde="integer").snapshot("totals")


def test_a_locked_directory_is_named_or_read(state_dir):
    with open(state_dir / "app" / ".lock", "r+") as lock:
        fcntl.lockf(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        # a lock this process holds is invisible to F_GETLK here: ask from a child
        code = ("import statekit as sk, sys; s = sk.open_kafka_streams(sys.argv[1], 'app'); "
                "print(s.running_pid)")
        out = subprocess.run([sys.executable, "-c", code, str(state_dir)], check=True,
                             capture_output=True, text=True).stdout
    assert out.strip() == str(os.getpid())
    assert sk.open_kafka_streams(state_dir, "app").running_pid is None


@pytest.mark.parametrize(("text", "problem"), [
    ("", "no version"), ("0\n2\nt 0 1\n", "2 entries announced, 1 found"),
    ("0\n1\nt 0\n", "malformed line"),
])
def test_a_damaged_checkpoint_file_is_named(tmp_path, text, problem):
    path = tmp_path / ".checkpoint"
    path.write_text(text)
    with pytest.raises(StoreCorrupt, match=problem):
        read_offset_checkpoint(path)
    assert read_offset_checkpoint(tmp_path / "absent") == {}
