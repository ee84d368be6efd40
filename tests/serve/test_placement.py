"""Spark's state placement, reproduced: ``statekit.serve.routing.placement`` against SQL
``hash()`` and against the partition of every row of real streaming state.

Spark places a streaming aggregation's state with ``HashPartitioning`` on its grouping
expressions: ``pmod(hash(window, keys...), spark.sql.shuffle.partitions)`` for tumbling and
hopping windows, ``pmod(hash(keys...), n)`` for session windows. The last tests run real
queries (tumbling, hopping, session; string, double, int and bigint keys, nulls among them;
two and three keys; 4, 3 and 5 state partitions) and check ``state_partition`` and
``state_partitions`` on every row of their snapshots.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import random
import time

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import statekit as sk
from statekit.model.query_spec import QuerySpec, hopping, tumbling
from statekit.serve.routing.key_codec import KeyCodec
from statekit.serve.routing.placement import pmod, state_partition, state_partitions
from statekit.serve.routing.value_hash import kind_of, spark_hash

NAN = float("nan")
START = pd.Timestamp("2026-01-05 10:00")
END = START + pd.Timedelta("10min")

# --- known values -------------------------------------------------------------------------
#: Computed once with Spark 4.3's SQL ``hash()`` (``spark.sql("SELECT hash(...)")``; the -0.0
#: float from a DataFrame column holding -0.0) and hard-coded here.
KNOWN = [
    (["a"], ["string"], 1485273170),
    ([""], ["string"], 142593372),
    (["abc"], ["string"], 1322437556),        # 3 trailing bytes
    (["abcd"], ["string"], -396302900),       # one whole word
    (["abcde"], ["string"], 814637928),
    (["ü"], ["string"], -1098725648),         # 2 UTF-8 bytes, both > 127
    (["日本語"], ["string"], -1143049834),
    (["😀x"], ["string"], -1814635023),       # 4-byte code point
    ([1], ["int"], -559580957),
    ([1], ["bigint"], -1712319331),
    ([-1], ["int"], -1604776387),
    ([-1], ["bigint"], -939490007),
    ([2147483647], ["int"], 133916647),
    ([-9223372036854775808], ["bigint"], -853646085),
    ([7], ["smallint"], 1079293707),
    ([-7], ["tinyint"], -1618159745),
    ([True], ["boolean"], -559580957),        # as the int 1
    ([False], ["boolean"], 933211791),
    ([None], ["string"], 42),                 # a null leaves the seed
    ([None, "a"], ["string", "string"], 1485273170),
    ([0.0], ["double"], -1670924195),
    ([-0.0], ["double"], -1670924195),        # hash() itself maps -0.0 to 0.0
    ([NAN], ["double"], -1281358385),
    ([1.5], ["double"], 1290763749),
    ([-2.25], ["double"], 170083257),
    ([0.0], ["float"], 933211791),
    ([-0.0], ["float"], 933211791),
    ([NAN], ["float"], -349261430),
    ([1.5], ["float"], -221251528),
    ([pd.Timestamp("2026-01-05 10:00")], ["timestamp"], -896969259),
    ([pd.Timestamp("2026-01-05 10:00")], ["timestamp_ntz"], -896969259),
    ([pd.Timestamp("1969-12-31 23:59:59.999999")], ["timestamp_ntz"], -939490007),  # -1 us
    ([dt.date(2026, 1, 5)], ["date"], -1036763930),
    ([b"\x00\xff\x80"], ["binary"], -2052482636),
    (["a", 1, 2], ["string", "int", "bigint"], 1661356189),        # hash('a', 1, 2L)
    (["日本語", 3, -5], ["string", "int", "bigint"], 1100650197),
    # hash(named_struct('start', ts'2026-01-05 10:00', 'end', ts'... 10:10'), 'p07')
    ([START, END, "p07"], ["timestamp", "timestamp", "string"], -780583579),
]


@pytest.mark.parametrize(("values", "kinds", "expected"), KNOWN,
                         ids=[f"{k}:{v!r}" for v, k, _ in KNOWN])
def test_spark_hash_gives_sqls_known_values(values, kinds, expected):
    assert spark_hash(values, kinds) == expected


def test_a_windowed_row_lands_where_sql_pmod_puts_it():
    # SELECT pmod(hash(named_struct(start, end), 'p07'), 3) -> 2
    row = {"window_start": START, "window_end": END, "player": "p07"}
    assert state_partition(row, ["player"], windowed=True, partitions=3) == 2


def test_pmod_of_negative_hashes_is_never_negative():
    # Spark: pmod(hash(1L), 5) = 4 where hash(1L) % 5 = -1; pmod(hash(-1L), 200) = 193;
    # pmod(hash('日本語', 3, -5L), 11) = 9.
    assert spark_hash([1], ["bigint"]) < 0
    assert math.fmod(spark_hash([1], ["bigint"]), 5) == -1
    assert pmod(spark_hash([1], ["bigint"]), 5) == 4
    assert pmod(spark_hash([-1], ["bigint"]), 200) == 193
    assert state_partition({"k": 1}, ["k"], windowed=False, partitions=5) == 4
    assert state_partition({"k": -1}, ["k"], windowed=False, partitions=200) == 193
    row = {"name": "日本語", "level": 3, "region": -5}
    assert state_partition(row, ["name", "level", "region"], False, 11,
                           {"level": "int", "region": "bigint"}) == 9
    assert pmod(-7, 3) == 2 and pmod(7, 3) == 1 and pmod(0, 3) == 0


def test_one_partition_holds_everything():
    assert state_partition({"k": "x"}, "k", windowed=False, partitions=1) == 0


# --- int vs bigint, and how values are typed ------------------------------------------------
def test_an_int_and_a_bigint_key_hash_differently():
    row = {"level": 1}
    as_int = state_partition(row, ["level"], False, 200, {"level": "int"})
    as_bigint = state_partition(row, ["level"], False, 200, {"level": "bigint"})
    assert (as_int, as_bigint) == (pmod(-559580957, 200), pmod(-1712319331, 200))
    assert as_int != as_bigint
    # untyped: a Python int is a bigint, a NumPy int32 (an int column in pandas) an int
    assert state_partition(row, ["level"], False, 200) == as_bigint
    assert state_partition({"level": np.int32(1)}, ["level"], False, 200) == as_int
    assert kind_of(np.int8(1)) == kind_of(np.int16(1)) == "int"
    assert kind_of(np.int64(1)) == kind_of(1) == "bigint"
    assert kind_of(np.float32(1.5)) == "float" and kind_of(1.5) == "double"


def test_nulls_leave_the_running_hash_alone():
    typed = {"player": "string", "level": "int"}
    base = state_partition({"player": None, "level": 2}, ["player", "level"], False, 97, typed)
    assert base == pmod(spark_hash([2], ["int"]), 97)
    for null in (None, pd.NA, NAN):  # pandas holds a null int as NaN in a float column
        row = {"player": "p1", "level": null}
        assert state_partition(row, ["player", "level"], False, 97, typed) == \
            pmod(spark_hash(["p1"], ["string"]), 97)
    # ... but NaN in a double key is Spark's NaN, a value
    assert spark_hash([NAN], ["double"]) != spark_hash([None], ["double"]) == 42


def test_timestamps_are_utc_microseconds_however_given():
    micros = 1767607200000000  # 2026-01-05 10:00 UTC
    given = [START, START.tz_localize("UTC"), START.tz_localize("UTC").tz_convert("Asia/Tokyo"),
             START.to_pydatetime(), np.datetime64("2026-01-05T10:00"), micros]
    assert {spark_hash([t], ["timestamp"]) for t in given} == {-896969259}


# --- bad arguments --------------------------------------------------------------------------
def test_a_missing_group_key_is_named():
    with pytest.raises(sk.BadArgument, match=r"no group key 'level'.*\['player', 'level'\]"):
        state_partition({"player": "p1"}, ["player", "level"], False, 3)


def test_a_missing_window_column_is_named():
    with pytest.raises(sk.BadArgument, match="no 'window_end'.*window_start, window_end"):
        state_partition({"player": "p1", "window_start": START}, ["player"], True, 3)


def test_an_unknown_type_is_named_with_the_accepted_ones():
    with pytest.raises(sk.BadArgument, match="'varchar'.*string, int, bigint, timestamp"):
        state_partition({"player": "p1"}, ["player"], False, 3, {"player": "varchar"})
    with pytest.raises(sk.BadArgument, match="'decimal'"):   # even for a null value
        state_partition({"player": None}, ["player"], False, 3, {"player": "decimal"})
    with pytest.raises(sk.BadArgument, match="'decimal'"):
        spark_hash([1], ["decimal"])


def test_a_type_for_a_key_not_grouped_on_is_named():
    with pytest.raises(sk.BadArgument, match=r"key_types key: 'levle'.*\['player', 'level'\]"):
        state_partition({"player": "p1", "level": 1}, ["player", "level"], False, 3,
                        {"levle": "int"})


def test_a_value_of_no_spark_type_is_named():
    with pytest.raises(sk.BadArgument, match=r"group key value: \[1, 2\]"):
        state_partition({"k": [1, 2]}, ["k"], False, 3)


def test_an_int_key_that_a_float_holds_inexactly_is_named():
    # pandas holds a bigint column with nulls as float64: exact only up to 2**53
    assert state_partition({"k": 5.0}, ["k"], False, 7, {"k": "bigint"}) == \
        state_partition({"k": 5}, ["k"], False, 7, {"k": "bigint"})
    with pytest.raises(sk.BadArgument, match=r"bigint key value: 9.2\d*e\+18.*Int64"):
        state_partition({"k": 2.0**63}, ["k"], False, 7, {"k": "bigint"})
    with pytest.raises(sk.BadArgument, match=r"int key value: 1.5"):
        state_partition({"k": 1.5}, ["k"], False, 7, {"k": "int"})
    frame = pd.DataFrame({"k": [1.0, NAN, 2.0**60 + 1]})
    with pytest.raises(sk.BadArgument, match=r"bigint key value: 1.15\d*e\+18"):
        state_partitions(frame, ["k"], False, 7, {"k": "bigint"})
    assert state_partitions(frame.iloc[:2], ["k"], False, 7, {"k": "bigint"}).tolist() == [
        state_partition({"k": 1}, ["k"], False, 7, {"k": "bigint"}), pmod(42, 7)]


@pytest.mark.parametrize("bad", [0, -3, 2.0, True, "3"])
def test_bad_partitions_are_named(bad):
    with pytest.raises(sk.BadArgument, match=f"bad partitions: {bad!r}; accepted: a whole number "
                                             f">= 1"):
        state_partition({"k": "x"}, ["k"], False, bad)
    with pytest.raises(sk.BadArgument, match="bad partitions"):
        state_partitions(pd.DataFrame({"k": ["x"]}), ["k"], False, bad)


def test_a_frame_without_a_key_column_is_named():
    with pytest.raises(sk.BadArgument, match="missing column 'level'"):
        state_partitions(pd.DataFrame({"player": ["x"]}), ["player", "level"], False, 3)
    with pytest.raises(sk.BadArgument, match="missing column 'window_start'"):
        state_partitions(pd.DataFrame({"player": ["x"]}), ["player"], True, 3)


# --- the vectorized variant equals the scalar function --------------------------------------
def _random_text(rng: random.Random) -> str:
    alphabet = "ab zü日本語😀\x00é"
    return "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 14)))


def mixed_frame(rows: int = 1500, seed: int = 5) -> tuple[pd.DataFrame, dict[str, str]]:
    """Every supported type, with nulls, -0.0, NaN, extremes; and the columns' Spark types."""
    rng = random.Random(seed)
    doubles = [0.0, -0.0, NAN, 1.5, -2.25, 1e300, -math.inf, 5e-324]
    frame = pd.DataFrame({
        "window_start": pd.to_datetime(
            [START + pd.Timedelta(minutes=10 * rng.randrange(-500, 500)) for _ in range(rows)]),
        "text": [None if rng.random() < 0.05 else _random_text(rng) for _ in range(rows)],
        "i32": np.array([rng.randrange(-2**31, 2**31) for _ in range(rows)], dtype=np.int32),
        "i64": np.array([rng.choice([-2**63, 2**63 - 1, 0, rng.randrange(-2**63, 2**63)])
                         for _ in range(rows)], dtype=np.int64),
        "int_with_nulls": [NAN if rng.random() < 0.1 else float(rng.randrange(-99, 99))
                           for _ in range(rows)],
        "dbl": [rng.choice(doubles) if rng.random() < 0.5 else rng.uniform(-1e6, 1e6)
                for _ in range(rows)],
        "flt": np.array([rng.choice([0.0, -0.0, NAN, 1.5, rng.uniform(-9, 9)])
                         for _ in range(rows)], dtype=np.float32),
        "flag": [rng.random() < 0.5 for _ in range(rows)],
        "day": [None if rng.random() < 0.05
                else dt.date(1969, 12, 1) + dt.timedelta(rng.randrange(900)) for _ in range(rows)],
        "blob": [bytes(rng.randrange(256) for _ in range(rng.randrange(0, 9)))
                 for _ in range(rows)],
    })
    frame["window_end"] = frame["window_start"] + pd.Timedelta("10min")
    types = {"text": "string", "i32": "int", "i64": "bigint", "int_with_nulls": "int",
             "dbl": "double", "flt": "float", "flag": "boolean", "day": "date",
             "blob": "binary"}
    return frame, types


