"""Typed options: one package holds them all, exported from the top; their checks and JSON
form (no Spark), the old keywords routed to them and refused when unknown or given twice, and
one query started both ways with the same result."""

from __future__ import annotations

import pandas as pd
import pytest

import statekit as sk
import statekit.options
from statekit.datasets import GAME_EVENT_SCHEMA, GAME_SPEC
from statekit.drills.spark_restart import DrillPlan
from statekit.drills.worker import QueryJob, StoreJob, query_config, store_config
from statekit.kafka.dataset_replay import replay
from statekit.model.connection import KafkaConnection, TopicRef
from statekit.options.base import route, settle
from statekit.options.query import RunOptions, SourceOptions
from statekit.options.replay import ReplayOptions
from statekit.options.restore import RestoreOptions
from statekit.options.security import ServingSecurity
from statekit.options.serve import GlobalTable, ServeOptions
from statekit.query.start import SHORTCUTS, start_query
from statekit.restore.rebuild import restore_stores
from statekit.serve.process import InstanceJob, instance_config
from statekit.serve.routing.assignment import assign
from statekit.stores import StoreColumns, open_store

KAFKA = KafkaConnection("127.0.0.1:9092", {"security.protocol": "PLAINTEXT"})


# --- one place ----------------------------------------------------------------------------
OPTION_CLASSES = ("SourceOptions", "RunOptions", "ReplayOptions", "RestoreOptions",
                  "ServeOptions", "GlobalTable", "ServingSecurity")


@pytest.mark.parametrize("name", OPTION_CLASSES)
def test_every_option_class_lives_in_the_options_package_and_at_the_top(name):
    cls = getattr(statekit.options, name)
    assert cls.__module__.startswith("statekit.options.")
    assert getattr(sk, name) is cls and name in sk.__all__
    assert name in statekit.options.__all__


def test_global_tables_round_trip_and_normalise():
    table = GlobalTable("players", "player-profiles", "player", plain_keys=True)
    assert table.key_columns == ("player",)
    assert table.to_dict() == {"name": "players", "topic": "player-profiles",
                               "key_columns": ["player"], "plain_keys": True}
    assert GlobalTable.from_dict(table.to_dict()) == table


# --- the dataclasses: checked values, JSON form ----------------------------------------------
def test_source_options_round_trip_and_normalise():
    source = SourceOptions(kafka="127.0.0.1:9092", event_schema=GAME_EVENT_SCHEMA,
                           required_fields="score", max_offsets_per_trigger=500,
                           ending_offsets='{"games": {"0": 10}}')
    assert source.kafka == KafkaConnection("127.0.0.1:9092")
    assert source.required_fields == ("score",)
    data = source.to_dict()
    assert data["kafka"] == {"bootstrap_servers": "127.0.0.1:9092", "config": {}}
    assert data["required_fields"] == ["score"]
    assert SourceOptions.from_dict(data) == source


def test_run_options_round_trip_and_defaults():
    run = RunOptions(name="board", checkpoint="/tmp/ck", trigger="available-now",
                     sink="memory", changelog=False)
    assert RunOptions.from_dict(run.to_dict()) == run
    assert run.trigger_kwargs() == {"availableNow": True}
    assert RunOptions().name is None and RunOptions().output_mode is None


