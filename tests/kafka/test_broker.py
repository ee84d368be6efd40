"""The embedded Apache Kafka broker: start, stop, isolation, dying with its parent, a restart
from its own log, bad addresses and folders; and Tansu, the explicit alternative."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from statekit.errors import BrokerUnreachable, StatekitError
from statekit.kafka import EmbeddedBroker, create_topic, list_topics
from statekit.kafka.clients import check_reachable
from statekit.ports import free_port
from statekit.processes import is_alive


def wait_for(condition, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"not true within {seconds} s"
        time.sleep(0.05)


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not is_alive(pid):
            return True
        time.sleep(0.05)
    return not is_alive(pid)


def test_start_answers_and_stop_ends_the_process():
    broker = EmbeddedBroker().start()
    try:
        assert broker.running
        assert broker.bootstrap_servers == f"127.0.0.1:{broker.port}"
        assert list_topics(broker.bootstrap_servers) == {}
        pid = broker.pid
    finally:
        broker.stop()
    assert not broker.running
    assert _gone_within(pid, 5)
    broker.stop()  # idempotent


def test_with_block_leaves_no_process():
    with EmbeddedBroker() as broker:
        pid = broker.pid
        assert is_alive(pid)
        create_topic(broker.bootstrap_servers, "inside", partitions=2)
        assert list_topics(broker.bootstrap_servers) == {"inside": 2}
    assert not broker.running
    assert _gone_within(pid, 5)


def test_second_broker_gets_another_port_and_its_own_topics(broker, topic_name):
    create_topic(broker.bootstrap_servers, topic_name, partitions=1)
    with EmbeddedBroker() as other:
        assert other.port != broker.port
        assert other.pid != broker.pid
        assert topic_name not in list_topics(other.bootstrap_servers)
    assert topic_name in list_topics(broker.bootstrap_servers)  # the first one is untouched


def test_broker_dies_when_its_parent_is_killed():
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent("""
            import sys, time
            from statekit.kafka import EmbeddedBroker
            broker = EmbeddedBroker().start()
            print(broker.pid, flush=True)
            time.sleep(600)
        """)],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        line = child.stdout.readline()
        assert line.strip().isdigit(), f"child printed {line!r}"
        broker_pid = int(line)
        assert is_alive(broker_pid)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
        assert _gone_within(broker_pid, 10), f"broker pid {broker_pid} outlived its parent"
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_unreachable_address_is_named():
    address = f"127.0.0.1:{free_port()}"  # nobody listens there
    with pytest.raises(BrokerUnreachable, match=address.replace(".", r"\.")) as info:
        check_reachable(address, timeout=2)
    assert info.value.bootstrap_servers == address
    with pytest.raises(BrokerUnreachable, match=address.replace(".", r"\.")):
        list_topics(address, timeout=2)


def test_a_stopped_broker_restarts_on_its_port_with_its_topics_and_records():
    """Connections a client held when the broker stopped sit in TIME_WAIT on its port for a
    minute: that must not refuse the broker there again. Its log is on disk: the topic and the
    record are still there after a clean stop and after kill -9."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    broker = EmbeddedBroker().start()
    try:
        create_topic(broker.bootstrap_servers, "before", partitions=1)
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
        producer.produce("before", b"x", key=b"k")
        assert producer.flush(10) == 0
        del producer
        for crash in (False, True):
            broker.kill() if crash else broker.stop()  # noqa: B018
            assert not broker.running
            broker.start()
            assert broker.bootstrap_servers == f"127.0.0.1:{broker.port}"
            assert list_topics(broker.bootstrap_servers) == {"before": 1}
            consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers,
                                 "group.id": "unused", "enable.auto.commit": False})
            consumer.assign([TopicPartition("before", 0, 0)])
            message = consumer.poll(10)
            consumer.close()
            assert message is not None and (message.key(), message.value()) == (b"k", b"x")
    finally:
        folder = broker.log_dir
        broker.close()
    assert not folder.exists()  # the folder it made for itself goes with it


def test_a_given_log_folder_is_kept_and_reused(tmp_path):
    folder = tmp_path / "kafka"
    with EmbeddedBroker(log_dir=folder) as broker:
        create_topic(broker.bootstrap_servers, "kept", partitions=2)
        wait_for(lambda: (folder / "data" / "kept-0").is_dir()
                 and (folder / "data" / "kept-1").is_dir(), 10)
    assert (folder / "data" / "meta.properties").is_file()
    with EmbeddedBroker(log_dir=folder) as again:
        assert list_topics(again.bootstrap_servers) == {"kept": 2}


def test_an_unwritable_log_folder_is_named(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    broker = EmbeddedBroker(log_dir=blocker / "kafka")
    with pytest.raises(StatekitError, match="a-file/kafka.*cannot be written"):
        broker.start()
    assert broker.pid is None


def test_missing_jars_say_how_to_get_them(monkeypatch, tmp_path):
    from statekit.errors import KafkaJarsMissing

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "empty-cache"))
    monkeypatch.delenv("STATEKIT_KAFKA_HOME", raising=False)
    with pytest.raises(KafkaJarsMissing, match="python -m statekit.kafka.jars.*TansuBroker"):
        EmbeddedBroker(log_dir=tmp_path / "k").start()
    monkeypatch.setenv("STATEKIT_KAFKA_HOME", str(tmp_path))
    with pytest.raises(KafkaJarsMissing, match=f"STATEKIT_KAFKA_HOME='{tmp_path}'.*libs"):
        EmbeddedBroker(log_dir=tmp_path / "k").start()


def test_missing_java_is_named(monkeypatch, tmp_path):
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(StatekitError, match="needs Java 17.*TansuBroker"):
        EmbeddedBroker(log_dir=tmp_path / "k").start()


def test_tansu_stays_available_by_choice():
    """The explicit alternative without Java: memory only, so a restart has lost its topics."""
    from statekit.kafka import TansuBroker

    first = TansuBroker().start()
    try:
        create_topic(first.bootstrap_servers, "before", partitions=1)
        assert list_topics(first.bootstrap_servers) == {"before": 1}
    finally:
        first.stop()
    with TansuBroker(port=first.port, startup_timeout=20) as again:
        assert list_topics(again.bootstrap_servers) == {}


def test_port_in_use_is_an_error_naming_the_port(broker):
    second = EmbeddedBroker(port=broker.port, startup_timeout=10)
    try:
        with pytest.raises(StatekitError, match=str(broker.port)):
            second.start()
    finally:
        second.stop()


def test_a_broker_started_without_waiting_is_waited_for_by_its_first_use():
    """It boots while something else does (a Spark session); statekit calls given the broker
    wait for it, and a broker that is not started says so."""
    broker = EmbeddedBroker().start(wait=False)
    try:
        assert broker.pid is not None and is_alive(broker.pid)
        create_topic(broker, "first-use", partitions=2)  # waits on broker.connection
        assert list_topics(broker) == {"first-use": 2}
        assert broker.wait_ready() is broker  # ready: returns at once
    finally:
        broker.close()
    with pytest.raises(StatekitError, match="is not started: call start"):
        broker.wait_ready()
