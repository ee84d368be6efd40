"""A standby replica: a second local store that tails the changelog, so failover is quick.

``StandbyReplica`` first restores its stores (from their checkpoints, so a warm
directory replays only the tail), then keeps consuming the changelog in a
background thread, writing each poll as one write batch and checkpointing its
offsets. ``promote()`` stops tailing, catches up the last records and hands over
the stores: that is a failover.

Its **lag** is measured as a consumer-lag monitor measures a consumer group's: on
a timer of its own (every ``sample_every`` seconds, in a second thread with its own
consumer), the end offset of each partition — the true end, found by reading the
last record batch (``statekit.kafka.offsets.end_offsets``), since some brokers report
a high watermark short of it — minus the next offset the replica will read. A
sample taken right after each read (as this class once did) is always 0: it never
sees the records shipped between two reads.

Example:
    >>> standby = StandbyReplica(broker, topic, spec, "/tmp/standby").start()  # doctest: +SKIP
    >>> standby.lag()              # time, partition, lag, position, end_offset  # doctest: +SKIP
    >>> stores = standby.promote() # caught up: serve from these            # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Sequence

import pandas as pd
from confluent_kafka import TopicPartition

from statekit.changelog.reader import topic_partitions
from statekit.kafka.background import BackgroundLoop, consume_records
from statekit.kafka.clients import plain_consumer
from statekit.kafka.offsets import end_offsets
from statekit.model.connection import Kafka, connect
from statekit.model.query_spec import QuerySpec
from statekit.options.restore import RestoreOptions
from statekit.restore.rebuild import restore_stores
from statekit.restore.result import RestoreResult
from statekit.stores import StateStore
from statekit.validate import timeout_seconds

LAG_COLUMNS = ["time", "partition", "lag", "position", "end_offset"]


class StandbyReplica(BackgroundLoop):
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
        super().__init__(f"standby-{topic}")
        self.kafka, self.topic, self.spec = connect(kafka), topic, spec
        self.directory, self.name, self.store_name = directory, name, store_name
        self.partitions = topic_partitions(self.kafka, topic, partitions)
        self.sample_every = sample_every
        self.stores: dict[int, StateStore] = {}
        self.catch_up: RestoreResult | None = None
        self._samples: list[tuple] = []
        self._positions: dict[int, int] = {}
        #: the lag samples' loop, beside the tailing one (this object)
        self._sampler = BackgroundLoop(f"standby-lag-{topic}", self._sample_on_a_timer)

    # --- lifecycle ------------------------------------------------------------------
    def _restore_options(self) -> RestoreOptions:
        """Its catch-up restores: its partitions, quietly."""
        return RestoreOptions(partitions=self.partitions, progress=False)

    def start(self) -> StandbyReplica:
        """Catch up (restore from the stores' checkpoints), then tail in the background.
        A replica already tailing goes on (starting it again does nothing); one that failed
        raises its error."""
        self.raise_if_failed()
        if self.running:
            return self
        self.catch_up = restore_stores(self.kafka, self.topic, self.spec,
                                       self.directory, store_name=self.store_name,
                                       options=self._restore_options())
        self.stores = self.catch_up.stores
        self._positions = {p: self.stores[p].read_checkpoint()[p] for p in self.partitions}
        super().start()
        self._sampler.start()
        return self

    def stop(self, timeout: float | None = None) -> None:
        """Stop tailing and sampling (the stores stay open and checkpointed); raise the
        tailer's error, else the sampler's."""
        failures = []
        for stop in (super().stop, self._sampler.stop):  # both, whatever the first raises
            try:
                stop(timeout)
            except BaseException as exc:  # the first is raised below
                failures.append(exc)
        if failures:
            raise failures[0]

    def raise_if_failed(self) -> None:
        """Raise the error that ended the tailing (or the lag samples), if any."""
        super().raise_if_failed()
        self._sampler.raise_if_failed()

    def _close_resources(self) -> None:
        for store in self.stores.values():
            store.close()

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
    def _loop(self) -> None:
        consumer = plain_consumer(self.kafka, **{"enable.partition.eof": False})
        with contextlib.closing(consumer):
            consumer.assign([TopicPartition(self.topic, p, self._positions[p])
                             for p in self.partitions])
            while not self.stop_requested:
                by_partition: dict[int, list] = {}
                for msg in consume_records(consumer, timeout=0.1):
                    by_partition.setdefault(msg.partition(), []).append(msg)
                for p, batch in by_partition.items():
                    self.stores[p].write_raw([(m.key(), m.value()) for m in batch])
                    self._positions[p] = batch[-1].offset() + 1
                    self.stores[p].write_checkpoint({p: self._positions[p]})

    def _sample_on_a_timer(self, loop: BackgroundLoop) -> None:
        with contextlib.closing(plain_consumer(self.kafka)) as consumer:
            while True:
                started = time.monotonic()
                self.sample(consumer)
                if loop.wait_stop(max(0.0, self.sample_every - (time.monotonic() - started))):
                    return

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
        timeout = timeout_seconds(timeout)
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
        state = "tailing" if self.running else "stopped"
        return f"StandbyReplica({self.topic!r}, {state}, positions={self._positions})"