@pytest.mark.parametrize(("options", "message"), [
    (lambda: SourceOptions(starting_offsets="first"), "bad starting_offsets: 'first'"),
    (lambda: SourceOptions(ending_offsets="500"), "bad ending_offsets: '500'"),
    (lambda: SourceOptions(max_offsets_per_trigger=0), "bad max_offsets_per_trigger: 0"),
    (lambda: SourceOptions(kafka=42), "bad Kafka connection: 42"),
    (lambda: SourceOptions(fail_on_data_loss="no"), "bad fail_on_data_loss: 'no'"),
    (lambda: SourceOptions(required_fields=[1]), "bad required_fields: \\[1\\]"),
    (lambda: RunOptions(sink="parquet"), "bad sink: 'parquet'; accepted: noop, memory, console"),
    (lambda: RunOptions(output_mode="complete"), "bad output mode: 'complete'"),
    (lambda: RunOptions(trigger="soon"), "soon"),
    (lambda: RunOptions(trigger=5), "bad trigger: 5"),
    (lambda: RunOptions(changelog="yes"), "bad changelog: 'yes'"),
    (lambda: RestoreOptions(consumers="many"), "bad consumers: 'many'"),
    (lambda: RestoreOptions(chunk=0), "bad chunk: 0"),
    (lambda: DrillPlan(batches=-1), "bad batches: -1"),
    (lambda: ReplayOptions(rate=0), "bad replay rate: 0"),
    (lambda: ReplayOptions(progress="no"), "bad progress: 'no'"),
    (lambda: ReplayOptions(config=["acks=all"]), "bad config: \\['acks=all'\\]"),
    (lambda: ReplayOptions(flush_timeout=0), "bad flush_timeout: 0"),
    (lambda: GlobalTable("players", "bad topic!", ("player",)),
     "bad topic of a global table: 'bad topic!'"),
    (lambda: GlobalTable("players", "players", ()), "bad key_columns: \\(\\)"),
    (lambda: GlobalTable("players", "players", ("a", "b"), plain_keys=True),
     "bad key_columns of plain keys"),
    (lambda: GlobalTable("players", "players", ("player",), plain_keys="yes"),
     "bad plain_keys: 'yes'"),
    (lambda: ServeOptions(allow_remote="yes"), "bad allow_remote: 'yes'"),
    (lambda: ServeOptions(global_tables=GlobalTable("p", "p", ("k",))), "bad global_tables"),
    (lambda: StoreColumns(key_columns="player"), "bad key_columns: 'player'"),
    (lambda: TopicRef(KAFKA, ""), "bad topic: ''"),
])
def test_bad_option_values_name_the_field(options, message):
    with pytest.raises(sk.BadArgument, match=message):
        options()


def test_from_dict_names_unknown_and_missing_fields():
    with pytest.raises(sk.BadArgument, match="bad RunOptions field: 'trigger_ms'; accepted: "
                                             "name, checkpoint, trigger, sink"):
        RunOptions.from_dict({"trigger_ms": 5})
    with pytest.raises(sk.BadArgument, match="bad SourceOptions description: 'x'"):
        SourceOptions.from_dict("x")
    with pytest.raises(sk.BadArgument, match="at least topic, spec .spec is missing"):
        QueryJob.from_dict({"topic": "games"})
    with pytest.raises(sk.BadArgument, match="bad Kafka connection field: 'servers'"):
        KafkaConnection.from_dict({"bootstrap_servers": "h:1", "servers": "h:2"})
    with pytest.raises(sk.BadArgument, match="bad topic reference"):
        TopicRef.from_dict({"topic": "games"})


def test_worker_configs_carry_typed_options():
    config = query_config("games", GAME_SPEC,
                          SourceOptions(kafka=KAFKA, event_schema=GAME_EVENT_SCHEMA,
                                        max_offsets_per_trigger=250),
                          RunOptions(name="drill", checkpoint="/tmp/ck",
                                     trigger="200 milliseconds"),
                          mode="drain", conf={"spark.x": 1})
    job = QueryJob.from_dict(config)
    assert job.spec == GAME_SPEC and job.source.kafka == KAFKA
    assert job.run.name == "drill" and job.mode == "drain" and job.conf == {"spark.x": "1"}
    assert QueryJob.from_dict(job.to_dict()) == job
    with pytest.raises(sk.BadArgument, match="bad worker mode: 'stop'; accepted: run, drain"):
        query_config("games", GAME_SPEC, SourceOptions(kafka=KAFKA), RunOptions(name="q"),
                     mode="stop")
    with pytest.raises(sk.BadArgument, match="bad kafka of the worker's source"):
        query_config("games", GAME_SPEC, SourceOptions(), RunOptions(name="q"))
    store = StoreJob.from_dict(store_config("games-changelog", KAFKA, "/tmp/s", GAME_SPEC))
    assert store.changelog == TopicRef(KAFKA, "games-changelog") and store.spec == GAME_SPEC


def test_instance_config_carries_serve_options():
    security = ServingSecurity(token="t" * 32)
    options = ServeOptions(host="127.0.0.1", security=security,
                           global_tables=[GlobalTable("players", "players", ("player",))])
    assignment = assign(3, ["i0", "i1"], 1)
    config = instance_config("i0", TopicRef(KAFKA, "board-changelog"), "/tmp/s", assignment,
                             {"i0": "http://127.0.0.1:1", "i1": "http://127.0.0.1:2"},
                             port=1, control_port=3, options=options)
    job = InstanceJob.from_dict(config)
    assert job.options == options and job.assignment == assignment
    assert job.changelog.kafka == KAFKA and job.control_port == 3
    assert "t" * 32 not in repr(job)  # the token stays out of reprs


