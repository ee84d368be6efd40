"""check_restart of a person's own streaming DataFrame: rehearsed on a scratch copy of the
checkpoint (issue 41 item 1: "new: a streaming DataFrame about to be started"). Each verdict is
checked against Spark itself, the same changed query restarted for real on another copy, and
the checkpoint is byte for byte what it was. Input: the real flights (nulls in the delays),
as JSON files, aggregated by plain PySpark (no statekit in the job)."""

from __future__ import annotations

import shutil

import pytest
from helpers.tree import tree_digest
from pyspark.sql import functions as F

import statekit as sk
from statekit.datasets import FLIGHT_EVENT_SCHEMA, flights
from statekit.errors import BadArgument, CheckpointError
from statekit.query.restart_check import KEPT, REFUSED


def _write_flights(folder, part: int, rows: slice) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    lines = flights(limit=3000).records["value"].iloc[rows]
    (folder / f"part-{part}.json").write_text("\n".join(lines) + "\n")


def _events(spark, folder):
    return (spark.readStream.schema(FLIGHT_EVENT_SCHEMA).json(str(folder))
            .withWatermark("ts", "1 day"))


#: a folder of more flights, for the job that reads a second stream
_SECOND = None


def _base(events):
    return (events.groupBy(F.window("ts", "1 hour"), "origin")
            .agg(F.count("*").alias("flights"), F.sum("dep_delay").alias("delay")))


JOBS = {  # name: (the changed job, whether Spark starts it on the base job's checkpoint)
    "the same job": (_base, True),
    "a grouping column renamed (same type)": (
        lambda e: e.groupBy(F.window("ts", "1 hour"), F.col("origin").alias("airport"))
        .agg(F.count("*").alias("flights"), F.sum("dep_delay").alias("delay")), True),
    "a grouping column of another type": (
        lambda e: e.groupBy(F.window("ts", "1 hour"), "flight")
        .agg(F.count("*").alias("flights"), F.sum("dep_delay").alias("delay")), False),
    "a grouping column added": (
        lambda e: e.groupBy(F.window("ts", "1 hour"), "origin", "dest")
        .agg(F.count("*").alias("flights"), F.sum("dep_delay").alias("delay")), False),
    "an aggregate added": (
        lambda e: e.groupBy(F.window("ts", "1 hour"), "origin")
        .agg(F.count("*").alias("flights"), F.sum("dep_delay").alias("delay"),
             F.max("distance").alias("longest")), False),
    "an aggregate removed": (
        lambda e: e.groupBy(F.window("ts", "1 hour"), "origin")
        .agg(F.count("*").alias("flights")), False),
    "sum changed to avg": (
        lambda e: e.groupBy(F.window("ts", "1 hour"), "origin")
        .agg(F.count("*").alias("flights"), F.avg("dep_delay").alias("delay")), False),
    "the window's size": (
        lambda e: e.groupBy(F.window("ts", "2 hours"), "origin")
        .agg(F.count("*").alias("flights"), F.sum("dep_delay").alias("delay")), True),
    "a deduplication added before it": (
        lambda e: _base(e.dropDuplicatesWithinWatermark(["carrier", "flight", "ts"])), False),
    "a deduplication instead": (
        lambda e: e.dropDuplicatesWithinWatermark(["origin", "ts"]), False),
    "a second input stream": (
        lambda e: _base(e.unionByName(e.sparkSession.readStream.schema(FLIGHT_EVENT_SCHEMA)
                                      .json(str(_SECOND)).withWatermark("ts", "1 day"))),
        False),
}


@pytest.fixture(scope="module")
def base_run(spark, tmp_path_factory):
    """The base job over 2,000 flights in one batch (the batch a rehearsal runs again), then
    1,000 more flights for every restart to read."""
    root = tmp_path_factory.mktemp("rehearsal")
    folder, checkpoint = root / "in", root / "ck"
    _write_flights(folder, 0, slice(0, 2000))
    query = (_base(_events(spark, folder)).writeStream.format("noop").outputMode("update")
             .option("checkpointLocation", str(checkpoint)).trigger(once=True).start())
    query.awaitTermination(300)
    _write_flights(folder, 1, slice(2000, 3000))
    global _SECOND
    _SECOND = root / "second"
    _write_flights(_SECOND, 0, slice(2500, 3000))
    return folder, checkpoint


def _spark_restart(frame, checkpoint) -> bool:
    """Whether Spark itself runs ``frame`` restarted on ``checkpoint`` (statekit left out)."""
    try:
        query = (frame.writeStream.format("noop").outputMode("update")
                 .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True)
                 .start())
        query.awaitTermination(300)
        return True
    except Exception:  # noqa: BLE001 - any failure is Spark refusing the restart here
        return False


