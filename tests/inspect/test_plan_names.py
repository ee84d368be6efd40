"""The person's names read from a streaming query's plan (``statekit.inspect.plan_names``) and
given to the state's fields (``statekit.inspect.flatten``): pure, on plan lines as Spark 4
prints them for ``StreamingQuery.explain(extended=True)`` (taken from real queries: a rate
source grouped by a window and an expression, and a stream-stream join).

The attached queries that read these names live are in tests/live/test_live.py."""

from __future__ import annotations

from pyspark.sql.types import (
    BooleanType,
    DecimalType,
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from statekit.inspect.flatten import flat_columns
from statekit.inspect.plan_names import Derived, PartNames, attribute_name, plan_names

#: a rate source grouped by a 5 s window and ``(value % 3).alias("k")``, aggregated by
#: avg, round(avg) (the same avg), count twice, a decimal sum, first, stddev, a string min
WINDOWED = """\
== Optimized Logical Plan ==
~WriteToDataSourceV2 RelationV2[] noop-table, MicroBatchWrite[epoch: 23, writer: NoopStreamingWrite]
+- ~Aggregate [window#29-T5000ms, _groupingexpression#140L], [window#29-T5000ms, _groupingexpression#140L AS k#2L, avg(value#1L) AS a#3, round(avg(value#1L), 1) AS r#4, count(1) AS n#5L, count(1) AS n2#6L, sum(cast(value#1L as decimal(10,2))) AS dsum#7, first(value#1L, false) AS f#8L, stddev(cast(value#1L as double)) AS sd#9, min(cast(value#1L as string)) AS smin#10]
   +- ~Project [...]

== Physical Plan ==
WriteToDataSourceV2 MicroBatchWrite[epoch: 23, writer: NoopStreamingWrite]
+- SortAggregate(key=[window#29-T5000ms, _groupingexpression#140L], functions=[avg(value#1L), count(1), sum(cast(value#1L as decimal(10,2))), first(value#1L, false), stddev(cast(value#1L as double)), min(cast(value#1L as string))], output=[window#29-T5000ms, k#2L, a#3, r#4, n#5L, n2#6L, dsum#7, f#8L, sd#9, smin#10])
   +- *(4) Sort [window#29-T5000ms ASC NULLS FIRST, _groupingexpression#140L ASC NULLS FIRST], false, 0
      +- StateStoreSave [window#29-T5000ms, _groupingexpression#140L], state info [ checkpoint = file:/tmp/tmp3x2yeesw/agg/state, runId = 610fbc03-b918-4766-bfe4-4f8ba598ebe8, opId = 0, ver = 23, numPartitions = 3] stateStoreCkptIds = None, Append, 1796541139236, 1796541140236, 2
         +- SortAggregate(key=[window#29-T5000ms, _groupingexpression#140L], functions=[merge_avg(value#1L), merge_count(1), merge_sum(cast(value#1L as decimal(10,2))), merge_first(value#1L, false), merge_stddev(cast(value#1L as double)), merge_min(cast(value#1L as string))], output=[window#29-T5000ms, _groupingexpression#140L, sum#67, count#68L, count#70L, sum#73, isEmpty#74, first#77L, valueSet#78, n#43, avg#44, m2#45, min#80])
            +- *(3) Sort [window#29-T5000ms ASC NULLS FIRST, _groupingexpression#140L ASC NULLS FIRST], false, 0
"""  # noqa: E501

#: ``origin = airport`` between two rate sources, the join as operator 1
JOIN = """\
== Optimized Logical Plan ==
~WriteToDataSourceV2 RelationV2[] noop-table, MicroBatchWrite[epoch: 10, writer: NoopStreamingWrite]
+- ~Join Inner, (((origin#2 = airport#24) AND (ts#4-T10000ms >= rts#25-T10000ms + INTERVAL '-05' SECOND)) AND (ts#4-T10000ms <= rts#25-T10000ms + INTERVAL '05' SECOND))

== Physical Plan ==
WriteToDataSourceV2 MicroBatchWrite[epoch: 10, writer: NoopStreamingWrite]
+- StreamingSymmetricHashJoin [origin#2], [airport#24], Inner, condition = [ leftOnly = null, rightOnly = null, both = ((ts#4-T10000ms >= rts#25-T10000ms + INTERVAL '-05' SECOND) AND (ts#4-T10000ms <= rts#25-T10000ms + INTERVAL '05' SECOND)), full = ((ts#4-T10000ms >= rts#25-T10000ms + INTERVAL '-05' SECOND) AND (ts#4-T10000ms <= rts#25-T10000ms + INTERVAL '05' SECOND)) ], state info [ checkpoint = file:/tmp/tmpmsjwpx1g/join/state, runId = 7b398d13-6a28-478a-aee8-09ea0df6859b, opId = 1, ver = 10, numPartitions = 3] stateStoreCkptIds = None, 1796540918494, 1796540919494, state cleanup [ left value predicate: (ts#4-T10000ms <= 1796540914493000), right value predicate: (rts#25-T10000ms <= 1796540914493000) ], 2, Append
   :- Exchange hashpartitioning(origin#2, 3), REQUIRED_BY_STATEFUL_OPERATOR, [plan_id=1987]
"""  # noqa: E501


def test_an_aggregations_buffer_is_named_after_each_aggregates_alias():
    names = plan_names(WINDOWED)[0]["default"]
    # the grouping expression Spark names _groupingexpression is the output's k
    assert names.key == (None, "k")
    assert names.value == (
        "a_sum", "a_count",          # avg: Spark keeps sum and count
        "n",                         # count(1) once, for n and n2: the first alias
        "dsum_sum", "dsum_isEmpty",  # a decimal sum keeps whether it saw a value
        "f_first", "f_valueSet", "sd_n", "sd_avg", "sd_m2",
        "smin")                      # min, max, count and a plain sum are their result
    assert names.derived == (Derived("a", 0, 1),)


def test_a_join_names_each_sides_parts_by_its_join_columns():
    parts = plan_names(JOIN)[1]
    assert set(parts) == {"left", "left-keyToNumValues", "left-keyWithIndexToValue",
                          "right", "right-keyToNumValues", "right-keyWithIndexToValue"}
    assert parts["left-keyWithIndexToValue"] == PartNames(key=("origin",))
    assert parts["right"] == PartNames(key=("airport",))


def test_a_join_key_that_is_an_expression_keeps_spark_s_field_name():
    plan = JOIN.replace("StreamingSymmetricHashJoin [origin#2]",
                        "StreamingSymmetricHashJoin [upper(origin#2)]")
    parts = plan_names(plan)[1]
    assert "left" not in parts and parts["right"] == PartNames(key=("airport",))


def test_what_the_plan_does_not_tell_keeps_spark_s_names():
    assert plan_names("No physical plan. Waiting for data.\n") is None
    assert plan_names("") is None
    # two aggregates whose buffers statekit cannot place: the operator is left out
    unknown = WINDOWED.replace("merge_avg(", "merge_mystery(").replace(
        "merge_count(", "merge_other(")
    assert plan_names(unknown) == {}
    # one is placed between the known ones from both ends
    one = plan_names(WINDOWED.replace("first(value", "any_value(value"))[0]["default"]
    assert one.value[5:7] == ("f_first", "f_valueSet")
    # a list Spark shortened (spark.sql.debug.maxToStringFields)
    cut = WINDOWED.replace("m2#45, min#80])", "m2#45, ... 1 more fields])")
    assert plan_names(cut) == {}
    # buffer fields that are not the layout of their aggregate
    assert plan_names(WINDOWED.replace("count#68L, count#70L", "count#68L, n#70L")) == {}
    # an aggregate used only inside another expression keeps Spark's buffer names
    inner = plan_names(WINDOWED.replace("avg(value#1L) AS a#3, ", ""))[0]["default"]
    assert inner.value[:3] == (None, None, "n") and inner.derived == ()


def test_attribute_names():
    assert attribute_name("ts#4-T10000ms") == "ts"
    assert attribute_name("my col#12L") == "my col"
    assert attribute_name("avg(delay)#10") == "avg(delay)"
    assert attribute_name("(value#1L % 3)") is None
    assert attribute_name("a#1 + b#2") is None


def _schema(key: StructType, value: StructType) -> StructType:
    return StructType([StructField("key", key), StructField("value", value)])


def test_the_persons_names_are_given_first_and_a_value_field_of_the_same_name_is_prefixed():
    side = _schema(StructType([StructField("field0", StringType())]),
                   StructType([StructField("origin", StringType()),
                               StructField("delay", LongType())]))
    spark = [c.name for c in flat_columns(side)]
    assert spark == ["field0", "origin", "delay"]
    own = flat_columns(side, PartNames(key=("origin",)))
    assert [(c.name, c.field) for c in own] == [
        ("origin", "key.field0"), ("value_origin", "value.origin"), ("delay", "value.delay")]


def test_an_average_is_derived_only_from_a_double_sum_and_a_long_count():
    names = PartNames(value=("m_sum", "m_count", "n"), derived=(Derived("m", 0, 1),))
    key = StructType([StructField("k", StringType())])
    doubles = _schema(key, StructType([StructField("sum", DoubleType()),
                                       StructField("count", LongType()),
                                       StructField("count", LongType())]))
    columns = flat_columns(doubles, names)
    assert [c.name for c in columns] == ["k", "m", "m_sum", "m_count", "n"]
    assert columns[1].field == "value.sum / value.count" and columns[1].role == "value"
    decimals = _schema(key, StructType([StructField("sum", DecimalType(20, 2)),
                                        StructField("count", LongType()),
                                        StructField("isEmpty", BooleanType())]))
    assert [c.name for c in flat_columns(decimals, names)] == ["k", "m_sum", "m_count", "n"]
