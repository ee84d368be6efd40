"""check_restart predicts what Spark does when a changed query restarts on a checkpoint, and
start_query refuses a restart Spark would fail, before it starts (issue 40: "start_query with a
different spec on an existing checkpoint starts, then fails 0.9 s later"; issue 41 item 1).

Every prediction is checked against Spark itself: the same change restarted on a copy of the
checkpoint by plain Spark, without statekit's check. The input is the real flights (nulls in
the delays), read from files."""

from __future__ import annotations

import dataclasses
import shutil

import pytest

import statekit as sk
from statekit.datasets import FLIGHT_EVENT_SCHEMA, flights
from statekit.errors import BadArgument, CorruptFile, IncompatibleRestart
from statekit.options.query import SourceOptions
from statekit.query.aggregation import aggregate
from statekit.query.restart_check import (
    KEPT,
    MEANING_CHANGES,
    REFUSED,
    check_restart,
    planned_state,
)
from statekit.query.source import source_events
from statekit.spark_state.checkpoint import Checkpoint
from statekit.spark_state.state_schema import stored_state_schema, type_text

BASE = sk.QuerySpec(keys=["origin"], window=sk.tumbling("1 hour"),
                    aggregates=["count", "sum(dep_delay)", "max(distance)"], event_time="ts",
                    watermark="1 day")
HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
PROVIDER = "spark.sql.streaming.stateStore.providerClass"


def _write_flights(folder, part: int, rows: slice) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    lines = flights(limit=3000).records["value"].iloc[rows]
    (folder / f"part-{part}.json").write_text("\n".join(lines) + "\n")


def _stream(spark, folder):
    return spark.readStream.text(str(folder))


def _start(spark, folder, spec, checkpoint, name):
    return sk.start_query(_stream(spark, folder), spec, spark=spark,
                          event_schema=FLIGHT_EVENT_SCHEMA, checkpoint=str(checkpoint),
                          name=name, trigger="available-now")


def _spark_restart(spark, folder, spec, checkpoint, conf=None) -> str:
    """What Spark does with ``spec`` restarted on ``checkpoint``, statekit's check left out:
    "ok", or the first line of its error."""
    events, _ = source_events(_stream(spark, folder), spark,
                              SourceOptions(event_schema=FLIGHT_EVENT_SCHEMA), [],
                              event_time=spec.event_time)
    saved = {key: spark.conf.get(key) for key in conf or {}}
    for key, value in (conf or {}).items():
        spark.conf.set(key, value)
    try:
        query = (aggregate(events, spec).writeStream.format("noop")
                 .outputMode("append" if spec.kind == "session" else "update")
                 .option("checkpointLocation", str(checkpoint))
                 .trigger(availableNow=True).start())
        query.awaitTermination(180)
        return "ok"
    except Exception as exc:  # noqa: BLE001 - the answer is Spark's error, whatever it is
        return str(exc).splitlines()[0]
    finally:
        for key, value in saved.items():
            spark.conf.set(key, value)


@pytest.fixture(scope="module")
def first_run(spark, tmp_path_factory):
    """BASE run once over the first 2,000 flights by start_query; then 1,000 more flights
    arrive, for every restart to read."""
    root = tmp_path_factory.mktemp("restart")
    folder, checkpoint = root / "in", root / "ck"
    _write_flights(folder, 0, slice(0, 2000))
    query = _start(spark, folder, BASE, checkpoint, "restart-base")
    query.wait_until_drained(timeout=300)
    query.close()
    _write_flights(folder, 1, slice(2000, 3000))
    return folder, checkpoint


def _copy(first_run, tmp_path):
    copy = tmp_path / "ck"
    shutil.copytree(first_run[1], copy)
    return copy


