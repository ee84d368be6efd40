"""One writer per log: Kafka's transactional producer, and how to leave nothing behind.

Kafka's answer to "an old producer still writes after a new one took over" is the
``transactional.id``: ``init_transactions()`` gives the id a new epoch, aborts the open
transaction of any older producer with that id, and from then on the broker refuses
the older producer's writes (``PRODUCER_FENCED``). Records go out in transactions;
a ``read_committed`` consumer (``plain_consumer``'s setting) never sees the records of
an open transaction. Kafka Streams' exactly-once works this way (one id per task).

What the embedded broker (Tansu 0.6.0) does, measured here: init, commit, abort and
fencing all work (the fenced producer's next produce or commit fails); a
``read_committed`` fetch stops at the last stable offset; but the broker keeps no
index of aborted transactions, so a ``read_committed`` consumer there *does* see the
records of an aborted transaction (a real Kafka broker hides them). Its
``read_committed`` ListOffsets answers 0 while a transaction is open
(``statekit.kafka.offsets.end_offsets`` does not rely on it).

Example:
    >>> producer = transactional_producer(broker, "statekit-demo")      # doctest: +SKIP
    >>> producer.begin_transaction()                                     # doctest: +SKIP
    >>> producer.produce("demo", b"v"); producer.commit_transaction(30)   # doctest: +SKIP
"""

from __future__ import annotations

import contextlib

from confluent_kafka import KafkaError, KafkaException, Producer

from statekit.errors import BrokerUnreachable
from statekit.model.connection import Kafka, connect

#: errors that say a newer producer with the same transactional.id took over
FENCING = frozenset({KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                     KafkaError.INVALID_PRODUCER_EPOCH})


def transactional_producer(kafka: Kafka, transactional_id: str, timeout: float = 30.0,
                           **settings: object) -> Producer:
    """A producer that owns ``transactional_id``, every older producer with that id fenced.

    Idempotent, ``acks=all``, and it never asks the broker to create a topic it writes to
    (``allow.auto.create.topics=false``: a broker that lost its topics must not get them
    back with its default partition count). ``settings`` are more librdkafka settings;
    the connection's own settings come last. BrokerUnreachable when nobody answers.
    """
    conn = connect(kafka)
    producer = Producer(conn.client_config(**{
        "transactional.id": transactional_id, "enable.idempotence": True, "acks": "all",
        "allow.auto.create.topics": False, **settings, **conn.config}))
    try:
        producer.init_transactions(timeout)
    except KafkaException as exc:
        discard(producer)
        err = exc.args[0]
        if err.code() in (KafkaError._TIMED_OUT, KafkaError._TRANSPORT) or err.retriable():
            raise BrokerUnreachable(conn.bootstrap_servers,
                                    f"init_transactions for {transactional_id!r}: {err.str()}"
                                    ) from None
        raise
    return producer


def discard(producer: Producer, timeout: float = 1.0) -> None:
    """Leave ``producer`` unable to write anything more: purge what it has queued and in
    flight, abort its open transaction (waiting at most ``timeout`` s: the broker may be
    the problem), then the caller drops its last reference, which destroys the client.

    ``close()`` is not called: it flushes, and blocks while a broker is stalled. A record
    the broker received before the purge and appends later still belongs to the open
    transaction: the next ``init_transactions`` with the id aborts it, or the broker
    refuses it as fenced.
    """
    with contextlib.suppress(KafkaException, RuntimeError):
        producer.purge(in_queue=True, in_flight=True, blocking=True)
    with contextlib.suppress(KafkaException, RuntimeError):
        producer.abort_transaction(timeout)


def is_fenced(error: KafkaError | BaseException | None) -> bool:
    """True for the error a producer gets once a newer one with its transactional.id started."""
    if isinstance(error, KafkaException) and error.args:
        error = error.args[0]
    return isinstance(error, KafkaError) and error.code() in FENCING
