"""A standby replica: a second local store that tails the changelog, so failover is quick.

``StandbyReplica`` first restores its stores (from their checkpoints, so a warm
directory replays only the tail), then keeps consuming the changelog in a
background thread, writing each poll as one write batch and checkpointing its
offsets. ``promote()`` stops tailing, catches up the last records and hands over
the stores: that is a failover.

Its **lag** is measured as a consumer-lag monitor measures a consumer group's: on
a timer of its own (every ``sample_every`` seconds, in a second thread with its own
consumer), the end offset of each partition — the true end, found by reading the
last record batch (``statekit.kafka.topics.end_offsets``), since some brokers report
a high watermark short of it — minus the next offset the replica will read. A
sample taken right after each read (as this class once did) is always 0: it never
sees the records shipped between two reads.

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
from statekit.kafka.topics import end_offsets, plain_consumer
from statekit.query.spec import QuerySpec
from statekit.restore.changelog import RestoreOptions, RestoreResult, restore_stores
from statekit.stores import StateStore

LAG_COLUMNS = ["time", "partition", "lag", "position", "end_offset"]


class StandbyReplica:
    """Tails changelog ``topic`` into local stores in ``directory`` (in memory when None).

    Args:
        kafka: the cluster (a ``KafkaConnection``, ``"host:port"`` or an ``EmbeddedBroker``).
        spec: what the state holds.
        partitions: the partitions to keep (all by default).
        name: a ``replica`` column in ``lag()`` (to draw several replicas).
        sample_every: seconds between lag samples (taken on a timer, apart from the reads).
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
        self._sampler: threading.Thread | None = None
        self._error: BaseException | None = None

    # --- lifecycle ------------------------------------------------------------------
    def _restore_options(self) -> RestoreOptions:
        """Its catch-up restores: its partitions, quietly."""
        return RestoreOptions(partitions=self.partitions, progress=False)

    def start(self) -> StandbyReplica:
        """Catch up (restore from the stores' checkpoints), then tail in the background."""
        self.catch_up = restore_stores(self.kafka, self.topic, self.spec,
                                       self.directory, store_name=self.store_name,
                                       options=self._restore_options())
        self.stores = self.catch_up.stores
        self._positions = {p: self.stores[p].read_checkpoint()[p] for p in self.partitions}
        self._stop.clear()
        self._thread = threading.Thread(target=self._tail, name=f"standby-{self.topic}",
                                        daemon=True)
        self._sampler = threading.Thread(target=self._sample_on_a_timer,
                                         name=f"standby-lag-{self.topic}", daemon=True)
        self._thread.start()
        self._sampler.start()
        return self

    def stop(self) -> None:
        """Stop tailing (the stores stay open and checkpointed); raise the tailer's error."""
        self._stop.set()
        for thread in (self._thread, self._sampler):
            if thread is not None:
                thread.join()
        self._thread = self._sampler = None
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
                                store_name=self.store_name, options=self._restore_options())
        self.stores = result.stores
        return result

    # --- tailing --------------------------------------------------------------------
    def _tail(self) -> None:
        consumer = plain_consumer(self.kafka, **{"enable.partition.eof": False})
        try:
            consumer.assign([TopicPartition(self.topic, p, self._positions[p])
                             for p in self.partitions])
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
        except BaseException as exc:  # surfaced by stop()
            self._error = exc
        finally:
            consumer.close()

    def _sample_on_a_timer(self) -> None:
        consumer = plain_consumer(self.kafka)
        try:
            while True:
                started = time.monotonic()
                self.sample(consumer)
                if self._stop.wait(max(0.0, self.sample_every - (time.monotonic() - started))):
                    return
        except BaseException as exc:  # surfaced by stop()
            self._error = exc
        finally:
            consumer.close()

    def sample(self, consumer=None) -> pd.DataFrame:
        """Take one lag sample now (the timer does it every ``sample_every`` seconds): per
        partition, the topic's end offset minus the replica's next offset. Returns it."""
        own = consumer is None
        consumer = plain_consumer(self.kafka) if own else consumer
        try:
            ends = end_offsets(consumer, self.topic, list(self.partitions), timeout=5)
        finally:
            if own:
                consumer.close()
        now = pd.Timestamp.now("UTC").tz_localize(None)
        positions = dict(self._positions)  # one look: the tail thread moves them
        rows = [(now, p, max(ends[p][1] - positions[p], 0), positions[p], ends[p][1])
                for p in self.partitions]
        self._samples.extend(rows)
        return pd.DataFrame(rows, columns=LAG_COLUMNS).assign(replica=self.name)

    def wait_caught_up(self, timeout: float = 30.0) -> pd.DataFrame:
        """Wait until a sample (``sample()``) finds the replica at the end of every partition;
        that sample. ``TimeoutError`` with the lag still left after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            now = self.sample()
            if (now["lag"] == 0).all():
                return now
            if time.monotonic() > deadline:
                behind = dict(zip(now["partition"], now["lag"], strict=True))
                raise TimeoutError(f"standby of {self.topic!r} still behind after "
                                   f"{timeout:.0f} s: records per partition {behind}")
            time.sleep(0.1)

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
