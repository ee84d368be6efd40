"""The reference Kafka Streams application against pandas: two instances and a standby on the
real embedded broker, the game events replayed, every (key, window) compared with pandas;
interactive queries by key routed from either instance; a killed instance's standby answers.
"""

from __future__ import annotations

import pandas as pd
import pytest
from helpers.shipping import wait_for

import statekit as sk
from statekit.datasets import GAME_SPEC, game_events
from statekit.datasets.game_parsing import parse_game_events
from statekit.errors import BadArgument, UnsupportedRead
from statekit.kafka.dataset_replay import replay
from statekit.model.query_handle import is_query_handle
from statekit.model.query_spec import QuerySpec, session
from statekit.reference.aggregates import rows_differing, windowed_reference
from statekit.reference.sessions import session_reference

#: the leaderboard with a grace long enough that no event is late: the store holds every
#: window pandas computes
SPEC = QuerySpec.from_dict({**GAME_SPEC.to_dict(), "watermark": "1 day"})
#: the game events happened in January 2026: a windowed store's changelog keeps records for the
#: store's retention plus a day after their timestamp, so the broker would delete them at once
KEEP_THE_CHANGELOG = sk.kafka_streams.AppOptions(streams_config={
    "windowstore.changelog.additional.retention.ms": 100 * 365 * 86_400_000})


@pytest.fixture(scope="module")
def good_events() -> pd.DataFrame:
    """The game events pandas reads (malformed lines left out), ts as naive UTC."""
    good, _ = parse_game_events(game_events().records["value"])
    return good.assign(ts=good["event_time"].dt.tz_localize(None)).drop(columns="event_time")


@pytest.fixture(scope="module")
def app(broker):
    topic = "ks-games"
    replay(game_events(), broker.bootstrap_servers, topic, partitions=4, progress=False)
    with sk.kafka_streams.start(topic, SPEC, kafka=broker, instances=2, standbys=1,
                                cache_max_bytes=0, options=KEEP_THE_CHANGELOG) as running:
        running.wait_until_consumed(timeout=120)
        yield running


def test_every_window_equals_pandas(app, good_events):
    expected = windowed_reference(good_events, SPEC)
    store = app.snapshot(sort=True)
    assert len(store) == len(expected) > 400
    assert rows_differing(store, expected, SPEC.key_columns).empty
    assert set(store["partition"]) == {0, 1, 2, 3}


def test_without_a_cache_the_changelog_holds_every_update(app, good_events):
    changelog = app.read_changelog()
    assert app.changelog_topics() == {"aggregate": f"{app.name}-aggregate-changelog"}
    assert len(changelog) == len(good_events)  # cache 0: one changelog record per event
    last = changelog.sort_values(["partition", "offset"]).drop_duplicates(
        ["key", "window_start"], keep="last")
    store = app.snapshot()
    assert len(last) == len(store)
    assert int(last["count"].sum()) == len(good_events)


def test_a_key_query_is_routed_from_either_instance(app, good_events):
    expected = windowed_reference(good_events, SPEC)
    for player in ("p07", "p12", "p36"):
        answers = [app.client.get(player, via=via) for via in (0, 1)]
        assert answers[0]["rows"] == answers[1]["rows"]
        assert {a["served_by"] for a in answers} == {answers[0]["active"]}
        assert {a["role"] for a in answers} == {"active"}
        # one of the two instances asked is not the key's owner: it forwarded the query
        assert {a["routed_from"] for a in answers} == {i.url[7:] for i in app.instances}
        mine = expected[expected["player"] == player]
        assert [r["count"] for r in answers[0]["rows"]] == mine["count"].tolist()
        assert [r["sum_score"] for r in answers[0]["rows"]] == mine["sum_score"].tolist()
    window = app.client.get("p07", from_ms=answers[0]["rows"][1]["window_start"],
                            to_ms=answers[0]["rows"][1]["window_start"])
    assert len(window["rows"]) == 1


def test_the_handle_refuses_what_has_no_kafka_streams_counterpart(app):
    assert is_query_handle(app) and app.parts() == ["aggregate"] and app.last_batch == -1
    for read in (lambda: app.changes(), lambda: app.snapshot(batch=3),
                 lambda: app.wait_for_batches(1), lambda: app.describe()):
        with pytest.raises(UnsupportedRead, match="instead"):
            read()