@pytest.mark.parametrize(("windowed", "partitions"), [(True, 3), (False, 7), (True, 200)])
def test_state_partitions_equals_state_partition_on_every_row(windowed, partitions):
    frame, types = mixed_frame()
    keys = list(types)
    rows = frame.to_dict("records")
    expected = [state_partition(row, keys, windowed, partitions, types) for row in rows]
    got = state_partitions(frame, keys, windowed, partitions, types)
    assert got.dtype.kind == "i" and got.tolist() == expected


def test_state_partitions_equals_state_partition_key_by_key():
    """One key at a time too, so that no column's difference hides behind the others."""
    frame, types = mixed_frame()
    rows = frame.to_dict("records")
    for key, kind in types.items():
        one = [state_partition(row, [key], False, 1_000_003, {key: kind}) for row in rows]
        got = state_partitions(frame, [key], False, 1_000_003, {key: kind})
        assert got.tolist() == one, key


def test_state_partitions_types_columns_by_dtype_as_state_partition_types_values():
    frame, _ = mixed_frame(rows=500)
    keys = ["text", "i32", "i64", "dbl", "flt", "flag", "day", "blob"]
    arrays = {c: frame[c].to_numpy() for c in [*keys, "window_start", "window_end"]}
    rows = [{c: a[i] for c, a in arrays.items()} for i in range(len(frame))]
    expected = [state_partition(row, keys, True, 7) for row in rows]
    assert state_partitions(frame, keys, True, 7).tolist() == expected


