"""Where a query's state lives on disk: the checkpoint's files by kind, the local folders."""

from __future__ import annotations

import pytest

from statekit.errors import BadArgument
from statekit.spark_state.disk import local_store_dirs, spark_local_root, state_on_disk


def _write(path, size):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)


def test_the_checkpoint_by_kind_and_the_local_store_folders(tmp_path):
    part = tmp_path / "ck" / "state" / "0" / "1"
    _write(part / "1.changelog", 10)
    _write(part / "2.changelog", 20)
    _write(part / "2.zip", 100)
    _write(part / "SSTs" / "000001-abc.sst", 1000)
    _write(part / "_metadata" / "schema", 5)
    local = tmp_path / "spark-1"
    _write(local / "StateStoreId(opId=0,partId=1,name=default)-x" / "workingDir-y" / "a.sst", 7)
    _write(local / "blockmgr-z" / "shuffle", 999)
    disk = state_on_disk(tmp_path / "ck", local_root=local).set_index("what")
    assert disk.loc["delta files (N.changelog, N.delta)", "bytes"] == 30
    assert disk.loc["delta files (N.changelog, N.delta)", "files"] == 2
    assert disk.loc["snapshots (N.zip, N.snapshot)", "bytes"] == 100
    assert disk.loc["shared SST files (SSTs/)", "bytes"] == 1000
    assert disk.loc["other (metadata, checksums)", "bytes"] == 5
    [row] = disk[disk["place"] == "local"].itertuples()
    assert row.bytes == 7 and row.files == 1 and "(1 store instance)" in row.Index
    assert len(local_store_dirs(local)) == 1


def test_no_local_root_and_bad_ones(tmp_path):
    assert set(state_on_disk(tmp_path)["place"]) == {"checkpoint"}
    with pytest.raises(BadArgument, match="local_root"):
        state_on_disk(tmp_path, local_root=tmp_path / "gone")
    with pytest.raises(BadArgument, match="classic SparkSession"):
        spark_local_root(object())