CHANGES = {  # name: (changed fields of BASE, the verdicts statekit predicts)
    "a key column renamed (same type)": (dict(keys=["carrier"]), {MEANING_CHANGES}),
    "a key column added": (dict(keys=["origin", "dest"]), {REFUSED}),
    "a key column of another type": (dict(keys=["flight"]), {REFUSED}),
    "an aggregate added": (dict(aggregates=["count", "sum(dep_delay)", "max(distance)",
                                            "min(arr_delay)"]), {REFUSED}),
    "an aggregate removed": (dict(aggregates=["count", "sum(dep_delay)"]), {REFUSED}),
    "two aggregates of one type swapped": (dict(aggregates=["sum(dep_delay)", "count",
                                                            "max(distance)"]),
                                           {MEANING_CHANGES}),
    "sum changed to avg": (dict(aggregates=["count", "avg(dep_delay)", "max(distance)"]),
                           {REFUSED}),
    "an aggregate's column changed (same type)": (dict(aggregates=["count", "sum(dep_delay)",
                                                                   "max(flight)"]),
                                                  {MEANING_CHANGES}),
    "the window's size": (dict(window=sk.tumbling("2 hours")), {MEANING_CHANGES}),
    "a hopping window instead": (dict(window=sk.hopping("1 hour", "30 minutes")),
                                 {MEANING_CHANGES}),
    "a session window instead": (dict(window=sk.session("30 minutes")), {REFUSED}),
    "no window": (dict(window=None), {REFUSED}),
    "a running aggregate with a TTL": (dict(window=None, ttl="1 hour"), {REFUSED}),
    "the watermark": (dict(watermark="2 hours"), set()),
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_the_prediction_is_what_spark_does_at_the_restart(spark, first_run, tmp_path, change):
    fields, verdicts = CHANGES[change]
    spec = dataclasses.replace(BASE, **fields)
    copy = _copy(first_run, tmp_path)
    check = check_restart(spec, copy, event_schema=FLIGHT_EVENT_SCHEMA, spark=spark)
    print(f"\n{change}: {check}")
    assert set(check.findings["verdict"]) == verdicts
    spark_did = _spark_restart(spark, first_run[0], spec, copy)
    print(f"Spark: {spark_did}")
    assert check.compatible == (spark_did == "ok"), spark_did
    for finding in check.findings.itertuples():
        if finding.verdict == REFUSED:
            assert f"[{finding.spark}]" in spark_did


@pytest.mark.parametrize("key,value,what", [
    ("spark.sql.shuffle.partitions", "5", "state partitions"),
    (PROVIDER, HDFS, "state store provider")])
def test_a_setting_spark_keeps_from_the_checkpoint_is_named_and_kept(spark, first_run,
                                                                      tmp_path, key, value,
                                                                      what):
    copy = _copy(first_run, tmp_path)
    stored = Checkpoint(copy).offset_metadata(0)["conf"][key]
    saved = spark.conf.get(key)
    spark.conf.set(key, value)
    try:
        check = check_restart(BASE, copy, event_schema=FLIGHT_EVENT_SCHEMA, spark=spark)
    finally:
        spark.conf.set(key, saved)
    [finding] = check.findings.itertuples()
    assert (finding.verdict, finding.stored, finding.new) == (KEPT, stored, value)
    assert what in finding.what and check.compatible
    assert _spark_restart(spark, first_run[0], BASE, copy, {key: value}) == "ok"
    after = Checkpoint(copy)
    assert after.offset_metadata(after.last_batch)["conf"][key] == stored   # as predicted


def test_start_query_refuses_a_restart_spark_would_fail_before_it_starts(spark, first_run,
                                                                          tmp_path):
    copy = _copy(first_run, tmp_path)
    offsets = sorted(p.name for p in (copy / "offsets").iterdir())
    spec = dataclasses.replace(BASE, keys=["origin", "dest"])
    with pytest.raises(IncompatibleRestart) as info:
        _start(spark, first_run[0], spec, copy, "restart-refused")
    message = str(info.value)
    print(f"\n{message}")
    assert "STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE" in message
    assert "origin string" in message and "dest string" in message
    assert "keep the old key columns (origin)" in message and "new checkpoint" in message
    assert "restart-refused" not in [q.name for q in spark.streams.active]
    assert sorted(p.name for p in (copy / "offsets").iterdir()) == offsets  # nothing ran


def test_start_query_restarts_a_compatible_change_and_records_it(spark, first_run, tmp_path):
    copy = _copy(first_run, tmp_path)
    spec = dataclasses.replace(BASE, aggregates=["count", "sum(dep_delay)", "max(flight)"])
    query = _start(spark, first_run[0], spec, copy, "restart-accepted")
    query.wait_until_drained(timeout=300)
    query.close()
    assert query.checkpoint.last_batch > Checkpoint(first_run[1]).last_batch
    # the next check compares with what this start recorded: max(flight), not max(distance)
    again = check_restart(spec, copy, event_schema=FLIGHT_EVENT_SCHEMA, spark=spark)
    assert again.compatible and again.findings.empty


SPECS = {
    "hourly delays (avg)": sk.QuerySpec(keys=["origin"], window=sk.tumbling("1 hour"),
                                        aggregates=["count", "avg(dep_delay)",
                                                    "max(dep_delay)", "min(carrier)"],
                                        event_time="ts", watermark="1 day"),
    "hopping": sk.QuerySpec(keys=["carrier", "origin"], window=sk.hopping("2 hours", "1 hour"),
                            aggregates=["sum(distance)", "count(dep_delay)"],
                            event_time="ts", watermark="1 day"),
    "sessions": sk.QuerySpec(keys=["origin"], window=sk.session("20 minutes"),
                             aggregates=["count", "max(arr_delay)"], event_time="ts",
                             watermark="1 day"),
    "running": sk.QuerySpec(keys=["dest"], window=None, aggregates=["count", "avg(distance)"],
                            event_time="ts"),
    "running with a TTL": sk.QuerySpec(keys=["dest"], window=None, ttl="1 hour",
                                       aggregates=["count", "avg(distance)", "max(flight)",
                                                   "sum(dep_delay)"], event_time="ts"),
}


@pytest.mark.parametrize("name", list(SPECS))
def test_the_planned_state_is_the_state_spark_writes(spark, tmp_path, name):
    """statekit's model of each aggregate's buffer is Spark's: names and types, key and
    value, for every kind of query start_query runs."""
    folder = tmp_path / "in"
    _write_flights(folder, 0, slice(0, 500))
    spec = SPECS[name]
    query = _start(spark, folder, spec, tmp_path / "ck", "planned")
    query.wait_for_batches(1, timeout=300)   # Spark writes the schemas before batch 0 runs
    query.close()
    events, _ = source_events(_stream(spark, folder), spark,
                              SourceOptions(event_schema=FLIGHT_EVENT_SCHEMA), [])
    planned = planned_state(spec, events.schema)
    stored = {f.name: f for f in stored_state_schema(query.checkpoint)}[planned.family]
    assert type_text(planned.key) == type_text(stored.key)
    assert type_text(planned.value) == type_text(stored.value)


def test_bad_input_to_check_restart_is_named(spark, tmp_path):
    with pytest.raises(BadArgument,
                       match="bad new: 'origin'; accepted: a QuerySpec or a streaming DataFrame"):
        check_restart("origin", tmp_path)
    with pytest.raises(BadArgument, match="bad checkpoint"):
        check_restart(BASE, 42)
    fresh = check_restart(BASE, tmp_path / "nothing-yet", event_schema=FLIGHT_EVENT_SCHEMA,
                          spark=spark)
    assert fresh.compatible and fresh.findings.empty   # a first start: nothing to compare


def test_a_corrupt_state_schema_file_is_named(spark, first_run, tmp_path):
    copy = _copy(first_run, tmp_path)
    [path] = Checkpoint(copy).state_schema_files(0)
    path.write_bytes(path.read_bytes()[:40])
    path.with_name(f".{path.name}.crc").unlink(missing_ok=True)
    with pytest.raises(CorruptFile, match=r"state schema file .*_metadata/schema' is corrupt: "
                                          r"it ends at byte 40"):
        check_restart(BASE, copy, event_schema=FLIGHT_EVENT_SCHEMA, spark=spark)