def test_state_partitions_reads_pandas_nullable_dtypes():
    frame = pd.DataFrame({
        "name": pd.array(["a", None, "日本語", ""], dtype="string"),
        "level": pd.array([1, None, -2**31, 7], dtype="Int32"),
        "region": pd.array([None, 2**63 - 1, -2**63, 0], dtype="Int64"),
        "flag": pd.array([True, None, False, True], dtype="boolean"),
        "score": pd.array([None, -0.0, 1.5, 2.0], dtype="Float64"),
    })
    types = {"name": "string", "level": "int", "region": "bigint", "flag": "boolean",
             "score": "double"}
    keys = list(types)
    plain = [{k: (None if pd.isna(v) else v) for k, v in row.items()}
             for row in frame.astype(object).to_dict("records")]
    expected = [state_partition(row, keys, False, 1_000_003, types) for row in plain]
    assert state_partitions(frame, keys, False, 1_000_003, types).tolist() == expected
    # and typed by dtype alone: string, Int32 -> int, Int64 -> bigint, boolean, Float64 -> double
    assert state_partitions(frame, keys, False, 1_000_003).tolist() == expected


# --- SQL hash() on a generated DataFrame ----------------------------------------------------
SCHEMA = ("s string, i int, l bigint, d double, f float, b boolean, ts_us bigint, day date, "
          "bin binary, sm smallint, tn tinyint")