def test_progress_comes_from_kafka_streams_metrics(app):
    """Per instance, as Kafka Streams counts. ``dropped-records-total`` is a task-level metric:
    a task that moved to the other instance in a rebalance took its count with it (the
    one-instance runs below see all six malformed lines)."""
    progress = app.progress()
    assert progress["state"].tolist() == ["RUNNING", "RUNNING"]
    assert 0 <= progress["dropped-records-total"].sum() <= 6


def test_a_killed_instances_standby_answers(app, good_events):
    """Last in this module: it kills an instance."""
    owner = app.client.get("p07")["active"]
    victim = next(i.index for i in app.instances if i.url.endswith(owner))
    other = 1 - victim
    expected = app.client.get("p07")["rows"]
    # the other instance holds the partition as a standby, its copy kept from the changelog
    copy = wait_for(lambda: app.client.call("/key", {"key": "p07", "local": "stale"},
                                            via=other)["rows"] == expected,
                    60, "the standby's copy to catch up", every=0.2)
    assert copy
    app.kill(victim)

    def standby_answer():
        try:
            return app.client.get("p07", via=other)
        except sk.KafkaStreamsAppError:  # the group is rebalancing: no metadata yet
            return None

    answer = wait_for(standby_answer, 60, "an answer from the survivor", every=0.2)
    assert answer["rows"] == expected
    assert answer["served_by"] == app.instances[other].url[7:]
    # before the group notices the death, the survivor's standby copy answers ("stale");
    # after it, the survivor owns the partition ("active")
    assert answer["role"] in ("stale", "active")


@pytest.mark.parametrize("spec", [
    # max(score) makes the app refuse the line whose score is "lots", as pandas does with
    # the game schema (a spec that only counts reads no score: the app would count it)
    QuerySpec(keys=["player"], window=session("5 minutes"), watermark="1 day",
              aggregates=["count", "max(score)"]),
    QuerySpec(keys=["player", "game"], window=None,
              aggregates=["count", "sum(score)", "min(score)", "avg(score)"]),
], ids=["session", "running"])
def test_session_and_running_stores_equal_pandas(broker, app, good_events, spec):
    """A session store and a key-value store (several group keys), one instance, the record
    cache on (its default): the store's values equal pandas all the same (a session's count:
    the pandas reference computes no other aggregate)."""
    with sk.kafka_streams.start(app.topic, spec, kafka=broker, instances=1,
                                standbys=0) as other:
        other.wait_until_consumed(timeout=120)
        store = other.snapshot(sort=True).drop(columns="partition")
        dropped = other.progress()["dropped-records-total"].sum()
    # one instance: no task moves, so Kafka Streams' task-level count holds every malformed line
    assert dropped == len(game_events().records) - len(good_events) == 6
    if spec.kind == "session":
        expected = session_reference(good_events, spec.keys, spec.window.size)
    else:
        expected = windowed_reference(good_events, spec)
    assert len(store) == len(expected) > 100
    assert rows_differing(store, expected, spec.key_columns).empty


def test_a_setting_kafka_streams_refuses_is_named_in_its_own_words(broker):
    with pytest.raises(sk.KafkaStreamsAppError, match="processing.guarantee") as caught:
        sk.kafka_streams.start("ks-games", SPEC, kafka=broker, instances=1, standbys=0,
                               options=sk.kafka_streams.AppOptions(
                                   streams_config={"processing.guarantee": "sometimes"}))
    assert "\tat " not in str(caught.value)  # no Java stack trace


def test_a_missing_topic_is_named_before_anything_starts(broker):
    with pytest.raises(sk.TopicNotFound, match="no-such-games"):
        sk.kafka_streams.start("no-such-games", SPEC, kafka=broker)


def test_a_spec_the_app_cannot_express_is_named_before_anything_starts():
    with pytest.raises(BadArgument, match="ttl"):
        sk.kafka_streams.start("t", QuerySpec(keys=["k"], window=None, ttl="1 hour"),
                               kafka="127.0.0.1:1")
    with pytest.raises(BadArgument, match="standbys"):
        sk.kafka_streams.start("t", QuerySpec(keys=["k"], window=session("5 minutes")),
                               kafka="127.0.0.1:1", instances=2, standbys=2)
    with pytest.raises(BadArgument, match="spec"):
        sk.kafka_streams.start("t", "count per key", kafka="127.0.0.1:1")
