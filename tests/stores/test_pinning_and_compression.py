"""What an open iterator pins on disk, and the same rows' size under each codec."""

from __future__ import annotations

import pandas as pd
import pytest

from statekit.errors import BadArgument
from statekit.stores import InMemoryKeyValueStore, RocksDBKeyValueStore
from statekit.stores.compression import CODECS, compressed_sizes, sst_size
from statekit.stores.pinning import STEPS, SstBytes, iterator_pinning


def _rows(n: int = 400) -> pd.DataFrame:
    return pd.DataFrame({"window_start": pd.Timestamp("2026-01-05 10:00"),
                         "player": [f"p{i:03d}" for i in range(n)],
                         "count": [i % 7 for i in range(n)]})


def _store(tmp_path, name="copy"):
    return RocksDBKeyValueStore(tmp_path / name, name, key_columns=["window_start", "player"],
                                value_columns=["count"])


def test_an_open_iterator_pins_the_deleted_version_until_closed(tmp_path):
    with _store(tmp_path) as store:
        steps = iterator_pinning(store, _rows())
        assert list(steps["step"]) == list(STEPS)
        assert list(steps["store_entries"]) == [400, 400, 0, 0]
        assert steps["iterator_reads"].iloc[2] == 400
        deleted, closed = steps.iloc[2], steps.iloc[3]
        assert deleted["live_bytes"] == 0 and deleted["pinned_bytes"] > 0
        assert deleted["versions"] >= 2
        assert closed["pinned_bytes"] == 0 and store.open_iterators == 0
        assert store.sst_bytes() == SstBytes(0, 0, store.sst_bytes().versions)


def test_pinning_needs_an_empty_rocksdb_key_value_store(tmp_path):
    with pytest.raises(BadArgument, match="RocksDBKeyValueStore"):
        iterator_pinning(InMemoryKeyValueStore("m", key_columns=["player"]), _rows())
    with _store(tmp_path) as store:
        store.put({"window_start": "2026-01-05T10:00:00.000Z", "player": "p1"}, {"count": 1})
        with pytest.raises(BadArgument, match="an empty store"):
            iterator_pinning(store, _rows())
    with _store(tmp_path, "other") as store:
        with pytest.raises(BadArgument, match="key columns"):
            iterator_pinning(store, _rows().drop(columns=["player"]))
        with pytest.raises(BadArgument, match="at least one"):
            iterator_pinning(store, [])


def test_every_codec_shrinks_repetitive_rows_and_zstd_most(tmp_path):
    sizes = compressed_sizes(_rows(), ["window_start", "player"], tmp_path)
    assert list(sizes["codec"]) == list(CODECS)
    by = sizes.set_index("codec")["sst_bytes"]
    assert by["none"] > max(by["snappy"], by["lz4"]) > by["zstd"] > 0
    assert sizes["ratio"].iloc[0] == 1.0 and (sizes["rows"] == 400).all()
    assert not any(tmp_path.iterdir())  # the databases measured are removed


def test_compression_names_bad_input(tmp_path):
    with pytest.raises(BadArgument, match="zlib"):
        sst_size([(b"k", b"v")], tmp_path / "db", "zlib")
    with pytest.raises(BadArgument, match="key_columns"):
        compressed_sizes(_rows(), ["team"], tmp_path)
    with pytest.raises(BadArgument, match="non-empty DataFrame"):
        compressed_sizes(_rows().iloc[:0], ["player"], tmp_path)


def test_a_store_directory_file_by_file(tmp_path):
    from statekit.stores.directory_files import ROLES, store_directory
    from statekit.stores.keyvalue import frame_entries

    with _store(tmp_path) as store:
        store.put_all(frame_entries(_rows(), store.key_columns, store.value_columns))
        store.write_checkpoint({0: 400})   # flushes the memtable to an SST file first
    files = store_directory(tmp_path / "copy").set_index("role")
    assert list(files.index) == list(ROLES)
    assert files.loc["identity (name, kind, partition, columns)", "files"] == 1
    assert files.loc["changelog offsets restored", "files"] == 1
    assert files.loc["data (SST files)", "bytes"] > 0
    assert "OffsetCheckpoint" in files.loc["changelog offsets restored", "kafka_streams"]
    with pytest.raises(BadArgument, match="statekit store directory"):
        store_directory(tmp_path)
    with pytest.raises(BadArgument, match="key columns"):
        frame_entries(_rows(), ["team"], ["count"])