COLUMNS = {"s": "string", "i": "int", "l": "bigint", "d": "double", "f": "float",
           "b": "boolean", "ts": "timestamp", "day": "date", "bin": "binary",
           "sm": "smallint", "tn": "tinyint"}


def generated_rows(n: int = 1500, seed: int = 11) -> list[tuple]:
    rng = random.Random(seed)

    def maybe(value):
        return None if rng.random() < 0.06 else value

    specials = [0.0, -0.0, NAN, math.inf, -math.inf, 5e-324, -1e308]
    rows = []
    for _ in range(n):
        rows.append((
            maybe(rng.choice(["", "a", "日本語", "😀", "Ωmega", "x" * rng.randrange(40)])
                  if rng.random() < 0.3 else _random_text(rng)),
            maybe(rng.choice([-2**31, 2**31 - 1, 0, rng.randrange(-2**31, 2**31)])),
            maybe(rng.choice([-2**63, 2**63 - 1, -1, rng.randrange(-2**63, 2**63)])),
            maybe(rng.choice(specials) if rng.random() < 0.4 else rng.uniform(-1e9, 1e9)),
            maybe(rng.choice([0.0, -0.0, NAN, rng.uniform(-1e3, 1e3)])),
            maybe(rng.random() < 0.5),
            maybe(rng.randrange(-2 * 10**15, 4 * 10**15)),   # ~1906 .. 2096, microseconds
            maybe(dt.date(1900, 1, 1) + dt.timedelta(rng.randrange(80000))),
            maybe(bytes(rng.randrange(256) for _ in range(rng.randrange(12)))),
            maybe(rng.randrange(-2**15, 2**15)),
            maybe(rng.randrange(-128, 128)),
        ))
    return rows


