"""``KafkaStreamsApp.restores()``: an instance started on an empty state directory restores the
store from its changelog, and Kafka Streams' restore listener reports every record of it, per
changelog partition, with the offsets and the time it took."""

from __future__ import annotations

from helpers.shipping import wait_for

import statekit as sk
from statekit.datasets import GAME_SPEC, game_events
from statekit.kafka.dataset_replay import replay

#: the game events are from January 2026: keep their changelog records (see test_app.py)
KEEP = {"windowstore.changelog.additional.retention.ms": 100 * 365 * 86_400_000}


def test_a_fresh_instance_restores_every_changelog_record(broker, tmp_path):
    topic = "ks-restores"
    replay(game_events(), broker.bootstrap_servers, topic, partitions=4, progress=False)
    first = sk.kafka_streams.AppOptions(application_id="ks-restores", state_dir=tmp_path / "a",
                                        streams_config=KEEP)
    with sk.kafka_streams.start(topic, GAME_SPEC, kafka=broker, instances=1, standbys=0,
                                cache_max_bytes=0, options=first) as app:
        app.wait_until_consumed(timeout=120)
        # an empty changelog: each partition's restore starts and ends with nothing
        assert app.restores()["records"].tolist() == [0, 0, 0, 0]
        expected = app.snapshot(sort=True)
    changelog = app.read_changelog()
    ends = changelog.groupby("partition")["offset"].max() + 1

    again = sk.kafka_streams.AppOptions(application_id="ks-restores", state_dir=tmp_path / "b",
                                        streams_config=KEEP)
    with sk.kafka_streams.start(topic, GAME_SPEC, kafka=broker, instances=1, standbys=0,
                                cache_max_bytes=0, options=again) as app:
        def finished():
            rows = app.restores()
            return len(rows) == len(ends) and set(rows["state"]) == {"done"}

        wait_for(finished, 60, "every changelog partition restored")
        restores = app.restores()
        assert list(restores.columns) == ["instance", "store", "partition", "start_offset",
                                          "end_offset", "records", "seconds", "state",
                                          "started", "finished"]
        restores = restores.set_index("partition").sort_index()
        assert set(restores["store"]) == {"aggregate"}
        assert set(restores["instance"]) == {0}
        assert restores["records"].sum() == len(changelog) > 400
        assert restores["records"].to_dict() == changelog.groupby("partition").size().to_dict()
        assert restores["end_offset"].to_dict() == ends.to_dict()
        assert (restores["start_offset"] == 0).all()
        assert (restores["seconds"] > 0).all()
        assert app.snapshot(sort=True).drop(columns="partition").equals(
            expected.drop(columns="partition"))
