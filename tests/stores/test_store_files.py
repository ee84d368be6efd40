"""The two files of a store directory: ``statekit-store.json`` and ``statekit-store.checkpoint``.

Each is owned by one class (``StoreMetadataFile``, ``OffsetCheckpointFile``): versioned,
written atomically, checked on read. Fast: no Spark, no Kafka, no RocksDB.
"""

from __future__ import annotations

import json
import os

import pytest

from statekit.errors import BadArgument, StoreCorrupt, StoreMismatch
from statekit.stores.metadata import STORE_FORMAT_VERSION, StoreMetadata
from statekit.stores.metadata_file import METADATA_FILE, StoreMetadataFile
from statekit.stores.offset_checkpoint import CHECKPOINT_FILE, OffsetCheckpointFile

META = StoreMetadata("counts", "window", 3, ("player", "window_start", "window_end"),
                     ("count",), "app-counts-changelog", 600_000)
#: ``statekit-store.json`` as statekit wrote it before this module (format_version 1).
WRITTEN_BEFORE = {"name": "counts", "kind": "window", "partition": 3,
                  "key_columns": ["player", "window_start", "window_end"],
                  "value_columns": ["count"], "changelog_topic": "app-counts-changelog",
                  "window_size_ms": 600000, "format_version": 1}


def write_json(path, data) -> None:
    path.write_text(json.dumps(data), encoding="utf-8")


# --- statekit-store.json ------------------------------------------------------------------
def test_metadata_round_trip(tmp_path):
    file = StoreMetadataFile(tmp_path)
    assert file.path == tmp_path / METADATA_FILE
    assert file.read() is None and not file.exists()
    file.write(META)
    assert file.read() == META
    assert json.loads(file.path.read_text()) == WRITTEN_BEFORE  # the format is unchanged
    kv = StoreMetadata("totals", "key-value", 0, ["player"])
    file.write(kv)
    assert file.read() == kv and file.read().value_columns is None


def test_metadata_written_by_earlier_statekit_reads(tmp_path):
    file = StoreMetadataFile(tmp_path)
    write_json(file.path, WRITTEN_BEFORE)
    assert file.read() == META
    unversioned = {k: v for k, v in WRITTEN_BEFORE.items() if k != "format_version"}
    write_json(file.path, unversioned)
    found = file.read()
    assert found == META and found.format_version == 1


def test_metadata_written_differently_reads(tmp_path):
    """Other key order, indentation, no optional fields, fields a later version may add."""
    file = StoreMetadataFile(tmp_path)
    file.path.write_text('{"partition":3,"kind":"window","name":"counts",\n'
                         '   "key_columns":["player"],"added_later":{"x":1}}')
    assert file.read() == StoreMetadata("counts", "window", 3, ("player",))


def test_metadata_of_a_newer_or_unknown_version_is_refused(tmp_path):
    file = StoreMetadataFile(tmp_path)
    write_json(file.path, {**WRITTEN_BEFORE, "format_version": STORE_FORMAT_VERSION + 1})
    with pytest.raises(StoreMismatch, match=(
            rf"statekit-store.json' was written in store format {STORE_FORMAT_VERSION + 1}, "
            rf"newer than format {STORE_FORMAT_VERSION}.*accepted 1.*upgrade statekit")):
        file.read()
    for bad in (0, -1, "1", 1.0, None, True):
        write_json(file.path, {**WRITTEN_BEFORE, "format_version": bad})
        with pytest.raises(StoreCorrupt, match=(
                rf"statekit-store.json' is unreadable \(store format_version {bad!r} is "
                rf"unknown; accepted 1 \(a file without one is read as 1\)\)")):
            file.read()