def test_spark_hash_equals_sql_hash_on_every_generated_row(spark):
    from pyspark.sql import functions as F

    raw = spark.createDataFrame(generated_rows(), SCHEMA)
    frame = raw.select("*", F.timestamp_micros("ts_us").alias("ts"))
    names = list(COLUMNS)
    hashes = [F.hash(c).alias(f"h_{c}") for c in names]
    window = F.struct(F.col("ts").alias("start"), (F.col("ts") + F.expr("INTERVAL 10 MINUTES"))
                      .alias("end"))
    checked = frame.select(
        *names, "ts_us", *hashes, F.hash(*names).alias("h_all"),
        F.hash(window, "s", "i").alias("h_window"),
        F.col("d").cast("string").alias("d_text")).collect()
    assert len(checked) == 1500
    assert any(r["d_text"] == "-0.0" for r in checked)  # a raw -0.0 reached hash()
    assert any(r["d_text"] == "NaN" for r in checked)
    wrong = []
    for r in checked:
        values = {c: r[c] for c in names}
        values["ts"] = r["ts_us"]   # microseconds, free of the local time zone of collect()
        for c in names:
            if spark_hash([values[c]], [COLUMNS[c]]) != r[f"h_{c}"]:
                wrong.append((c, values[c], r[f"h_{c}"]))
        if spark_hash([values[c] for c in names], [COLUMNS[c] for c in names]) != r["h_all"]:
            wrong.append(("all", values, r["h_all"]))
        end = None if values["ts"] is None else values["ts"] + 600_000_000
        if spark_hash([values["ts"], end, values["s"], values["i"]],
                      ["timestamp", "timestamp", "string", "int"]) != r["h_window"]:
            wrong.append(("window", values, r["h_window"]))
    assert wrong == []


def test_state_partitions_equals_sql_pmod_hash_over_what_pandas_gets(spark):
    """The frame path on what Spark hands to pandas: ``toPandas()`` (an int column with nulls
    becomes float64) and statekit's ``to_pandas(nullable_ints=True)`` (Int32, Int64, ...)."""
    from pyspark.sql import functions as F

    from statekit.spark_state.state_reader import to_pandas

    keys = [c for c in COLUMNS if c != "ts"]
    window = ["window_start", "window_end"]
    # a null double or float comes to pandas as NaN, which is a value: those rows are left out
    rows = (spark.createDataFrame(generated_rows(seed=12), SCHEMA)
            .where("d IS NOT NULL AND f IS NOT NULL")
            .select("*", F.timestamp_micros("ts_us").alias("window_start"))
            .withColumn("window_end", F.col("window_start") + F.expr("INTERVAL 10 MINUTES"))
            .withColumn("expected", F.pmod(F.hash(*window, *keys), F.lit(7)))
            .cache())
    try:
        plain = rows.where("l IS NOT NULL").toPandas()   # float64 would round big bigints
        nullable = to_pandas(rows, nullable_ints=True)
    finally:
        rows.unpersist()
    assert plain["i"].dtype == np.float64 and plain["i"].isna().any()
    assert str(nullable["l"].dtype) == "Int64" and nullable["l"].isna().any()
    for frame in (plain, nullable):
        got = state_partitions(frame, keys, True, 7, {c: COLUMNS[c] for c in keys})
        assert (got == frame["expected"].to_numpy()).all()


