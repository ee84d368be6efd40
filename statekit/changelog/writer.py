"""Ship every committed batch's state changes of a query to its changelog topic, once.

``ChangelogWriter`` follows a query's commit log. For each new committed batch
it reads the batch's exact state changes with Spark's change-feed reader
(``StateReader.changes_frame``), encodes key and value as JSON inside Spark,
and produces one record per change to the Kafka partition of the state
partition holding the key (format: ``statekit.changelog.format``).

Exactly once across crashes: after each shipping round is flushed, a ledger
beside the checkpoint (``_statekit/changelog/<topic>.json``) records the last
shipped batch, each partition's next offset and its last batch. A restart
reads the few records written after the ledger's offsets (a round cut short
by a crash) and skips those (batch, seq) pairs when it ships the round again:
no batch is repeated, none is missing.

Example:
    >>> writer = ChangelogWriter(query.state, broker.bootstrap_servers,   # doctest: +SKIP
    ...                          "leaderboard-counts-changelog")
    >>> writer.ship()           # ships every committed batch not shipped yet  # doctest: +SKIP
    3
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Mapping

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import KafkaError, Producer
from pyspark.sql import functions as F

from statekit.changelog import format as fmt
from statekit.durations import to_millis
from statekit.errors import BatchNotRetained, ChangelogError, DataLoss, StatekitError
from statekit.kafka.topics import (
    CLIENT_LOG,
    consume_ranges,
    create_topic,
    describe_topic_config,
    end_offsets,
    list_topics,
    plain_consumer,
)
from statekit.state.reader import StateReader, committed_batches

LOG = logging.getLogger("statekit.changelog")
_JSON_OPTIONS = {"timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'", "ignoreNullFields": "false"}


def changelog_retention_ms(state: StateReader) -> int:
    """How long a windowed changelog keeps records: window + watermark delay + 1 day.

    Kafka Streams keeps a window store's changelog for the store's retention
    plus ``windowstore.changelog.additional.retention.ms`` (1 day by default).
    """
    spec = state.spec
    return spec.window.size_ms + to_millis(spec.watermark) + fmt.ADDITIONAL_RETENTION_MS


def batch_timestamp_ms(checkpoint: str, batch: int) -> int:
    """The trigger time of ``batch`` (``batchTimestampMs`` in Spark's offset log)."""
    path = os.path.join(checkpoint, "offsets", str(batch))
    try:
        with open(path) as src:
            src.readline()  # version line
            return int(json.loads(src.readline())["batchTimestampMs"])
    except (OSError, ValueError, KeyError) as exc:
        raise StatekitError(f"cannot read the trigger time of batch {batch} from {path!r}: "
                            f"{exc}") from None


def state_partitions(checkpoint: str) -> int:
    """How many state partitions the query has (its ``spark.sql.shuffle.partitions``)."""
    batches = committed_batches(checkpoint)
    path = os.path.join(checkpoint, "offsets", str(batches[0] if batches else 0))
    with open(path) as src:
        src.readline()
        conf = json.loads(src.readline()).get("conf", {})
    return int(conf["spark.sql.shuffle.partitions"])


class ChangelogWriter:
    """Ships a query's committed state changes to ``topic``; ``start()`` does it in the background.

    Args:
        state: the query's state reader (checkpoint and what the state holds).
        bootstrap_servers: the Kafka cluster.
        topic: the changelog topic (``changelog_topic(app, store)``); created when
            missing with ``compact,delete`` and ``retention.ms`` (windowed state).
        kafka_config: extra librdkafka settings for the producer and readers.
        poll_interval: seconds between looks at the commit log when idle.
    """

    def __init__(self, state: StateReader, bootstrap_servers: str, topic: str, *,
                 kafka_config: Mapping[str, str] | None = None, poll_interval: float = 0.2):
        self.state, self.bootstrap_servers, self.topic = state, bootstrap_servers, topic
        self.kafka_config = dict(kafka_config or {})
        self.poll_interval = poll_interval
        self.ledger_path = os.path.join(state.checkpoint, "_statekit", "changelog",
                                        f"{topic}.json")
        self.skipped = 0  # records found already shipped by a round a crash cut short
        self._producer: Producer | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._error: BaseException | None = None

    # --- ledger ---------------------------------------------------------------------
    def _read_ledger(self) -> dict | None:
        if not os.path.exists(self.ledger_path):
            return None
        with open(self.ledger_path) as src:
            ledger = json.load(src)
        ledger["next_offset"] = {int(p): o for p, o in ledger["next_offset"].items()}
        ledger["prev"] = {int(p): b for p, b in ledger["prev"].items()}
        return ledger

    def _write_ledger(self, ledger: dict) -> None:
        os.makedirs(os.path.dirname(self.ledger_path), exist_ok=True)
        with open(self.ledger_path + ".tmp", "w") as out:
            json.dump(ledger, out)
        os.replace(self.ledger_path + ".tmp", self.ledger_path)

    @property
    def shipped_batch(self) -> int:
        """The last batch whose changes are all in the topic (-1 before the first)."""
        ledger = self._read_ledger()
        return ledger["last_batch"] if ledger else -1

    # --- topic ----------------------------------------------------------------------
    def _ensure_topic(self, partitions: int) -> None:
        existing = list_topics(self.bootstrap_servers, self.kafka_config)
        if self.topic not in existing:
            create_topic(self.bootstrap_servers, self.topic, partitions,
                         fmt.topic_config(True, changelog_retention_ms(self.state)),
                         client_config=self.kafka_config)
            return
        if existing[self.topic] != partitions:
            raise ChangelogError(
                f"changelog topic {self.topic!r} has {existing[self.topic]} partitions but the "
                f"state store has {partitions}: delete the topic or name another store")
        policy = describe_topic_config(self.bootstrap_servers, self.topic, self.kafka_config
                                       ).get("cleanup.policy", "")
        if "compact" not in policy:
            raise ChangelogError(
                f"topic {self.topic!r} has cleanup.policy={policy!r}, not a changelog's "
                f"'compact' or 'compact,delete': is it another application's topic?")

    def _fresh_ledger(self, partitions: int) -> dict:
        """A ledger for a topic statekit has not shipped to from this checkpoint."""
        consumer = plain_consumer(self.bootstrap_servers, self.kafka_config)
        try:
            ends = end_offsets(consumer, self.topic, list(range(partitions)))
        finally:
            consumer.close()
        holding = {p: hi - lo for p, (lo, hi) in ends.items() if hi > lo}
        if holding:
            raise ChangelogError(
                f"changelog topic {self.topic!r} already holds records ({holding} per partition) "
                f"that this checkpoint ({self.state.checkpoint!r}) did not write: delete the "
                f"topic (statekit.kafka.delete_topic) or name another store")
        return {"topic": self.topic, "partitions": partitions, "last_batch": -1,
                "next_offset": {p: hi for p, (_, hi) in ends.items()},
                "prev": dict.fromkeys(range(partitions), -1)}

    def _already_shipped(self, ledger: dict) -> set[tuple[int, int, int]]:
        """(partition, batch, seq) of records written after the ledger: a cut-short round."""
        consumer = plain_consumer(self.bootstrap_servers, self.kafka_config)
        found: set[tuple[int, int, int]] = set()
        try:
            ends = end_offsets(consumer, self.topic, list(ledger["next_offset"]))
            for p, (lo, hi) in ends.items():
                if hi < ledger["next_offset"][p] or lo > ledger["next_offset"][p]:
                    raise ChangelogError(
                        f"changelog topic {self.topic!r} partition {p} now spans offsets "
                        f"{lo}..{hi}, but batches up to {ledger['last_batch']} were shipped up "
                        f"to offset {ledger['next_offset'][p]}: was the topic deleted or "
                        f"recreated? Delete {self.ledger_path!r} and the topic to ship again")
            ranges = {p: (ledger["next_offset"][p], hi) for p, (_, hi) in ends.items()}
            for chunk in consume_ranges(consumer, self.topic, ranges):
                for msg in chunk:
                    head = fmt.parse_headers(msg.headers())
                    if head is None:
                        raise ChangelogError(
                            f"topic {self.topic!r} partition {msg.partition()} offset "
                            f"{msg.offset()} has no statekit headers: another producer "
                            f"writes to this changelog")
                    found.add((msg.partition(), head[fmt.H_BATCH], head[fmt.H_SEQ]))
        finally:
            consumer.close()
        return found

    # --- shipping -------------------------------------------------------------------
    def _encoded_changes(self, first: int, last: int) -> pa.Table:
        """batch, partition, key (JSON bytes), value (JSON bytes, null for deletes), in order."""
        spec = self.state.spec
        frame = self.state.changes_frame(first, last)
        key = F.to_json(F.struct(*fmt.changelog_key_columns(spec.key_columns)), _JSON_OPTIONS)
        value = F.to_json(F.struct(*spec.value_columns), _JSON_OPTIONS)
        encoded = frame.select(
            "batch", "partition", key.cast("binary").alias("key"),
            F.when(F.col("change") == "put", value).cast("binary").alias("value"))
        table = encoded.toArrow()
        # Spark returns each state partition's rows in write order; keep it within a
        # batch and partition while grouping by batch, then partition.
        # (Arrow's sort is stable.)
        return table.take(pc.sort_indices(table, [("batch", "ascending"),
                                                  ("partition", "ascending")]))

    def ship(self, through: int | None = None) -> int:
        """Ship the committed batches not shipped yet (up to ``through``); returns the last shipped.
        """
        with self._lock:
            return self._ship_committed(through)

    def _ship_committed(self, through: int | None) -> int:
        batches = committed_batches(self.state.checkpoint)
        if through is not None:
            batches = [b for b in batches if b <= through]
        if not batches:
            return self.shipped_batch
        ledger = self._read_ledger()
        if ledger is None:
            partitions = state_partitions(self.state.checkpoint)
            self._ensure_topic(partitions)
            ledger = self._fresh_ledger(partitions)
            done = set()
        else:
            done = self._already_shipped(ledger)
        first, last = ledger["last_batch"] + 1, batches[-1]
        if first > last:
            return ledger["last_batch"]
        if first < batches[0]:
            raise DataLoss(
                f"changelog {self.topic!r} was shipped up to batch {first - 1}, but the "
                f"checkpoint {self.state.checkpoint!r} now keeps batches {batches[0]}..{last}: "
                f"the changes of batches {first}..{batches[0] - 1} are gone")
        try:
            table = self._encoded_changes(first, last)
        except BatchNotRetained as exc:
            raise DataLoss(f"cannot ship batches {first}..{last} to {self.topic!r}: {exc}"
                           ) from None
        self._produce(table, first, last, ledger, done)
        return last

    def _produce(self, table: pa.Table, first: int, last: int, ledger: dict,
                 done: set[tuple[int, int, int]]) -> None:
        producer = self._producer_once()
        failures: list[KafkaError] = []

        def delivered(err, msg):
            if err is not None:
                failures.append(err)

        cols = table.to_pydict()
        batch_col, part_col, keys, values = (cols["batch"], cols["partition"], cols["key"],
                                             cols["value"])
        n, i = len(batch_col), 0
        stamps = {b: batch_timestamp_ms(self.state.checkpoint, b) for b in set(batch_col)}
        prev = dict(ledger["prev"])
        while i < n:  # one run of rows per (batch, partition)
            batch, part = batch_col[i], part_col[i]
            j = i
            while j < n and batch_col[j] == batch and part_col[j] == part:
                j += 1
            count, stamp = j - i, stamps[batch]
            for seq in range(count):
                if (part, batch, seq) in done:
                    self.skipped += 1
                    continue
                producer.produce(self.topic, key=keys[i + seq], value=values[i + seq],
                                 partition=part, timestamp=stamp,
                                 headers=fmt.headers(batch, seq, count, prev[part]),
                                 on_delivery=delivered)
                if seq % 10_000 == 9_999:
                    producer.poll(0)
            prev[part] = batch
            i = j
        left = producer.flush(60)
        if left or failures:
            detail = failures[0] if failures else f"{left} records still queued after 60 s"
            raise ChangelogError(f"shipping batches {first}..{last} to {self.topic!r} failed: "
                                 f"{detail}; the next ship() resumes where this one stopped")
        consumer = plain_consumer(self.bootstrap_servers, self.kafka_config)
        try:
            ends = end_offsets(consumer, self.topic, list(ledger["next_offset"]))
        finally:
            consumer.close()
        self._write_ledger({**ledger, "last_batch": last, "prev": prev,
                            "next_offset": {p: hi for p, (_, hi) in ends.items()}})

    def _producer_once(self) -> Producer:
        if self._producer is None:
            self._producer = Producer({
                "bootstrap.servers": self.bootstrap_servers, "logger": CLIENT_LOG,
                "enable.idempotence": True, "acks": "all", "linger.ms": 5,
                "queue.buffering.max.messages": 1_000_000, **self.kafka_config})
        return self._producer

    # --- background -----------------------------------------------------------------
    def start(self) -> ChangelogWriter:
        """Ship in a background thread as batches commit, until ``stop()``."""
        if self._thread is None or not self._thread.is_alive():
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name=f"ship-{self.topic}",
                                            daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                before = self.shipped_batch
                if self.ship() == before:
                    self._stop.wait(self.poll_interval)
            except BaseException as exc:  # surfaced by wait_shipped() / stop()
                LOG.error("changelog %s: %s", self.topic, exc)
                self._error = exc
                return

    def raise_if_failed(self) -> None:
        if self._error is not None:
            raise self._error

    def wait_shipped(self, batch: int, timeout: float = 120.0) -> None:
        """Block until ``batch`` is shipped (by the background thread or right here)."""
        deadline = time.monotonic() + timeout
        while self.shipped_batch < batch:
            self.raise_if_failed()
            if self._thread is None or not self._thread.is_alive():
                self.ship()
                continue
            if time.monotonic() > deadline:
                raise TimeoutError(f"batch {batch} not shipped to {self.topic!r} in "
                                   f"{timeout:.0f} s (shipped: {self.shipped_batch})")
            time.sleep(0.05)

    def stop(self) -> None:
        """Stop the background thread after shipping what is committed; raise its error."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        self.raise_if_failed()
        self.ship()
        if self._producer is not None:
            self._producer.flush(30)

    def __repr__(self) -> str:
        return f"ChangelogWriter({self.topic!r}, shipped_batch={self.shipped_batch})"