@pytest.mark.parametrize("change", list(JOBS))
def test_the_rehearsal_says_what_spark_does_at_the_restart(spark, base_run, tmp_path, change):
    job, starts = JOBS[change]
    folder, checkpoint = base_run
    before = tree_digest(checkpoint)
    check = sk.check_restart(job(_events(spark, folder)), checkpoint, output_mode="update")
    assert tree_digest(checkpoint) == before   # the checkpoint is not written
    copy = tmp_path / "ck"
    shutil.copytree(checkpoint, copy)
    assert _spark_restart(job(_events(spark, folder)), copy) is starts
    assert check.compatible is starts, str(check)
    if not starts:
        refused = check.refused.iloc[0]
        assert refused["verdict"] == REFUSED
        assert refused["remedy"].startswith(("start on a new", "change the query"))


def test_state_schemas_are_named_as_spark_names_them(spark, base_run):
    folder, checkpoint = base_run
    job = JOBS["a grouping column of another type"][0]
    check = sk.check_restart(job(_events(spark, folder)), checkpoint, output_mode="update")
    row = check.refused.iloc[0]
    assert row["what"].startswith("the state's key")
    assert "origin" in row["stored"] and "flight" in row["new"]
    assert "STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE" in row["spark"]
    assert "\tat " not in row["spark"] and "JVM stacktrace" not in row["spark"]


def test_a_setting_kept_from_the_checkpoint_is_named(spark, base_run):
    folder, checkpoint = base_run
    saved = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", str(int(saved) + 2))
    try:
        check = sk.check_restart(_base(_events(spark, folder)), checkpoint,
                                 output_mode="update")
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", saved)
    assert check.compatible
    kept = check.findings[check.findings["verdict"] == KEPT]
    assert kept["what"].str.contains("shuffle.partitions").any()


def test_the_rehearsal_runs_beside_the_running_job(spark, base_run, tmp_path):
    """The person's job may still run while they check its next version: the rehearsal has
    a query id of its own."""
    folder, checkpoint = base_run
    copy = tmp_path / "ck"
    shutil.copytree(checkpoint, copy)
    running = (_base(_events(spark, folder)).writeStream.format("noop").outputMode("update")
               .option("checkpointLocation", str(copy)).trigger(processingTime="1 second")
               .start())
    try:
        running.processAllAvailable()
        check = sk.check_restart(_base(_events(spark, folder)), copy, output_mode="update")
        assert check.compatible and running.isActive
    finally:
        running.stop()


def test_bad_input_to_a_rehearsal_is_named(spark, base_run, tmp_path):
    folder, checkpoint = base_run
    frame = _base(_events(spark, folder))
    with pytest.raises(BadArgument, match="bad output_mode: 'upsert'"):
        sk.check_restart(frame, checkpoint, output_mode="upsert")
    with pytest.raises(BadArgument, match="bad new: .*streaming DataFrame"):
        sk.check_restart(spark.range(3), checkpoint)
    with pytest.raises(BadArgument, match="bad event_schema"):
        sk.check_restart(frame, checkpoint, event_schema=FLIGHT_EVENT_SCHEMA)
    fresh = sk.check_restart(frame, tmp_path / "nothing-yet", output_mode="update")
    assert fresh.compatible and fresh.findings.empty


def test_the_rehearsal_reads_no_row(spark, base_run):
    """The empty batch reads nothing: new code that would fail on rows does not run, and the
    restart check answers for the state alone."""
    folder, checkpoint = base_run

    @F.udf("string")
    def airport(origin):
        raise ValueError(f"no airport called {origin}")

    frame = _base(_events(spark, folder)).withColumn("airport", airport("origin"))
    assert sk.check_restart(frame, checkpoint, output_mode="update").compatible


def test_a_state_file_spark_cannot_load_is_named_not_guessed(spark, base_run, tmp_path):
    """A damaged state file fails the batch's tasks: no verdict on the change, said so."""
    folder, checkpoint = base_run
    copy = tmp_path / "ck"
    shutil.copytree(checkpoint, copy)
    damaged = [*copy.glob("state/0/*/*.zip"), *copy.glob("state/0/*/*.changelog")]
    assert damaged
    for path in damaged:
        path.write_bytes(b"not a state file")
        path.with_name(f".{path.name}.crc").unlink(missing_ok=True)
    with pytest.raises(CheckpointError, match="could not be rehearsed.*tasks failed") as failed:
        sk.check_restart(_base(_events(spark, folder)), copy, output_mode="update")
    assert "\tat " not in str(failed.value) and "JVM stacktrace" not in str(failed.value)
