"""Batches that changed nothing, told from the delta files Spark wrote for them
(``spark_files.batches_changed_nothing``, ``file_checks.delta_holds_no_rows``): True only when
every store of every partition has each batch's delta and each holds no row; any file with
a row, missing, cut short, named with a unique id or of another codec says False. (The
live check against Spark's own change feeds is in ``tests/live/test_live_tws.py``.)"""

from __future__ import annotations

import pytest

from statekit.spark_state.file_checks import EMPTY_DELTAS, LZ4_MAGIC, delta_holds_no_rows
from statekit.spark_state.spark_files import batches_changed_nothing

V1_EMPTY, V2_EMPTY = EMPTY_DELTAS
ONE_ROW_V1 = bytes.fromhex("00000001" "6b" "00000001" "76" "ffffffff")          # k -> v
ONE_DELETE_V2 = b"\x00\x02v2" + bytes.fromhex("10" "00000001" "6b" "ffffffff" "00")  # del k


def stored(content: bytes, blocks: int = 1) -> bytes:
    """``content`` as lz4-java writes a few bytes: stored blocks, then the closing block."""
    out, step = b"", max(1, -(-len(content) // blocks))
    for at in range(0, len(content), step):
        piece = content[at:at + step]
        out += LZ4_MAGIC + bytes([0x15]) + len(piece).to_bytes(4, "little") * 2 + bytes(4) + piece
    return out + LZ4_MAGIC + bytes([0x15]) + bytes(12)


@pytest.mark.parametrize("content", EMPTY_DELTAS)
def test_an_empty_delta_of_either_format_holds_no_rows(content):
    assert delta_holds_no_rows(stored(content))
    # Spark writes up to 32 KB a block (spark.io.compression.lz4.blockSize): an empty delta
    # split in two is not what it writes, and is read rather than told empty
    assert not delta_holds_no_rows(stored(content, blocks=2))


@pytest.mark.parametrize("data", [
    stored(ONE_ROW_V1), stored(ONE_DELETE_V2),
    stored(b"\x00\x02v3" + b"\x00\x02[]" + b"\xff\xff\xff\xff"),  # v3: a lineage, never matched
    stored(V1_EMPTY)[:-1], stored(V1_EMPTY)[:20], b"", stored(V1_EMPTY) + b"x",
    stored(b"\xff\xff\xff"), stored(V2_EMPTY + b"\x00"),
    # the same bytes in a compressed block (method 0x20): not read here, so not told empty
    LZ4_MAGIC + bytes([0x25]) + (4).to_bytes(4, "little") * 2 + bytes(4) + V1_EMPTY
    + LZ4_MAGIC + bytes([0x15]) + bytes(12),
    b"\x28\xb5\x2f\xfd" + bytes(40),  # a zstd frame: another codec
], ids=["v1-row", "v2-delete", "v3", "cut-1", "cut-20", "nothing", "trailing", "short-mark",
        "v2-extra", "compressed", "zstd"])
def test_a_delta_with_a_row_or_not_whole_or_unknown_is_not_told_empty(data):
    assert not delta_holds_no_rows(data)


def checkpoint(tmp_path, versions=(3, 4), partitions=2, stores=("",), ext="changelog",
               content=V1_EMPTY):
    for partition in range(partitions):
        for store in stores:
            folder = tmp_path / "ck" / "state" / "0" / str(partition) / store
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "SSTs").mkdir(exist_ok=True)
            for version in versions:
                (folder / f"{version}.{ext}").write_bytes(stored(content))
    return tmp_path / "ck"


def test_batches_whose_every_delta_is_empty_changed_nothing(tmp_path):
    ck = checkpoint(tmp_path)                        # versions 3 and 4: batches 2 and 3
    assert batches_changed_nothing(ck, 0, 2, 3, 2)
    assert batches_changed_nothing(str(ck), 0, 3, 3, 2)


@pytest.mark.parametrize("stores", [("",), ("left-keyToNumValues", "left-keyWithIndexToValue")])
def test_one_row_in_any_store_or_partition_means_changed(tmp_path, stores):
    ck = checkpoint(tmp_path, stores=stores)
    assert batches_changed_nothing(ck, 0, 2, 3, 2)
    (ck / "state" / "0" / "1" / stores[-1] / "4.changelog").write_bytes(stored(ONE_ROW_V1))
    assert not batches_changed_nothing(ck, 0, 2, 3, 2)
    assert batches_changed_nothing(ck, 0, 2, 2, 2)   # batch 2 alone is still idle


def test_the_hdfs_providers_empty_deltas_count_too(tmp_path):
    assert batches_changed_nothing(checkpoint(tmp_path, ext="delta"), 0, 2, 3, 2)


def test_a_missing_file_partition_or_operator_or_a_unique_id_means_not_known(tmp_path):
    ck = checkpoint(tmp_path)
    assert not batches_changed_nothing(ck, 0, 2, 4, 2)   # no 5.changelog
    assert not batches_changed_nothing(ck, 0, 2, 3, 3)   # no partition 2
    assert not batches_changed_nothing(ck, 1, 2, 3, 2)   # no operator 1
    assert not batches_changed_nothing(ck, 0, 3, 2, 2)   # an empty span
    folder = ck / "state" / "0" / "0"
    (folder / "4.changelog").rename(folder / "4_ab-12.changelog")
    assert not batches_changed_nothing(ck, 0, 2, 3, 2)   # checkpoint format v2: not looked at


def test_an_object_store_checkpoint_is_not_looked_at():
    assert not batches_changed_nothing("s3a://bucket/ck", 0, 2, 3, 2)