@pytest.mark.parametrize(("content", "named"), [
    ('{"name": "counts", "kind": "win', r"not JSON"),                      # truncated
    ("", r"not JSON"),
    ('["counts"]', r"a JSON list, not an object"),
    ({"kind": "window", "partition": 3, "key_columns": []}, r"no 'name': accepted an object"),
    ({**WRITTEN_BEFORE, "partition": "3"}, r"bad partition: '3'; accepted: a whole number"),
    ({**WRITTEN_BEFORE, "partition": -1}, r"bad partition: -1"),
    ({**WRITTEN_BEFORE, "kind": "table"}, r"bad store kind: 'table'; accepted: key-value"),
    ({**WRITTEN_BEFORE, "name": 7}, r"bad store name: 7"),
    ({**WRITTEN_BEFORE, "key_columns": "player"},
     r"key_columns 'player': accepted a list of column names\)"),
    ({**WRITTEN_BEFORE, "value_columns": [1]},
     r"value_columns \[1\]: accepted a list of column names, or null"),
    ({**WRITTEN_BEFORE, "window_size_ms": "10 minutes"}, r"bad window_size_ms: '10 minutes'"),
])
def test_bad_metadata_is_refused_naming_the_value(tmp_path, content, named):
    file = StoreMetadataFile(tmp_path)
    if isinstance(content, str):
        file.path.write_text(content)
    else:
        write_json(file.path, content)
    with pytest.raises(StoreCorrupt, match=named) as err:
        file.read()
    assert str(file.path) in str(err.value) and "delete the directory" in str(err.value)


def test_metadata_write_refuses_what_it_could_not_read_back(tmp_path):
    file = StoreMetadataFile(tmp_path)
    with pytest.raises(BadArgument, match="store metadata"):
        file.write({"name": "counts"})
    newer = StoreMetadata("counts", "key-value", 0, ["player"],
                          format_version=STORE_FORMAT_VERSION + 1)
    with pytest.raises(BadArgument, match="store format_version"):
        file.write(newer)
    assert not file.exists()


def test_metadata_check_names_the_difference(tmp_path):
    file = StoreMetadataFile(tmp_path)
    file.check(META, StoreMetadata("counts", "window", 3, ()), layout=False)
    file.check(META, StoreMetadata("counts", "window", 3, META.key_columns))
    with pytest.raises(StoreMismatch, match=r"its partition is 3, not 1; open it with "
                                            r"partition=3"):
        file.check(META, StoreMetadata("counts", "window", 1, ()), layout=False)
    with pytest.raises(StoreMismatch, match=r"with window_size_ms 600000, not 60000"):
        file.check(META, StoreMetadata("counts", "window", 3, META.key_columns,
                                       window_size_ms=60_000))


# --- statekit-store.checkpoint ------------------------------------------------------------
def test_checkpoint_round_trip(tmp_path):
    file = OffsetCheckpointFile(tmp_path)
    assert file.path == tmp_path / CHECKPOINT_FILE
    assert file.read() == {}
    file.write({3: 1200, 0: 7})
    assert file.read() == {0: 7, 3: 1200}
    assert json.loads(file.path.read_text()) == {"format_version": 1,
                                                 "offsets": {"0": 7, "3": 1200}}
    file.write({})
    assert file.read() == {}


def test_checkpoint_written_by_earlier_statekit_or_differently_reads(tmp_path):
    file = OffsetCheckpointFile(tmp_path)
    write_json(file.path, {"format_version": 1, "offsets": {"0": 50, "3": 7}})
    assert file.read() == {0: 50, 3: 7}
    write_json(file.path, {"offsets": {"3": 7, "0": 50}})                 # no version: 1
    assert file.read() == {0: 50, 3: 7}
    file.path.write_text('{ "offsets" : { "12" : 0 , "007": 9 }, "note": "by hand" }')
    assert file.read() == {7: 9, 12: 0}


def test_checkpoint_of_a_newer_or_unknown_version_is_refused(tmp_path):
    file = OffsetCheckpointFile(tmp_path)
    write_json(file.path, {"format_version": 2, "offsets": {"0": 1}})
    with pytest.raises(StoreMismatch, match=r"statekit-store.checkpoint' was written in offset "
                                            r"checkpoint format 2, newer than format 1"):
        file.read()
    write_json(file.path, {"format_version": "one", "offsets": {"0": 1}})
    with pytest.raises(StoreCorrupt, match=r"offset checkpoint format_version 'one' is unknown; "
                                           r"accepted 1"):
        file.read()


