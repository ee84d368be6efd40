"""A shared round's one Arrow read split back into each writer's share
(``statekit.changelog.shared_rounds.split_by_writer``), and a list part's records assembled
from what it read (``statekit.changelog.list_records.assemble``): pure, no Spark."""

from __future__ import annotations

import pyarrow as pa
import pytest

from statekit.changelog.list_records import ELEMENT, assemble
from statekit.changelog.shared_rounds import WRITER, split_by_writer
from statekit.errors import BadArgument


def _read(rows: list[tuple[int, int, int, str]]) -> pa.Table:
    writer, batch, partition, key = zip(*rows, strict=True) if rows else ([], [], [], [])
    return pa.table({WRITER: pa.array(writer, pa.int32()), "batch": pa.array(batch, pa.int64()),
                     "partition": pa.array(partition, pa.int32()),
                     "key": pa.array([k.encode() for k in key], pa.binary()),
                     "value": pa.array([None] * len(key), pa.binary())})


def test_each_writer_gets_its_rows_only_in_the_order_spark_read_them():
    table = _read([(0, 3, 1, "a1"), (1, 3, 0, "x1"), (0, 2, 1, "a0"), (0, 3, 1, "a2"),
                   (1, 3, 0, "x2"), (0, 3, 0, "b1"), (2, 2, 0, "y")])
    shares = split_by_writer(table, 3)
    assert [s.column("key").to_pylist() for s in shares] == [
        [b"a1", b"a0", b"a2", b"b1"], [b"x1", b"x2"], [b"y"]]
    for share in shares:
        assert share.column_names == ["batch", "partition", "key", "value"]


def test_a_writer_with_no_change_gets_an_empty_table_of_the_same_columns():
    shares = split_by_writer(_read([(1, 0, 0, "k")]), 3)
    assert [s.num_rows for s in shares] == [0, 1, 0]
    assert shares[0].schema == shares[1].schema
    assert [s.num_rows for s in split_by_writer(_read([]), 2)] == [0, 0]


def test_every_row_lands_in_exactly_one_share():
    rows = [(i % 4, i % 3, i % 2, f"k{i}") for i in range(200)]
    shares = split_by_writer(_read(rows), 4)
    assert sum(s.num_rows for s in shares) == 200
    for number, share in enumerate(shares):
        assert sorted(share.column("key").to_pylist()) == sorted(
            f"k{i}".encode() for i, r in enumerate(rows) if r[0] == number)


def test_a_table_without_the_writer_column_is_refused_naming_it():
    with pytest.raises(BadArgument, match=WRITER):
        split_by_writer(pa.table({"batch": [0]}), 1)


def _elements(rows: list[tuple[int, int, str, str | None, bool]]) -> pa.Table:
    batch, partition, key, value, element = zip(*rows, strict=True)
    return pa.table({"batch": pa.array(batch, pa.int64()),
                     "partition": pa.array(partition, pa.int32()),
                     "key": pa.array([k.encode() for k in key], pa.binary()),
                     "value": pa.array([None if v is None else v.encode() for v in value],
                                       pa.binary()),
                     ELEMENT: pa.array(element, pa.bool_())})


def test_a_touched_key_ships_its_whole_list_after_each_batch_in_the_order_read():
    read = _elements([
        (4, 1, "k1", None, False), (4, 1, "k1", None, False),     # both stores name it
        (5, 0, "k2", None, False), (5, 1, "k1", None, False),
        (4, 1, "k1", '{"x":1}', True), (4, 1, "k9", '{"x":9}', True),  # k9 not touched
        (4, 1, "k1", '{"x":2}', True),
        (5, 1, "k1", '{"x":2}', True)])                            # k2 holds none after 5
    records = assemble(read).to_pylist()
    assert records == [
        {"batch": 4, "partition": 1, "key": b"k1", "value": b'{"rows":[{"x":1},{"x":2}]}'},
        {"batch": 5, "partition": 0, "key": b"k2", "value": None},
        {"batch": 5, "partition": 1, "key": b"k1", "value": b'{"rows":[{"x":2}]}'}]


def test_a_batch_that_touched_no_key_ships_nothing_whatever_the_part_holds():
    read = _elements([(2, 0, "k1", '{"x":1}', True), (3, 0, "k1", '{"x":1}', True)])
    assert assemble(read).num_rows == 0