# --- shortcuts: one table, refusals ----------------------------------------------------------
def test_shortcut_table_covers_every_field_once():
    assert {k for k, where in SHORTCUTS.items() if where == "source"} == set(
        SourceOptions.field_names())
    assert {k for k, where in SHORTCUTS.items() if where == "run"} == set(
        RunOptions.field_names())
    assert route({"trigger": "1 second", "keys": ["player"], "kafka": KAFKA}, SHORTCUTS,
                 "start_query") == {"run": {"trigger": "1 second"},
                                    "spec": {"keys": ["player"]}, "source": {"kafka": KAFKA}}


def test_start_query_refuses_unknown_and_doubled_keywords():
    # refused before any Spark session or broker is needed
    with pytest.raises(sk.BadArgument, match="bad keyword argument of start_query: 'triger'; "
                                             "accepted: aggregates, changelog, "
                                             "changelog_topic_config, checkpoint"):
        start_query("games", GAME_SPEC, triger="1 second")
    with pytest.raises(sk.BadArgument, match="bad trigger with run=: \\['trigger'\\]; accepted: "
                                             "each setting once"):
        start_query("games", GAME_SPEC, run=RunOptions(trigger="1 second"), trigger="2 seconds")
    with pytest.raises(sk.BadArgument, match="bad kafka with source_options="):
        start_query("games", GAME_SPEC, source_options=SourceOptions(), kafka=KAFKA)
    with pytest.raises(sk.BadArgument, match="keys with spec"):
        start_query("games", GAME_SPEC, keys=["player"])
    with pytest.raises(sk.BadArgument, match="bad run: 'fast'; accepted: a RunOptions"):
        start_query("games", GAME_SPEC, run="fast")
    with pytest.raises(sk.BadArgument, match="bad sink: 'parquet'"):
        start_query("games", GAME_SPEC, sink="parquet")


def test_other_shortcut_refusals():
    with pytest.raises(sk.BadArgument, match="bad keyword argument of restore_stores: 'part'"):
        restore_stores(KAFKA, "t", GAME_SPEC, part=[0])
    with pytest.raises(sk.BadArgument, match="bad progress with options="):
        restore_stores(KAFKA, "t", GAME_SPEC, options=RestoreOptions(), progress=False)
    with pytest.raises(sk.BadArgument, match="bad keyword argument of replay: 'partition'"):
        replay(pd.DataFrame({"key": [], "value": [], "timestamp": []}), KAFKA, "t",
               partition=4)
    with pytest.raises(sk.BadArgument, match="bad key_columns with columns="):
        open_store("key-value", "s", 0, columns=StoreColumns(["k"]), key_columns=["k"])
    with pytest.raises(sk.BadArgument, match="bad keyword argument of open_store: 'keys'"):
        open_store("key-value", "s", 0, keys=["k"])
    assert settle(None, DrillPlan, {"batches": 3}, "plan") == DrillPlan(batches=3)


def test_open_store_typed_and_shortcut_forms_agree():
    typed = open_store("key-value", "totals", 0,
                       columns=StoreColumns(["player"], ["total"]))
    short = open_store("key-value", "totals", 0, key_columns=["player"],
                       value_columns=["total"])
    for store in (typed, short):
        store.put({"player": "p07"}, {"total": 5})
    assert typed.get({"player": "p07"}) == short.get({"player": "p07"}) == {"total": 5}


# --- one real query, started both ways --------------------------------------------------------
def test_typed_and_shortcut_forms_give_the_same_query(spark, broker, games, tmp_path):
    typed = start_query(
        games, GAME_SPEC, spark=spark,
        source_options=SourceOptions(kafka=broker, event_schema=GAME_EVENT_SCHEMA,
                                     max_offsets_per_trigger=2500),
        run=RunOptions(name="options-typed", checkpoint=str(tmp_path / "typed"),
                       trigger="100 milliseconds", changelog=False))
    short = start_query(
        games, spark=spark, keys=GAME_SPEC.keys, window=GAME_SPEC.window,
        aggregates=[a.text for a in GAME_SPEC.aggregates], event_time=GAME_SPEC.event_time,
        watermark=GAME_SPEC.watermark, kafka=broker, event_schema=GAME_EVENT_SCHEMA,
        max_offsets_per_trigger=2500, name="options-short",
        checkpoint=str(tmp_path / "short"), trigger="100 milliseconds", changelog=False)
    try:
        assert short.spec == typed.spec
        last = typed.wait_until_drained()
        assert short.wait_until_drained() == last
        assert typed.changelog is None and short.changelog is None
        assert typed.name == "options-typed"
        left, right = typed.snapshot(), short.snapshot()
        assert len(left) > 0
        assert left.equals(right)
    finally:
        typed.close()
        short.close()
