"""A KRaft log folder formatted from the once-per-machine template is what Kafka's own
``StorageTool format`` writes, and a broker starts on it."""

from __future__ import annotations

import struct
import subprocess

import pytest

from statekit.errors import StatekitError
from statekit.kafka import EmbeddedBroker, create_topic, list_topics
from statekit.kafka.broker import cluster_id
from statekit.kafka.log_format import META, ensure_template, format_log_dir


def _properties(path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines()
                if line and not line.startswith("#"))


def _without_times(checkpoint: bytes) -> bytes:
    """The record batches with each batch's checksum and first/last timestamps zeroed: what
    two formats of the same Kafka release may differ in."""
    out, at = bytearray(checkpoint), 0
    while at + 12 <= len(out):
        (length,) = struct.unpack(">i", bytes(out[at + 8:at + 12]))
        out[at + 17:at + 21] = bytes(4)   # CRC-32C
        out[at + 27:at + 43] = bytes(16)  # baseTimestamp, maxTimestamp
        at += 12 + length
    assert at == len(out), "not a whole number of record batches"
    return bytes(out)


def _kafka_format(broker: EmbeddedBroker, data, node_id: int, cluster: str) -> None:
    """Kafka's own ``kafka-storage format`` of ``data`` with ``broker``'s settings."""
    config = data.parent / "server.properties"
    settings = {**broker.settings(), "node.id": str(node_id), "log.dirs": str(data),
                "controller.quorum.voters": f"{node_id}@127.0.0.1:{broker.controller_port}"}
    config.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    subprocess.run([*broker._java(), "kafka.tools.StorageTool", "format", "--cluster-id",
                    cluster, "--config", str(config)], check=True, capture_output=True,
                   timeout=120)


def test_a_folder_formatted_from_the_template_is_what_kafkas_storage_tool_writes(tmp_path):
    broker = EmbeddedBroker(log_dir=tmp_path / "ours")
    broker._prepare_dir()
    java, cluster = broker._java(), cluster_id()
    format_log_dir(broker.data_dir, java, broker.settings(), node_id=3, cluster=cluster,
                   cache=tmp_path / "cache")
    theirs = tmp_path / "theirs" / "data"
    theirs.parent.mkdir()
    _kafka_format(broker, theirs, node_id=3, cluster=cluster)

    assert sorted(p.name for p in broker.data_dir.iterdir()) == \
        sorted(p.name for p in theirs.iterdir()) == ["bootstrap.checkpoint", META]
    ours_meta, their_meta = _properties(broker.data_dir / META), _properties(theirs / META)
    assert {k: ours_meta[k] for k in ("node.id", "cluster.id", "version")} == \
        {k: their_meta[k] for k in ("node.id", "cluster.id", "version")} == \
        {"node.id": "3", "cluster.id": cluster, "version": "1"}
    assert len(ours_meta["directory.id"]) == 22 and set(ours_meta) == set(their_meta)
    ours = (broker.data_dir / "bootstrap.checkpoint").read_bytes()
    assert _without_times(ours) == \
        _without_times((theirs / "bootstrap.checkpoint").read_bytes())


def test_a_broker_starts_on_a_template_formatted_folder_and_keeps_its_ids(tmp_path):
    folder = tmp_path / "kafka"
    with EmbeddedBroker(log_dir=folder) as broker:
        create_topic(broker.bootstrap_servers, "formatted", partitions=2)
        assert list_topics(broker.bootstrap_servers) == {"formatted": 2}
        meta = _properties(folder / "data" / META)
        assert meta["cluster.id"] == broker.cluster_id and meta["node.id"] == "1"
    second = EmbeddedBroker(log_dir=tmp_path / "other")
    with second:
        other = _properties(tmp_path / "other" / "data" / META)
    # each folder its own cluster and folder id, the template shared
    assert other["cluster.id"] != meta["cluster.id"]
    assert other["directory.id"] != meta["directory.id"]


def test_the_template_is_built_once_and_reused(tmp_path):
    broker = EmbeddedBroker(log_dir=tmp_path / "k")
    java, settings = broker._java(), broker.settings()
    first = ensure_template(java, settings, tmp_path)
    stamp = (first / META).stat().st_mtime_ns
    again = ensure_template(java, {**settings, "node.id": "9", "log.dirs": "/x"}, tmp_path)
    assert again == first and (again / META).stat().st_mtime_ns == stamp
    elsewhere = EmbeddedBroker(log_dir=tmp_path / "k2")  # its own log configuration file
    assert ensure_template(elsewhere._java(), elsewhere.settings(), tmp_path) == first
    other = ensure_template(java, {**settings, "num.partitions": "3"}, tmp_path)
    assert other != first
    assert sorted(p.name for p in (tmp_path / "kafka-format").iterdir()) == \
        sorted([first.name, other.name])  # no staging left behind


def test_a_failing_format_is_named_with_kafkas_words(tmp_path):
    with pytest.raises(StatekitError, match=r"StorageTool \(exit 1\)"):
        ensure_template(["false"], {"node.id": "1"}, tmp_path)
    assert list((tmp_path / "kafka-format").iterdir()) == []