@pytest.mark.parametrize(("content", "named"), [
    ('{"format_version": 1, "offsets": {"0": 5', r"not JSON"),            # truncated
    ("[]", r"a JSON list, not an object"),
    ('{"format_version": 1}', r"offsets None: accepted an object of a changelog partition"),
    ('{"offsets": [[0, 5]]}', r"offsets \[\[0, 5\]\]: accepted an object"),
    ('{"offsets": {"0": -1}}', r"offset -1 of partition 0: accepted a whole number >= 0"),
    ('{"offsets": {"0": 1.5}}', r"offset 1.5 of partition 0"),
    ('{"offsets": {"0": "5"}}', r"offset '5' of partition 0"),
    ('{"offsets": {"0": true}}', r"offset True of partition 0"),
    ('{"offsets": {"0": null}}', r"offset None of partition 0"),
    ('{"offsets": {"-1": 5}}', r"partition '-1': accepted a whole number >= 0"),
    ('{"offsets": {"p0": 5}}', r"partition 'p0'"),
    ('{"offsets": {"1.0": 5}}', r"partition '1.0'"),
    ('{"offsets": {" 1": 5}}', r"partition ' 1'"),
    ('{"offsets": {"": 5}}', r"partition ''"),
    ('{"offsets": {"3": 5, "03": 6}}', r"partition '03' appears twice"),
])
def test_bad_checkpoint_is_refused_naming_the_value(tmp_path, content, named):
    file = OffsetCheckpointFile(tmp_path)
    file.path.write_text(content)
    with pytest.raises(StoreCorrupt, match=named) as err:
        file.read()
    assert str(file.path) in str(err.value)
    assert "delete it to restore the store from the changelog's start" in str(err.value)


@pytest.mark.parametrize(("offsets", "named"), [
    ({0: -1}, r" entry: \{0: -1\}"),
    ({-1: 5}, r" entry: \{-1: 5\}"),
    ({"0": 5}, r" entry: \{'0': 5\}"),
    ({0: 1.5}, r" entry: \{0: 1.5\}"),
    ({True: 1}, r" entry: \{True: 1\}"),
    ([(0, 1)], r": \[\(0, 1\)\]; accepted: a dict of"),
])
def test_checkpoint_write_refuses_bad_offsets_and_keeps_the_old(tmp_path, offsets, named):
    file = OffsetCheckpointFile(tmp_path)
    file.write({0: 50})
    with pytest.raises(BadArgument, match=rf"bad checkpoint offsets{named}"):
        file.write(offsets)
    assert file.read() == {0: 50}


def test_checkpoint_validate_takes_numpy_integers():
    np = pytest.importorskip("numpy")
    checked = OffsetCheckpointFile.validate({np.int32(2): np.int64(40)})
    assert checked == {2: 40} and all(type(v) is int for v in (*checked, *checked.values()))


# --- interrupted writes -------------------------------------------------------------------
@pytest.mark.parametrize("file_class", [StoreMetadataFile, OffsetCheckpointFile])
def test_a_leftover_temporary_file_changes_nothing(tmp_path, file_class):
    """A crash between write_atomic's temp file and its rename leaves ``.<name>.*.tmp``."""
    file = file_class(tmp_path)
    first, second = ((META, StoreMetadata("counts", "window", 3, ("player",)))
                     if file_class is StoreMetadataFile else ({0: 1}, {0: 2}))
    file.write(first)
    (tmp_path / f".{file.NAME}.k3x9.tmp").write_text('{"format_version": 1, "off')
    assert file.read() == first
    file.write(second)
    assert file.read() == second


@pytest.mark.parametrize("file_class", [StoreMetadataFile, OffsetCheckpointFile])
def test_a_write_that_fails_before_its_rename_leaves_the_old_file(tmp_path, file_class,
                                                                   monkeypatch):
    file = file_class(tmp_path)
    first, second = ((META, StoreMetadata("counts", "window", 3, ("player",)))
                     if file_class is StoreMetadataFile else ({0: 1}, {0: 2}))
    file.write(first)
    before = file.path.read_bytes()

    def crash(src, dst):
        raise OSError("simulated crash before the rename")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="simulated crash"):
        file.write(second)
    monkeypatch.undo()
    assert file.path.read_bytes() == before and file.read() == first
    assert sorted(p.name for p in tmp_path.iterdir()) == [file.NAME]  # no temp file left
