"""A standby replica: a second local store that tails the changelog, so failover is quick.

``StandbyReplica`` first restores its stores (from their checkpoints, so a warm
directory replays only the tail), then keeps consuming the changelog in a
background thread, writing each poll as one write batch and checkpointing its
offsets. It samples its lag (records behind the end of each partition) so the
lag can be drawn over time. ``promote()`` stops tailing, catches up the last
records and hands over the stores: that is a failover.

Example:
    >>> standby = StandbyReplica(broker, topic, spec, "/tmp/standby").start()  # doctest: +SKIP
    >>> standby.lag()              # time, partition, lag, position, end_offset  # doctest: +SKIP
    >>> stores = standby.promote() # caught up: serve from these            # doctest: +SKIP
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence

import pandas as pd
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from statekit.changelog.reader import topic_partitions
from statekit.kafka.connection import Kafka, connect
from statekit.kafka.topics import plain_consumer
from statekit.query.spec import QuerySpec
from statekit.restore.changelog import RestoreResult, restore_stores
from statekit.stores import StateStore

LAG_COLUMNS = ["time", "partition", "lag", "position", "end_offset"]


class StandbyReplica:
    """Tails changelog ``topic`` into local stores in ``directory`` (in memory when None).

    Args:
        kafka: the cluster (a ``KafkaConnection``, ``"host:port"`` or an ``EmbeddedBroker``).
        spec: what the state holds.
        partitions: the partitions to keep (all by default).
        name: a ``replica`` column in ``lag()`` (to draw several replicas).
        sample_every: seconds between lag samples.
    """

    def __init__(self, kafka: Kafka, topic: str, spec: QuerySpec,
                 directory: str | os.PathLike | None = None, *,
                 partitions: Sequence[int] | None = None, name: str = "standby",
                 store_name: str | None = None, sample_every: float = 0.2):
        self.kafka, self.topic, self.spec = connect(kafka), topic, spec
        self.directory, self.name, self.store_name = directory, name, store_name
        self.partitions = topic_partitions(self.kafka, topic, partitions)
        self.sample_every = sample_every
        self.stores: dict[int, StateStore] = {}
        self.catch_up: RestoreResult | None = None
        self._samples: list[tuple] = []
        self._positions: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    # --- lifecycle ------------------------------------------------------------------
    def start(self) -> StandbyReplica:
        """Catch up (restore from the stores' checkpoints), then tail in the background."""
        self.catch_up = restore_stores(self.kafka, self.topic, self.spec,
                                       self.directory, store_name=self.store_name,
                                       partitions=self.partitions, progress=False)
        self.stores = self.catch_up.stores
        self._positions = {p: self.stores[p].read_checkpoint()[p] for p in self.partitions}
        self._stop.clear()
        self._thread = threading.Thread(target=self._tail, name=f"standby-{self.topic}",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop tailing (the stores stay open and checkpointed); raise the tailer's error."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        if self._error is not None:
            raise self._error

    def close(self) -> None:
        """Stop and close the stores."""
        self.stop()
        for store in self.stores.values():
            store.close()

    def __enter__(self) -> StandbyReplica:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def promote(self) -> RestoreResult:
        """Failover: stop tailing, replay what is left of the log, return the caught-up stores."""
        self.stop()
        for store in self.stores.values():
            store.close()
        result = restore_stores(self.kafka, self.topic, self.spec, self.directory,
                                store_name=self.store_name, partitions=self.partitions,
                                progress=False)
        self.stores = result.stores
        return result

    # --- tailing --------------------------------------------------------------------
    def _tail(self) -> None:
        consumer = plain_consumer(self.kafka, **{"enable.partition.eof": False})
        try:
            consumer.assign([TopicPartition(self.topic, p, self._positions[p])
                             for p in self.partitions])
            next_sample = 0.0
            while not self._stop.is_set():
                messages = consumer.consume(10_000, timeout=0.1)
                by_partition: dict[int, list] = {}
                for msg in messages:
                    if msg.error() is not None:
                        if msg.error().code() != KafkaError._PARTITION_EOF:
                            raise KafkaException(msg.error())
                        continue
                    by_partition.setdefault(msg.partition(), []).append(msg)
                for p, batch in by_partition.items():
                    self.stores[p].write_raw([(m.key(), m.value()) for m in batch])
                    self._positions[p] = batch[-1].offset() + 1
                    self.stores[p].write_checkpoint({p: self._positions[p]})
                if time.monotonic() >= next_sample:
                    self._sample(consumer)
                    next_sample = time.monotonic() + self.sample_every
        except BaseException as exc:  # surfaced by stop()
            self._error = exc
        finally:
            consumer.close()

    def _sample(self, consumer) -> None:
        now = pd.Timestamp.now("UTC").tz_localize(None)
        # the consumer's position also steps over commit markers, which the watermark counts
        fetched = {tp.partition: tp.offset for tp in consumer.position(
            [TopicPartition(self.topic, p) for p in self.partitions])}
        for p in self.partitions:
            _, high = consumer.get_watermark_offsets(TopicPartition(self.topic, p),
                                                     timeout=5, cached=False)
            position = max(self._positions[p], fetched[p])
            # some brokers report the high watermark a batch short: never a negative lag
            end = max(high, position)
            self._samples.append((now, p, end - position, position, end))

    def lag(self) -> pd.DataFrame:
        """Lag samples: time, partition, lag (records behind), position, end_offset, replica."""
        frame = pd.DataFrame(list(self._samples), columns=LAG_COLUMNS)  # a copy: the tail appends
        frame["replica"] = self.name
        return frame

    @property
    def positions(self) -> dict[int, int]:
        """Partition → next offset this replica will read."""
        return dict(self._positions)

    def __repr__(self) -> str:
        state = "tailing" if self._thread is not None else "stopped"
        return f"StandbyReplica({self.topic!r}, {state}, positions={self._positions})"
