"""The background loop every follower of a topic runs on: its lifecycle, its failures, and
the consume helper that reports ends of partitions (against the embedded broker)."""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import KafkaError, KafkaException, Message, Producer, TopicPartition

from statekit.errors import BadArgument
from statekit.kafka.background import BackgroundLoop, consume_records
from statekit.kafka.clients import plain_consumer
from statekit.kafka.topics import create_topic


def wait_for(condition, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.005)


def counting(ticks: list) -> BackgroundLoop:
    def tick(loop: BackgroundLoop) -> None:
        while not loop.wait_stop(0.005):
            ticks.append(threading.current_thread().name)
    return BackgroundLoop("counter", tick)


def failing(error: BaseException, after: int = 3) -> BackgroundLoop:
    def body(loop: BackgroundLoop) -> None:
        for _ in range(after):
            loop.wait_stop(0.001)
        raise error
    return BackgroundLoop("failer", body)


def test_start_runs_the_body_in_a_named_daemon_thread_until_stop():
    ticks: list[str] = []
    loop = counting(ticks)
    assert loop.start() is loop and loop.running
    wait_for(lambda: len(ticks) >= 3)
    assert set(ticks) == {"counter"} and loop._thread.daemon
    loop.stop()
    assert not loop.running and loop.stop_requested
    seen = len(ticks)
    time.sleep(0.05)
    assert len(ticks) == seen            # nothing runs once stopped
    loop.stop()                          # again: nothing to do, no error
    loop.start()                         # a loop stopped cleanly may start again
    wait_for(lambda: len(ticks) > seen)
    loop.stop()


def test_stop_and_close_before_start_do_nothing():
    closed = []

    class Holder(BackgroundLoop):
        def _loop(self) -> None:
            raise AssertionError("never started")

        def _close_resources(self) -> None:
            closed.append(True)

    holder = Holder("holder")
    holder.stop()
    holder.raise_if_failed()
    holder.close()
    assert closed == [True] and not holder.running


def test_a_second_start_while_running_keeps_the_one_thread():
    loop = counting([]).start()
    try:
        thread = loop._thread
        assert loop.start() is loop and loop._thread is thread and loop.running
    finally:
        loop.stop()


def test_a_failure_is_raised_by_raise_if_failed_stop_and_close_as_it_was():
    error = KeyError("partition 7")
    loop = failing(error).start()
    wait_for(lambda: not loop.running)
    for surface in (loop.raise_if_failed, loop.stop, loop.stop, loop.close):
        with pytest.raises(KeyError) as raised:
            surface()
        assert raised.value is error               # the original: type and message kept
        assert str(raised.value) == "'partition 7'"
        assert "(raised in the background loop 'failer')" in raised.value.__notes__
        # the loop's own frames stay in the traceback, under the caller's
        assert any(f.co_name == "body" for f in _frames(raised.value.__traceback__))
    assert raised.value.__notes__.count("(raised in the background loop 'failer')") == 1
    with pytest.raises(KeyError):                   # a failed loop does not start again
        loop.start()


def _frames(tb):
    while tb is not None:
        yield tb.tb_frame.f_code
        tb = tb.tb_next


def test_a_subclass_hears_of_its_failure_in_its_thread_and_closes_its_resources_anyway():
    heard, closed = [], []

    class Follower(BackgroundLoop):
        def _loop(self) -> None:
            raise OSError(28, "No space left on device")

        def _loop_failed(self, exc: BaseException) -> None:
            heard.append((threading.current_thread().name, exc.errno))

        def _close_resources(self) -> None:
            closed.append(True)

    with pytest.raises(OSError) as raised, Follower("follow-t") as follower:
        wait_for(lambda: heard)
    assert raised.value.errno == 28                      # callers test errno: kept
    assert heard == [("follow-t", 28)] and closed == [True] and not follower.running


def test_stop_waits_at_most_its_timeout_then_names_the_loop():
    release = threading.Event()

    def slow_step(loop: BackgroundLoop) -> None:
        while not loop.stop_requested:
            release.wait()                          # a step that does not look at stop

    loop = BackgroundLoop("slow-step", slow_step).start()
    started = time.monotonic()
    with pytest.raises(TimeoutError, match="background loop 'slow-step' did not stop within "
                                           "0.2 s"):
        loop.stop(timeout=0.2)
    assert time.monotonic() - started < 5 and loop.running
    assert loop.start() is loop and loop.running   # starting a running loop does nothing
    release.set()
    loop.stop(timeout=10)                           # a later stop waits for it again
    assert not loop.running


def test_a_loop_may_ask_itself_to_stop():
    def once(loop: BackgroundLoop) -> None:
        loop.stop()                                 # from its own thread: no join
        assert loop.stop_requested

    loop = BackgroundLoop("once", once).start()
    wait_for(lambda: not loop.running)
    loop.stop()


def test_a_loop_without_a_body_is_refused():
    with pytest.raises(BadArgument, match="body of background loop 'empty': None; accepted: "
                                          "a target"):
        BackgroundLoop("empty")


def test_consume_records_reports_each_partitions_end_and_every_record_once(broker, topic_name):
    create_topic(broker, topic_name, partitions=3)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5})
    sent = {0: 40, 1: 25, 2: 0}                     # partition 2 stays empty
    for partition, count in sent.items():
        for i in range(count):
            producer.produce(topic_name, key=f"k{i}".encode(), value=f"{partition}-{i}".encode(),
                             partition=partition)
    assert producer.flush(30) == 0

    consumer = plain_consumer(broker)               # enable.partition.eof: True
    ends: dict[int, int] = {}
    received = []
    try:
        consumer.assign([TopicPartition(topic_name, p, 0) for p in sent])
        deadline = time.monotonic() + 60
        while set(ends) != set(sent):
            assert time.monotonic() < deadline, f"ends reached: {ends}"
            received += consume_records(
                consumer, max_records=7, timeout=0.1,
                on_end=lambda topic, p, offset: ends.__setitem__(p, offset))
        received += consume_records(consumer, timeout=0.3)   # nothing more comes
    finally:
        consumer.close()
    assert ends == sent                             # each partition's end, at its last offset
    assert all(msg.error() is None for msg in received)
    values = [msg.value().decode() for msg in received]
    assert sorted(values) == sorted(f"{p}-{i}" for p, n in sent.items() for i in range(n))
    assert len(set(values)) == len(values)          # none twice


class _Polled:
    """A consumer whose one ``consume`` returns the messages given (librdkafka's own
    ``Message`` objects), for errors the embedded broker does not produce."""

    def __init__(self, messages: list[Message]):
        self.messages = messages

    def consume(self, num_messages: int, timeout: float) -> list[Message]:
        out, self.messages = self.messages[:num_messages], self.messages[num_messages:]
        return out


def test_consume_records_raises_any_other_error_and_takes_ends_out():
    eof = Message(topic="t", partition=1, offset=5, error=KafkaError(KafkaError._PARTITION_EOF))
    record = Message(topic="t", partition=0, offset=3, key=b"k", value=b"v")
    ends = []
    got = consume_records(_Polled([record, eof]), on_end=lambda *end: ends.append(end))
    assert [(m.partition(), m.offset()) for m in got] == [(0, 3)] and ends == [("t", 1, 5)]
    assert consume_records(_Polled([eof])) == []          # no callback: just taken out
    lost = Message(topic="t", partition=0, offset=9,
                   error=KafkaError(KafkaError._UNKNOWN_PARTITION))
    with pytest.raises(KafkaException) as raised:
        consume_records(_Polled([record, lost]))
    assert raised.value.args[0].code() == KafkaError._UNKNOWN_PARTITION