# --- the proof on real state ----------------------------------------------------------------
PLAYERS = ["p00", "p01", "p02", "p03", "p04", "p05", "p06", "p07", "p08", "p09", "p10", "p11",
           "p12", "p13", "p14", "p15", "jörg", "日本語", "😀", "", "Ωmega", "x" * 33, "a b", None]
LEVELS = [-3, -2, -1, 0, 1, 2, 2**31 - 1, -2**31, None]
REGIONS = [-2**63, 2**63 - 1, -1, 0, 7, 1_000_000_007]
BONUSES = [0.0, -0.0, NAN, 1.5, -2.25, 1e300, math.inf]
EVENT_SCHEMA = "player string, level int, region bigint, bonus double, ts timestamp, score bigint"
ROWS = 2400


def write_events(folder) -> None:
    """ROWS events over ~2 hours, 3 s apart with a 5-minute pause after every 400, in one
    parquet file; each player has one level and one region, and plays every bonus."""
    i = np.arange(ROWS)
    player = i % len(PLAYERS)
    seconds = i * 3 + 300 * (i // 400)
    columns = {
        "player": pa.array([PLAYERS[p] for p in player], pa.string()),
        "level": pa.array([LEVELS[p % len(LEVELS)] for p in player], pa.int32()),
        "region": pa.array([REGIONS[p % len(REGIONS)] for p in player], pa.int64()),
        # from_pandas=False: NaN stays NaN (not null)
        "bonus": pa.array([BONUSES[k % len(BONUSES)] for k in i // len(PLAYERS)], pa.float64(),
                          from_pandas=False),
        "ts": pa.array((START.value // 1000 + seconds * 1_000_000).tolist(),
                       pa.timestamp("us", tz="UTC")),
        "score": pa.array(i, pa.int64()),
    }
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns), folder / "events.parquet")


#: name: (window, keys, Spark types of the keys, state partitions)
QUERIES = {
    "tumbling": (sk.tumbling("10 minutes"), ["player", "bonus"],
                 {"player": "string", "bonus": "double"}, 4),   # statekit's own default
    "hopping": (sk.hopping("10 minutes", "5 minutes"), ["level", "region"],
                {"level": "int", "region": "bigint"}, 3),
    "session": (sk.session("3 minutes"), ["player", "level", "region"],
                {"player": "string", "level": "int", "region": "bigint"}, 5),
}


@pytest.fixture(scope="module")
def states(spark, tmp_path_factory):
    """name -> snapshot of every query of QUERIES, run (all at once) to the end of the events
    in one available-now batch. A query takes its settings as it starts: its state partitions
    from ``spark.sql.shuffle.partitions``, and no extra batch that only moves the watermark
    (nothing is evicted a day behind); the shared session gets its values back."""
    base = tmp_path_factory.mktemp("placement")
    write_events(base / "events")
    partitions_key, no_data_key = ("spark.sql.shuffle.partitions",
                                   "spark.sql.streaming.noDataMicroBatches.enabled")
    before = {key: spark.conf.get(key) for key in (partitions_key, no_data_key)}
    started = {}
    try:
        for name, (window, keys, _, partitions) in QUERIES.items():
            events = spark.readStream.schema(EVENT_SCHEMA).parquet(str(base / "events"))
            spark.conf.set(partitions_key, str(partitions))
            spark.conf.set(no_data_key, "false")
            try:
                started[name] = sk.start_query(
                    events, keys=keys, window=window, aggregates=["count", "sum(score)"],
                    watermark="1 day", spark=spark, checkpoint=str(base / name),
                    name=f"placement-{name}", trigger="available-now", changelog=False)
            finally:
                for key, value in before.items():
                    spark.conf.set(key, value)
        deadline = time.monotonic() + 240
        for name, query in started.items():
            query.query.awaitTermination(max(1.0, deadline - time.monotonic()))
            assert not query.is_active, f"query {name} did not finish its input in time"
            assert query.query.exception() is None, query.query.exception()
        return {name: query.snapshot() for name, query in started.items()}
    finally:
        for query in started.values():
            query.close()


@pytest.mark.parametrize("name", list(QUERIES))
def test_every_state_row_is_where_state_partition_says(states, name):
    window, keys, types, partitions = QUERIES[name]
    snapshot = states[name]
    windowed = window.kind != "session"
    assert len(snapshot) > 100
    # the state partitions follow spark.sql.shuffle.partitions at the query's start (4, 3, 5)
    assert set(snapshot["partition"]) == set(range(partitions))
    rows = snapshot.to_dict("records")
    placed = np.array([state_partition(row, keys, windowed, partitions, types) for row in rows])
    misplaced = snapshot[placed != snapshot["partition"].to_numpy()]
    assert misplaced.empty, misplaced.head(10).to_string()
    vectorized = state_partitions(snapshot, keys, windowed, partitions, types)
    assert (vectorized == snapshot["partition"].to_numpy()).all()
    # ... and the other rule would not do: the keys alone for a time window, the window as
    # well for a session
    other = [state_partition(row, keys, not windowed, partitions, types) for row in rows]
    assert (np.array(other) != snapshot["partition"].to_numpy()).sum() > len(rows) // 4


def test_the_state_holds_the_cases_the_proof_claims(states):
    tumbling = states["tumbling"]
    assert tumbling["player"].isna().any()                       # a null key
    assert {"", "日本語", "😀", "jörg", "x" * 33} <= set(tumbling["player"])
    spread = tumbling.dropna(subset=["player"]).groupby("player")["partition"].nunique()
    assert spread.max() > 1                     # one player's windows on several partitions
    hopping = states["hopping"]
    assert hopping["level"].isna().any()        # an int key with nulls: float64 in pandas
    assert {-2**31, 2**31 - 1} <= set(hopping["level"])
    assert {-2**63, 2**63 - 1} <= set(hopping["region"])
    assert (hopping["window_end"] - hopping["window_start"] == pd.Timedelta("10min")).all()
    assert hopping["window_start"].dt.minute.isin([5, 15]).any()   # overlapping windows
    session = states["session"]
    assert session.groupby("player", dropna=False).size().min() > 1   # several sessions a key
    assert (session["window_end"] - session["window_start"] > pd.Timedelta("3min")).all()


def test_the_state_holds_doubles_normalized(states):
    """-0.0 and 0.0 are one group (the state holds 0.0); NaN is one group, a value."""
    tumbling = states["tumbling"]
    bonus = tumbling["bonus"].to_numpy()
    zeros = bonus[bonus == 0.0]
    assert len(zeros) and not np.signbit(zeros).any()
    assert np.isnan(bonus).any() and np.isinf(bonus).any()
    kinds = np.where(np.isnan(bonus), "nan", bonus.astype(str))
    assert not tumbling.assign(kind=kinds).duplicated(
        ["window_start", "player", "kind"]).any()


@pytest.mark.parametrize("window", [tumbling("1 hour"), hopping("1 hour", "15 minutes")])
@pytest.mark.parametrize("keys", [["player"], ["team", "player"]])
def test_a_point_querys_key_is_located_as_its_parts_say(window, keys):
    """``locate`` (a one-pass path for string keys and int window starts) gives the
    partition, store bytes and row that ``partition``, ``store_key`` and the stored JSON
    give for the same key — for plain text, quotes, escapes and non-ASCII alike."""
    codec = KeyCodec(QuerySpec(keys=keys, window=window), dict.fromkeys(keys, "string"),
                     partitions=7)
    rng = random.Random(5)
    texts = ["p07", "", "é", "名前", 'say "hi"', "back\\slash", "tab\there", "p" * 41, "\x00"]
    step = codec.slide_ms
    for _ in range(400):
        key = {k: rng.choice(texts) + str(rng.randrange(1000)) for k in keys}
        key["window_start"] = step * rng.randrange(1, 10**6)
        full = codec.key(key)
        partition, data, row = codec.locate(key)
        assert partition == codec.partition(full) == state_partition(
            {**{k: key[k] for k in keys}, "window_start": full["window_start"] * 1000,
             "window_end": full["window_end"] * 1000}, keys, True, 7,
            dict.fromkeys(keys, "string")), key
        assert data == codec.store_key(full)
        assert row == json.loads(data)
    # keys the one-pass path leaves to the general one: still located, or named when bad
    assert codec.locate({**key, "window_start": np.int64(key["window_start"])})[1] == data
    assert codec.locate({**key, "window_start": row["window_start"]})[1] == data
    with pytest.raises(sk.BadArgument, match="lone|string"):
        codec.locate({**key, keys[0]: "\ud800"})
    with pytest.raises(sk.BadArgument, match="missing"):
        codec.locate({"window_start": key["window_start"]})
