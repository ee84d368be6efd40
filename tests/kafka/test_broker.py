"""The embedded Tansu broker: start, stop, isolation, dying with its parent, bad addresses."""

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
from statekit.kafka.topics import check_reachable
from statekit.ports import free_port
from statekit.processes import is_alive


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


def test_a_stopped_broker_restarts_on_its_port_at_once():
    """Connections a client held when the broker stopped sit in TIME_WAIT on its port for a
    minute: that must not refuse a new broker there (memory storage: it starts empty)."""
    from confluent_kafka import Producer

    first = EmbeddedBroker().start()
    try:
        create_topic(first.bootstrap_servers, "before", partitions=1)
        producer = Producer({"bootstrap.servers": first.bootstrap_servers})
        producer.produce("before", b"x")
        assert producer.flush(10) == 0
    finally:
        first.stop()  # the broker closes the producer's connections first: TIME_WAIT
    del producer
    again = EmbeddedBroker(port=first.port, startup_timeout=20).start()
    try:
        assert again.bootstrap_servers == first.bootstrap_servers
        assert list_topics(again.bootstrap_servers) == {}
    finally:
        again.stop()


def test_port_in_use_is_an_error_naming_the_port(broker):
    second = EmbeddedBroker(port=broker.port, startup_timeout=10)
    try:
        with pytest.raises(StatekitError, match=str(broker.port)):
            second.start()
    finally:
        second.stop()
