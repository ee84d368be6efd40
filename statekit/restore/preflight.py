"""Before a restore: will it succeed, from where, and how long will it take? And will the
query's restart lose input?

``restore_preflight`` reads, and writes nothing:

- each changelog partition's log start, its end (the high watermark) and its last stable
  offset (the end a ``read_committed`` restore reads to: a transaction still open holds back
  everything after its first record);
- each store's checkpointed offset (``statekit-store.checkpoint`` in its directory: where a
  restore goes on from), the topic's ``cleanup.policy`` and ``retention.ms``;
- with the query's ``checkpoint``: the changelog writer's ledger (how far the query shipped,
  and to which offsets) and the source offsets of the last committed batch (where a restart
  reads from) against the source topic's log start;
- a sample restore: up to ``sample`` records of the partition with the most to read, read,
  decoded and written into an in-memory store of the same kind, timed. The estimate is the
  offsets left at the sample's pace (offsets, not records: a compacted log has holes).

Each finding has a verdict: ``fails`` (``restore_stores`` would refuse), ``incomplete``
(the restore runs, but the state it builds misses changes), ``waits`` (records not readable
yet), ``input lost`` (a restart of the query skips or fails on deleted input) or ``note``.
Kafka Streams answers none of these before a restore: its restore consumer finds a deleted
offset as an ``OffsetOutOfRangeException`` midway and starts over from scratch.

Example:
    >>> check = restore_preflight(broker, "board-counts-changelog", spec,     # doctest: +SKIP
    ...                           "/tmp/stores", checkpoint=query.checkpoint)
    >>> check.ok, check.estimated_seconds                                     # doctest: +SKIP
    (True, 2.4)
    >>> check.partitions        # offsets, records to read, seconds per partition  # doctest: +SKIP
    >>> check.findings          # verdict, partition, what, remedy                # doctest: +SKIP
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from statekit._lazy import pd
from statekit.changelog.ledger import Ledger
from statekit.changelog.reader import topic_partitions
from statekit.errors import BadArgument, StatekitError
from statekit.kafka.clients import plain_consumer
from statekit.kafka.offsets import consume_ranges, log_starts, offset_bounds
from statekit.kafka.topics import describe_topic_config, list_topics
from statekit.model.connection import Kafka, connect
from statekit.model.query_spec import QuerySpec
from statekit.model.store_schema import PartShape
from statekit.restore.listener import Listeners
from statekit.restore.partition import PartitionRestore, open_partition_store, rebuild_start
from statekit.spark_state.checkpoint import Checkpoint
from statekit.spark_state.progress import kafka_offsets
from statekit.stores.offset_checkpoint import OffsetCheckpointFile
from statekit.validate import whole_number

FAILS, INCOMPLETE, WAITS, INPUT_LOST, NOTE = "fails", "incomplete", "waits", "input lost", "note"
VERDICTS = (FAILS, INCOMPLETE, WAITS, INPUT_LOST, NOTE)
PARTITION_COLUMNS = ["partition", "store_offset", "log_start", "log_end", "stable_end", "start",
                     "to_read", "estimated_seconds"]
FINDING_COLUMNS = ["verdict", "partition", "what", "remedy"]
#: records the sample restore reads at most (and seconds it spends at most)
SAMPLE, SAMPLE_SECONDS = 20_000, 5.0


@dataclass(frozen=True)
class RestorePreflight:
    """What ``restore_preflight`` found.

    Attributes:
        topic: the changelog topic.
        partitions: one row per partition: ``store_offset`` (the store's checkpoint; NA:
            none, a restore starts at the log start), ``log_start``, ``log_end`` (high
            watermark), ``stable_end`` (last stable offset), ``start`` (where the restore
            begins: ``statekit.restore.partition.rebuild_start``), ``to_read`` (offsets
            from ``start`` to ``stable_end``),
            ``estimated_seconds`` (at the sample's pace).
        findings: one row per finding: ``verdict``, ``partition`` (NA: the whole topic or
            the query), ``what``, ``remedy``.
        offsets_per_s, records_per_s: the sample restore's pace (None: nothing to sample).
        sampled: records the sample restore read.
        estimated_seconds: every partition read by one consumer at that pace (a restore in
            processes or threads overlaps them: less).
    """

    topic: str
    partitions: pd.DataFrame
    findings: pd.DataFrame
    offsets_per_s: float | None
    records_per_s: float | None
    sampled: int
    estimated_seconds: float | None

    @property
    def ok(self) -> bool:
        """No finding says the restore fails or builds an incomplete state."""
        return not self.findings["verdict"].isin([FAILS, INCOMPLETE]).any()

    def of(self, verdict: str) -> pd.DataFrame:
        """The findings of one verdict."""
        if verdict not in VERDICTS:
            raise BadArgument("verdict", verdict, VERDICTS)
        return self.findings[self.findings["verdict"] == verdict].reset_index(drop=True)

    def __repr__(self) -> str:
        to_read = int(self.partitions["to_read"].sum())
        eta = ("unknown" if self.estimated_seconds is None
               else f"about {self.estimated_seconds:.1f} s")
        head = (f"restore of {self.topic!r}: {'ok' if self.ok else 'NOT ok'}; {to_read:,} "
                f"offsets to read in {len(self.partitions)} partitions, {eta}")
        lines = [f"- {f.verdict}: {f.what} To do: {f.remedy}"
                 for f in self.findings.itertuples()]
        return "\n".join([head, *lines])


def restore_preflight(kafka: Kafka, topic: str, spec: QuerySpec | PartShape,
                      directory: str | os.PathLike | None = None, *,
                      store_name: str | None = None,
                      partitions: Sequence[int] | None = None,
                      checkpoint: str | os.PathLike | Checkpoint | None = None,
                      sample: int = SAMPLE) -> RestorePreflight:
    """Check a restore of ``topic`` into the stores under ``directory`` before it runs.

    Args:
        kafka: the cluster (a ``KafkaConnection``, ``"host:port"`` or an ``EmbeddedBroker``).
        topic, spec, directory, store_name, partitions: as ``restore_stores`` takes them.
        checkpoint: the query's checkpoint, to check its changelog ledger and its source
            offsets too (the source topic on the same cluster).
        sample: records the sample restore reads at most (0: no estimate).

    Raises:
        BadArgument: a partition the topic does not have, a bad ``sample``;
        TopicNotFound: no such topic; BrokerUnreachable.
    """
    sample = whole_number(sample, "sample", minimum=0)
    conn = connect(kafka)
    wanted = topic_partitions(conn, topic, partitions)
    name = store_name or topic.removesuffix("-changelog")
    marks = offset_bounds(conn, topic, wanted, committed=False)
    stable = offset_bounds(conn, topic, wanted, committed=True)
    config = describe_topic_config(conn, topic)
    findings: list[tuple] = []
    rows = []
    for p in wanted:
        low, high = marks[p]
        lso = max(low, min(stable[p][1], high))
        stored = _store_offset(directory, name, p)
        start = rebuild_start(stored, low, high)
        where = (f"store {str(_store_dir(directory, name, p))!r}" if directory is not None
                 else None)
        findings += _partition_findings(topic, _Offsets(p, stored, low, high, lso), where,
                                        config)
        rows.append([p, stored, low, high, lso, start, max(lso - start, 0) if start is not None
                     else 0, None])
    frame = pd.DataFrame(rows, columns=PARTITION_COLUMNS).astype(
        {"store_offset": "Int64", "start": "Int64"})
    findings += _topic_findings(topic, config, frame)
    if checkpoint is not None:
        findings += _ledger_findings(Checkpoint(checkpoint), topic, marks)
        findings += _source_findings(conn, Checkpoint(checkpoint))
    offsets_per_s, records_per_s, sampled = _sample(conn, topic, spec, name, frame, sample)
    if offsets_per_s:
        frame["estimated_seconds"] = frame["to_read"] / offsets_per_s
        total = float(frame["estimated_seconds"].sum())
    else:
        frame["estimated_seconds"] = [0.0 if n == 0 else None for n in frame["to_read"]]
        total = 0.0 if not frame["to_read"].any() else None
    order = {v: i for i, v in enumerate(VERDICTS)}
    findings.sort(key=lambda f: (order[f[0]], -1 if f[1] is None else f[1]))
    table = pd.DataFrame(findings, columns=FINDING_COLUMNS).astype({"partition": "Int64"})
    return RestorePreflight(topic, frame, table, offsets_per_s, records_per_s, sampled, total)


def _store_dir(directory, name: str, partition: int) -> Path:
    return Path(directory) / name / str(partition)


def _store_offset(directory, name: str, partition: int) -> int | None:
    """The store's checkpointed next offset for ``partition`` (None: no store, or none)."""
    if directory is None:
        return None
    folder = _store_dir(directory, name, partition)
    if not folder.is_dir():
        return None
    return OffsetCheckpointFile(folder).read().get(partition)


@dataclass(frozen=True)
class _Offsets:
    """One partition's offsets: the store's checkpoint, log start, end and stable end."""

    partition: int
    stored: int | None
    low: int
    high: int
    lso: int


def _partition_findings(topic: str, o: _Offsets, where: str | None,
                        config: dict) -> list[tuple]:
    p, stored, low, high, lso = o.partition, o.stored, o.low, o.high, o.lso
    store = where or "the in-memory store"
    found = []
    scratch = (f"delete {where} to restore partition {p} from the changelog's start"
               if where else "restore from the changelog's start")
    policy = config.get("cleanup.policy", "")
    if stored is not None and stored > high:
        found.append((FAILS, p, f"{store} restored {topic!r} partition {p} up to offset "
                      f"{stored}, but the partition now ends at offset {high}: the topic was "
                      f"deleted or recreated since.", scratch))
    elif stored is not None and stored < low:
        found.append((FAILS, p, f"{store} restored {topic!r} partition {p} up to offset "
                      f"{stored}, but the partition now starts at offset {low}: offsets "
                      f"{stored}..{low - 1} were deleted (retention or DeleteRecords) before "
                      f"the store read them.", scratch))
    if low > 0 and (stored is None or stored < low):
        gone = (f"{topic!r} partition {p} starts at offset {low}: the changes at offsets "
                f"0..{low - 1} are gone")
        if "compact" in policy and "delete" in policy:  # a windowed changelog's retention
            found.append((NOTE, p, f"{gone}, deleted by retention.ms as a windowed store's "
                          f"changelog is meant to be: windows older than that are not restored.",
                          "nothing, if the query's windows are older than retention.ms; else "
                          "raise the topic's retention.ms"))
        else:
            found.append((INCOMPLETE, p, f"{gone}, so a store restored from scratch misses "
                          f"every key whose last change was among them.",
                          "rebuild the state from the query's own checkpoint (Spark's state is "
                          "whole), or replay the source into a new checkpoint; keep a "
                          "key-value store's changelog on cleanup.policy=compact alone"))
    if lso < high:
        found.append((WAITS, p, f"{topic!r} partition {p} has records at offsets {lso}.."
                      f"{high - 1} that a read_committed restore cannot read yet: a "
                      f"transaction is still open (or its commit markers are not written "
                      f"yet). The restore stops at offset {lso}; records after it arrive when "
                      f"the transaction commits, and are dropped if it aborts.",
                      "wait for the writer's next commit; a writer that died is aborted by the "
                      "broker after its transaction.timeout.ms, or fenced when it starts again"))
    if low == high:
        found.append((NOTE, p, f"{topic!r} partition {p} is empty: its store starts empty.",
                      "nothing, if the query wrote no state to this partition"))
    return found


def _topic_findings(topic: str, config: dict, frame: pd.DataFrame) -> list[tuple]:
    policy = config.get("cleanup.policy", "")
    retention = config.get("retention.ms", "")
    if "compact" not in policy:
        kept = ("forever" if retention in ("", "-1")
                else f"for retention.ms={retention} ({int(retention) / 86_400_000:g} days)")
        return [(NOTE, None, f"{topic!r} is not compacted (cleanup.policy={policy}): it keeps "
                 f"every change {kept}, so a restore reads them all, and once retention "
                 f"deletes changes, a store restored from scratch misses the keys they last "
                 f"changed.", "changelogs are compacted: cleanup.policy=compact (compact,delete "
                 "for windowed stores)")]
    return []


def _ledger_findings(checkpoint: Checkpoint, topic: str,
                     marks: dict[int, tuple[int, int]]) -> list[tuple]:
    """What the query's changelog writer shipped against what the topic holds."""
    try:
        ledger = Ledger(str(checkpoint.ledger_path(topic)), topic).read()
    except StatekitError as exc:
        return [(NOTE, None, f"the ledger of {topic!r} in {str(checkpoint)!r} cannot be read: "
                 f"{exc}", "check the checkpoint's _statekit/changelog folder")]
    if ledger is None:
        return [(NOTE, None, f"{str(checkpoint)!r} has no ledger for {topic!r}: the query did "
                 f"not ship its changelog there, so what the topic should hold is not known.",
                 "pass the checkpoint of the query that writes this changelog")]
    found = []
    for p, shipped in sorted(ledger.next_offset.items()):
        if p in marks and shipped > marks[p][1]:
            found.append((INCOMPLETE, p, f"the query shipped {topic!r} partition {p} up to "
                          f"offset {shipped}, but the partition ends at offset {marks[p][1]}: "
                          f"records the query committed are gone (the topic was recreated, or "
                          f"a replica without them became the leader).",
                          "rebuild the state from the query's own checkpoint, or ship again "
                          "into a new topic"))
    last = checkpoint.batch_range()
    if last is not None and ledger.last_batch < last[1]:
        found.append((NOTE, None, f"the changelog holds the changes up to batch "
                      f"{ledger.last_batch}; the query has committed batch {last[1]}: a restore "
                      f"now builds the state of batch {ledger.last_batch}.",
                      "wait for the changelog writer to ship the rest"))
    return found


def _source_findings(conn, checkpoint: Checkpoint) -> list[tuple]:
    """The source offsets a restart reads from against the source topics' log starts."""
    span = checkpoint.batch_range()
    if span is None:
        return []
    offsets = {}
    for text in checkpoint.offset_log(span[1])[2]:
        offsets.update(kafka_offsets(text) or {})
    if not offsets:
        return []
    topics = list_topics(conn)
    lows = log_starts(conn, [part for part in offsets if part[0] in topics])
    found = []
    for (source, p), next_offset in sorted(offsets.items()):
        if source not in topics:
            found.append((NOTE, p, f"source topic {source!r} is not on this cluster: its "
                          f"retention is not checked.", "check it on its own cluster"))
            continue
        low = lows[(source, p)]
        if next_offset < low:
            found.append((INPUT_LOST, p, f"a restart reads source {source!r} partition {p} "
                          f"from offset {next_offset} (after batch {span[1]}), but it now "
                          f"starts at offset {low}: offsets {next_offset}..{low - 1} were "
                          f"deleted before the query read them.",
                          "restart to accept the loss (Spark fails unless failOnDataLoss is "
                          "false), or raise the source's retention.ms above the longest "
                          "stop"))
    return found


def _sample(conn, topic: str, spec, name: str, frame: pd.DataFrame,
            sample: int) -> tuple[float | None, float | None, int]:
    """(offsets/s, records/s, records) of a sample restore of the partition with the most to
    read into an in-memory store; Nones when there is nothing to read or ``sample`` is 0."""
    readable = frame[frame["start"].notna() & (frame["to_read"] > 0)]
    if sample == 0 or readable.empty:
        return None, None, 0
    row = readable.loc[readable["to_read"].idxmax()]
    p, start = int(row["partition"]), int(row["start"])
    end = min(int(row["stable_end"]), start + sample)
    store = open_partition_store(spec, name, p, None, topic)
    consumer = plain_consumer(conn)
    restore = PartitionRestore(topic, p, store, start, end, Listeners([]), None)
    try:
        began = time.perf_counter()
        restore.begin()
        chunks = consume_ranges(consumer, topic, {p: (start, end)})
        try:
            for messages in chunks:
                restore.write(messages)
                if restore.done or time.perf_counter() - began > SAMPLE_SECONDS:
                    break
        finally:
            chunks.close()
        seconds = time.perf_counter() - began
        advanced = restore.next_offset - start
    finally:
        consumer.close()
        store.close()
    if seconds <= 0 or advanced <= 0:
        return None, None, restore.total
    return advanced / seconds, restore.total / seconds, restore.total
