"""StatefulQuery.explain: why a key holds its value (issue 41 item 2). The real flights on the
real broker (nulls in the delays), with early flights sent again after the watermark moved on
(late) and broken records (malformed); every explanation is checked against pandas reading
the same flights, not against statekit's own recomputation only."""

from __future__ import annotations

import dataclasses
import json
import os
import time

import pandas as pd
import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient

import statekit as sk
from statekit.charts.explain import explain_chart
from statekit.datasets import FLIGHT_EVENT_SCHEMA, flights
from statekit.kafka.dataset_replay import replay

SPEC = sk.QuerySpec(keys=["origin"], window=sk.tumbling("1 hour"), watermark="1 hour",
                    aggregates=["count", "sum(dep_delay)", "max(distance)"])
LATE = 10  # early flights sent again at the end: behind the watermark by then


@pytest.fixture(scope="module")
def run(spark, broker, tmp_path_factory):
    """The first 3,000 flights, then LATE early ones again, then three broken records of the
    last flight's origin; read 700 records a batch."""
    topic = "explain-flights"
    records = flights(limit=3000).records
    replay(records, broker.bootstrap_servers, topic, partitions=2, progress=False)
    rows = [json.loads(v) for v in records["value"]]
    last = rows[-1]
    broken = [json.dumps(dict(last, distance="far")),
              json.dumps({k: v for k, v in last.items() if k != "ts"}), "not json"]
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for row in rows[:LATE]:
        producer.produce(topic, key=row["origin"].encode(), value=json.dumps(row).encode())
    for value in broken:
        producer.produce(topic, key=last["origin"].encode(), value=value.encode())
    assert producer.flush(30) == 0
    del producer
    query = sk.start_query(topic, SPEC, spark=spark, kafka=broker,
                           event_schema=FLIGHT_EVENT_SCHEMA,
                           checkpoint=str(tmp_path_factory.mktemp("explain") / "ck"),
                           name="explain-flights", max_offsets_per_trigger=700,
                           trigger="available-now")
    query.wait_until_drained(timeout=300)
    query.close()
    events = pd.DataFrame(rows)
    events["ts"] = pd.to_datetime(events["ts"]).dt.tz_localize(None)
    return query, events, last, topic


def test_every_key_of_a_window_is_reproduced_by_the_records_pandas_reads(run):
    query, events, _, _ = run
    state = query.snapshot()
    window = state["window_start"].min()
    keys = sorted(state.loc[state["window_start"] == window, "origin"])
    assert len(keys) >= 2
    for origin in keys:
        why = query.explain(origin, window=window)
        assert why.agrees, why
        # the records that counted are exactly the flights pandas finds in that hour
        inside = events[(events["origin"] == origin) & (events["ts"] >= window)
                        & (events["ts"] < window + pd.Timedelta("1 hour"))]
        counted = why.records[why.records["counted"]]
        assert len(counted) == len(inside) == int(why.state["count"].iloc[0])
        assert sorted(counted["flight"]) == sorted(inside["flight"])
        assert counted["dep_delay"].sum() == inside["dep_delay"].sum()
        assert why.history["batch"].is_monotonic_increasing
        assert why.history["count"].iloc[-1] == why.state["count"].iloc[0]
        assert set(why.history["batch"]) <= set(counted["batch"])


def test_late_and_malformed_records_are_named_with_why_they_did_not_count(run):
    query, events, last, _ = run
    total_late = 0
    for origin in sorted(events["origin"].unique()):
        why = query.explain(origin)
        assert why.agrees and not why.partial
        missed = why.not_counted()
        late = missed[missed["why_not"].str.startswith("late:")]
        total_late += len(late)
        early = events.head(LATE)
        assert sorted(late["flight"]) == sorted(early.loc[early["origin"] == origin, "flight"])
        if origin == last["origin"]:
            malformed = missed[missed["why_not"].str.startswith("malformed:")]
            assert sorted(malformed["why_not"]) == ["malformed: distance is not a bigint: far",
                                                    "malformed: ts is missing or null"]
        assert f"{len(late)} late" in repr(why) or not len(late)
    assert total_late == LATE == query.late_events()


def test_the_agreement_check_refuses_a_wrong_value_and_accepts_another_dtype(run):
    query, _, _, _ = run
    why = query.explain(run[2]["origin"])
    off_by_one = why.reproduced.assign(count=why.reproduced["count"] + 1)
    assert not dataclasses.replace(why, reproduced=off_by_one).agrees
    fewer = why.reproduced.iloc[1:]
    assert not dataclasses.replace(why, reproduced=fewer).agrees
    as_floats = why.reproduced.astype({"count": "float64", "max_distance": "float64"})
    assert dataclasses.replace(why, reproduced=as_floats).agrees


