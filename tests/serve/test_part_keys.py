"""Keys of an attached query's part: checked by their Spark types, stored as the changelog
stores them, placed by the part's placement columns only (pure logic: the routing against
real Spark placement is in tests/live/test_live.py)."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

from statekit.errors import BadArgument
from statekit.model.changelog_record import encode_json
from statekit.model.store_schema import PartShape, StoreSchema
from statekit.serve.part_keys import PartKeyCodec, key_codec
from statekit.serve.routing.key_codec import KeyCodec
from statekit.serve.routing.placement import pmod
from statekit.serve.routing.value_hash import spark_hash

JOIN = PartShape("own", 1, "symmetricHashJoin", "join", "store", "left-keyWithIndexToValue",
                 ("field0", "index"), ("who", "ts", "matched"), ("field0",))
JOIN_TYPES = {"field0": "string", "index": "bigint"}
DEDUP = PartShape("own", 2, "dedupeWithinWatermark", "deduplication", "store", "default",
                  ("player", "ts"), ("expires",))
DEDUP_TYPES = {"player": "string", "ts": "timestamp"}


def test_the_placement_columns_alone_are_hashed():
    codec = PartKeyCodec(JOIN, JOIN_TYPES, partitions=5)
    expected = pmod(spark_hash(["p07"], ["string"]), 5)
    assert {codec.partition(codec.key({"field0": "p07", "index": i})) for i in range(20)} == \
        {expected}


def test_a_time_is_taken_in_any_form_and_stored_as_the_changelog_stores_it():
    codec = PartKeyCodec(DEDUP, DEDUP_TYPES, partitions=3)
    forms = ["2026-01-05T10:00:00.250Z", "2026-01-05 10:00:00.25", 1767607200250,
             dt.datetime(2026, 1, 5, 10, 0, 0, 250000), np.datetime64("2026-01-05T10:00:00.250")]
    located = {codec.locate({"player": "p07", "ts": form}) [:2] for form in forms}
    assert len(located) == 1
    [(partition, data)] = located
    assert data == encode_json({"player": "p07", "ts": dt.datetime(2026, 1, 5, 10, 0, 0, 250000)},
                              ["player", "ts"])
    micros = int(dt.datetime(2026, 1, 5, 10, 0, 0, 250000, tzinfo=dt.UTC).timestamp() * 10**6)
    assert partition == pmod(spark_hash(["p07", micros], ["string", "bigint"]), 3)


def test_a_time_past_2262_is_placed_in_microseconds_as_spark_places_it():
    """pandas holds nanoseconds only to 2262: a part's time is hashed from its milliseconds,
    not through a nanosecond timestamp (which overflowed)."""
    codec = PartKeyCodec(DEDUP, DEDUP_TYPES, partitions=3)
    ms = 32503680000000  # 3000-01-01T00:00Z
    partition, data, _ = codec.locate({"player": "p07", "ts": "3000-01-01T00:00Z"})
    assert partition == pmod(spark_hash(["p07", ms * 1000], ["string", "bigint"]), 3)
    assert data == b'{"player":"p07","ts":"3000-01-01T00:00:00.000Z"}'


def test_a_null_key_value_leaves_the_hash_as_spark_does():
    codec = PartKeyCodec(DEDUP, DEDUP_TYPES, partitions=7)
    assert codec.partition(codec.key({"player": None, "ts": 0})) == \
        pmod(spark_hash([0], ["bigint"]), 7)
    assert codec.store_key(codec.key({"player": None, "ts": 0})).startswith(b'{"player":null')


@pytest.mark.parametrize(("key", "named"), [
    ({"player": 7, "ts": 0}, "bad key player: 7; accepted: a string value"),
    ({"player": "p07"}, r"missing \['ts'\]"),
    ({"player": "p07", "ts": "yesterday"}, "bad ts: 'yesterday'"),
    ({"player": "p07", "ts": True}, "bad ts: True"),
    ("[1, 2]", "accepted: a dict of the key columns"),
    ({"player": "x" * 300, "ts": 0}, "text of at most 256 characters"),
])
def test_bad_keys_are_refused_naming_the_value(key, named):
    codec = PartKeyCodec(DEDUP, DEDUP_TYPES, partitions=3)
    with pytest.raises(BadArgument, match=named):
        codec.locate(key)


def test_json_keys_name_only_key_columns_and_the_schema_says_so():
    codec = PartKeyCodec(DEDUP, DEDUP_TYPES, partitions=3)
    assert codec.parse('{"player": "p07", "ts": 0}') == {"player": "p07", "ts": 0}
    with pytest.raises(BadArgument, match=r"\(not \['expires'\]\)"):
        codec.parse('{"player": "p07", "ts": 0, "expires": 1}')
    schema = codec.json_schema()
    assert schema["required"] == ["player", "ts"] and not schema["additionalProperties"]


def test_a_part_placed_by_a_struct_is_refused_by_name():
    shape = PartShape("own", 3, "transformWithStateInPandasExec", "transform_with_state",
                      "state variable", "seen", ("k",), ("v",))
    with pytest.raises(BadArgument, match=r"bad part: '3/seen'.*\{'k': 'struct<a:int>'\}"):
        PartKeyCodec(shape, {"k": "struct<a:int>"}, partitions=2)


def test_the_schema_picks_the_codec():
    assert isinstance(key_codec(StoreSchema(None, DEDUP_TYPES, 3, part=DEDUP)), PartKeyCodec)
    from statekit.datasets import GAME_SPEC
    assert isinstance(key_codec(StoreSchema(GAME_SPEC, {"player": "string"}, 3)), KeyCodec)


def test_dates_and_bytes_are_stored_as_sparks_json_writes_them_and_hashed_as_values():
    shape = PartShape("own", 0, "stateStoreSave", "aggregation", "store", "default",
                      ("day", "blob"), ("n",))
    codec = PartKeyCodec(shape, {"day": "date", "blob": "binary"}, partitions=4)
    partition, data, _ = codec.locate({"day": dt.date(2026, 1, 5), "blob": b"\x00\xff"})
    assert data == b'{"day":"2026-01-05","blob":"AP8="}'
    assert codec.locate({"day": "2026-01-05", "blob": b"\x00\xff"})[:2] == (partition, data)
    assert partition == pmod(spark_hash([dt.date(2026, 1, 5), b"\x00\xff"],
                                        ["date", "binary"]), 4)
    assert codec.locate({"day": "2026-01-05", "blob": "AP8="})[:2] == (partition, data)  # JSON
    with pytest.raises(BadArgument, match="bad key blob: 'not base64!'; accepted: bytes, or"):
        codec.locate({"day": "2026-01-05", "blob": "not base64!"})
    with pytest.raises(BadArgument, match="bad key day: 5; accepted: a date"):
        codec.locate({"day": 5, "blob": b""})


MAP = PartShape("own", 0, "transformWithStateInPandasExec", "transform_with_state",
                "state variable", "best", ("player", "item"), ("value_score",), ("player",))
MAP_TYPES = {"player": "string", "item": "string"}


def test_a_map_states_grouping_key_alone_asks_for_every_entry_under_it():
    codec = PartKeyCodec(MAP, MAP_TYPES, partitions=3)
    assert codec.prefix == ["player"]
    partition, data, row = codec.locate({"player": "p1"})
    assert codec.is_prefix(row) and row == {"player": "p1"}
    full = encode_json({"player": "p1", "item": "i0"}, ["player", "item"])
    assert full.startswith(data) and data == b'{"player":"p1",'
    # not a prefix of another player's keys written the same way
    assert not encode_json({"player": "p10", "item": "i0"}, ["player", "item"]).startswith(data)
    # the partition is the full key's: Spark hashes the grouping key only
    assert partition == codec.locate({"player": "p1", "item": "i9"})[0]
    assert not codec.is_prefix(codec.locate({"player": "p1", "item": "i0"})[2])
    assert codec.json_schema()["required"] == ["player"]


@pytest.mark.parametrize("key", [{"item": "i0"}, {}, {"player": "p1", "nope": 1}])
def test_a_key_that_is_neither_whole_nor_the_grouping_key_is_refused(key):
    codec = PartKeyCodec(MAP, MAP_TYPES, partitions=3)
    with pytest.raises(BadArgument, match=r"each key column \['player', 'item'\], or only "
                                          r"\['player'\] for every entry under them"):
        codec.locate(key)


def test_a_part_placed_by_all_its_key_columns_takes_whole_keys_only():
    codec = PartKeyCodec(DEDUP, DEDUP_TYPES, partitions=3)
    assert codec.prefix is None
    with pytest.raises(BadArgument, match=r"missing \['ts'\]\)$"):
        codec.locate({"player": "p1"})