def test_the_chart_shows_each_batch_s_records_and_the_value(run):
    query, _, last, _ = run
    why = query.explain(last["origin"])
    spec = explain_chart(why).to_dict()

    def rows(data: dict) -> list[dict]:
        return spec["datasets"][data["name"]] if "name" in data else data["values"]

    bars = rows(spec["hconcat"][0]["data"])
    assert sum(r["records"] for r in bars) == len(why.records)
    assert {r["outcome"] for r in bars} == {"counted", "late", "malformed"}
    assert len(rows(spec["hconcat"][1]["data"])) == (why.history["change"] == "put").sum()


def test_a_key_the_state_lacks_names_the_nearest_and_bad_keys_are_named(run):
    query, _, _, _ = run
    with pytest.raises(sk.BadArgument, match=r"'JFX'.*nearest: JFK"):
        query.explain("JFX")
    with pytest.raises(sk.BadArgument, match=r"a value for each group key: \['origin'\]"):
        query.explain({"dest": "ATL"})
    with pytest.raises(sk.BadArgument, match="a key the state holds"):
        query.explain("JFK", window="1999-01-01 00:00")
    with pytest.raises(sk.BadArgument, match=r"bad window: 'soon'; accepted: a window's start"):
        query.explain("JFK", window="soon")


def test_a_snapshot_row_or_a_zoned_time_names_the_same_window(run):
    query, _, _, _ = run
    row = query.snapshot().iloc[0]
    by_row = query.explain({"origin": row["origin"], "window_start": row["window_start"]})
    zoned = row["window_start"].tz_localize("UTC").tz_convert("America/New_York")
    by_zone = query.explain(row["origin"], window=zoned)
    assert len(by_row.state) == len(by_zone.state) == 1
    assert by_row.key == by_zone.key
    assert by_row.records["offset"].tolist() == by_zone.records["offset"].tolist()


def test_input_no_longer_in_kafka_makes_the_explanation_partial(run, broker):
    query, _, _, topic = run
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    for future in admin.delete_records([TopicPartition(topic, 0, 100)]).values():
        future.result(30)
    why = query.explain(run[2]["origin"])
    assert why.partial and 0 in why.gone
    assert "PARTIAL" in repr(why) and "batches [0" in repr(why)


def test_a_query_over_text_files_is_explained_from_the_files_each_batch_read(spark, tmp_path):
    """The same flights as lines of files, one file a batch, then a file of LATE early flights
    and broken lines: the records come from the files the source logged, line by line."""
    lines = flights(limit=3000).records["value"].tolist()
    rows = [json.loads(v) for v in lines]
    folder = tmp_path / "in"
    folder.mkdir()
    parts = [lines[:1000], lines[1000:2000], lines[2000:],
             [*lines[:LATE], json.dumps(dict(rows[-1], distance="far")), "not json"]]
    start = time.time() - 100
    for i, part in enumerate(parts):
        path = folder / f"f{i}.json"
        path.write_text("\n".join(part) + "\n")
        os.utime(path, (start + i, start + i))
    stream = spark.readStream.option("maxFilesPerTrigger", 1).text(str(folder))
    query = sk.start_query(stream, SPEC, spark=spark, event_schema=FLIGHT_EVENT_SCHEMA,
                           checkpoint=str(tmp_path / "ck"), name="explain-files",
                           trigger="available-now")
    query.wait_until_drained(timeout=300)
    query.close()
    origin = rows[-1]["origin"]
    why = query.explain(origin)
    assert why.agrees and not why.partial
    missed = why.not_counted()
    late = missed[missed["why_not"].str.startswith("late:")]
    assert sorted(late["flight"]) == sorted(r["flight"] for r in rows[:LATE]
                                            if r["origin"] == origin)
    assert (late["topic"].str.endswith("/f3.json")).all()
    assert sorted(late["offset"]) == [n + 1 for n, r in enumerate(rows[:LATE])
                                      if r["origin"] == origin]   # line numbers in f3.json
    broken = missed[missed["why_not"].str.startswith("malformed:")]
    assert broken["why_not"].tolist() == ["malformed: distance is not a bigint: far"]
    assert broken["offset"].tolist() == [LATE + 1]
    counted = why.records[why.records["counted"]]
    assert len(counted) == sum(r["origin"] == origin for r in rows)  # every flight, once
    (folder / "f0.json").unlink()   # input gone: the explanation says which batch
    assert query.explain(origin).gone == [0]
