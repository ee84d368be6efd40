"""A query's Kafka input read again, batch by batch: what ``late_events`` counts and
``explain`` shows.

Spark's offset log keeps, per batch, the offsets each Kafka partition was read up to;
``KafkaInput`` keeps which topic, which cluster and how values are parsed. ``read_batches``
reads the records of chosen batches back from the broker, each tagged with its batch, and
names the batches whose records are no longer all there (deleted by retention). Spark logs no
start for the first batch: ``record_start`` keeps it beside a fresh checkpoint. A query over a
streaming DataFrame of text lines from files is read again the same way from the files its
source logged per batch (``FileInput``, ``read_file_batches``).

Example:
    >>> rows, gone = read_batches(query_input, {3: (ranges, late_ms)})   # doctest: +SKIP
"""

from __future__ import annotations

import bisect
import json
import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

import pandas as pd
from pyspark.sql.types import StructType

from statekit.atomic import write_atomic
from statekit.kafka.clients import plain_consumer
from statekit.kafka.offsets import consume_ranges, offset_bounds, watermarks_of
from statekit.kafka.topics import partition_count
from statekit.model.connection import KafkaConnection
from statekit.spark_state.checkpoint import Checkpoint
from statekit.spark_state.progress import kafka_offsets


@dataclass(frozen=True)
class KafkaInput:
    """What a query reads, kept so statekit can read it again: the topic, the cluster, and how
    its values are parsed (``parse_events``'s schema and required fields)."""

    topic: str
    kafka: KafkaConnection
    schema: str | StructType
    required: tuple[str, ...]


#: the rows ``read_batches`` gives, as a Spark schema: a Kafka record, its batch and the
#: watermark its late events are judged by (ms)
RAW_SCHEMA = ("key binary, value binary, topic string, partition int, offset long, "
              "timestamp timestamp, _sk_batch long, _sk_late_ms long")


def read_batches(source: KafkaInput, batches: dict[int, tuple[dict, int]]
                  ) -> tuple[pd.DataFrame, set[int]]:
    """The Kafka records of ``batches`` (batch → (input ranges, late watermark ms)), tagged
    with their batch, and the batches whose records are not all on the broker any more."""
    spans: dict[tuple[str, int], list[tuple[int, int, int, int]]] = {}
    for batch, (ranges, late_ms) in batches.items():
        for part, (start, end) in ranges.items():
            if end > start:
                spans.setdefault(part, []).append((start, end, batch, late_ms))
    columns: dict[str, list] = {c: [] for c in ("key", "value", "topic", "partition", "offset",
                                                 "timestamp", "_sk_batch", "_sk_late_ms")}
    seen: dict[int, int] = {}
    consumer = plain_consumer(source.kafka)
    try:
        for (topic, partition), parts in sorted(spans.items()):
            parts.sort()
            starts = [p[0] for p in parts]
            low, _ = watermarks_of(consumer, topic, partition)  # retention may have moved it
            wanted = {partition: (max(parts[0][0], low), parts[-1][1])}
            for chunk in consume_ranges(consumer, topic, wanted):
                for msg in chunk:
                    offset = msg.offset()
                    i = bisect.bisect_right(starts, offset) - 1
                    if i < 0 or offset >= parts[i][1]:
                        continue
                    _, _, batch, late_ms = parts[i]
                    seen[batch] = seen.get(batch, 0) + 1
                    for name, value in (("key", msg.key()), ("value", msg.value()),
                                        ("topic", topic), ("partition", partition),
                                        ("offset", offset),
                                        ("timestamp", pd.Timestamp(msg.timestamp()[1], unit="ms")),
                                        ("_sk_batch", batch), ("_sk_late_ms", late_ms)):
                        columns[name].append(value)
    finally:
        consumer.close()
    expected = {b: sum(max(end - start, 0) for start, end in r.values())
                for b, (r, _) in batches.items()}
    gone = {b for b, n in expected.items() if seen.get(b, 0) != n}
    return pd.DataFrame(columns), gone


#: where ``record_start`` keeps the offsets a checkpoint's first batch started at
START_FILE = "input_start.json"


def record_start(checkpoint: Checkpoint, source: KafkaInput, starting_offsets: str) -> None:
    """Keep, beside a fresh checkpoint, the offsets its first batch starts at: Spark's offset
    log has only each batch's end, so batch 0's start would otherwise be unknown once
    retention moves the log start. ``earliest``: each partition's log start now; ``latest``:
    its end; a JSON of offsets: those (``-2`` earliest, ``-1`` latest)."""
    kafka, topic = source.kafka, source.topic
    partitions = list(range(partition_count(kafka, topic)))
    bounds = offset_bounds(kafka, topic, partitions, committed=False)
    given = json.loads(starting_offsets).get(topic, {}) if starting_offsets.startswith("{") \
        else {}
    starts = {}
    for p, (low, high) in bounds.items():
        chosen = given.get(str(p), -1 if starting_offsets == "latest" else -2)
        starts[str(p)] = low if chosen == -2 else high if chosen == -1 else int(chosen)
    write_atomic(checkpoint.statekit_dir / START_FILE, json.dumps({topic: starts}))


def recorded_start(checkpoint: Checkpoint) -> dict[tuple[str, int], int] | None:
    """What ``record_start`` kept: (topic, partition) → offset; None when nothing was kept
    (a checkpoint started before statekit kept it, or by another program)."""
    path = checkpoint.statekit_dir / START_FILE
    try:
        return kafka_offsets(path.read_text())
    except OSError:
        return None


# --- a streaming DataFrame of text lines from files ---------------------------------------------
@dataclass(frozen=True)
class FileInput:
    """A streaming DataFrame of text lines (``spark.readStream.text(folder)``) that a query
    parses, kept so statekit can read its files again: how the lines are parsed
    (``parse_events``' schema and required fields)."""

    schema: str | StructType
    required: tuple[str, ...]


#: the rows ``read_file_batches`` gives, as a Spark schema: a line, where it is (``topic``: the
#: file, ``partition`` 0, ``offset``: its line number from 1), its batch and late watermark (ms)
FILE_RAW_SCHEMA = ("value binary, topic string, partition int, offset long, _sk_batch long, "
                   "_sk_late_ms long")


def batch_files(checkpoint: Checkpoint, source: int = 0) -> dict[int, list[str]]:
    """Batch → the files Spark's file source read in it, from the source's own log
    (``sources/<source>/<batch>``, compacted every few batches into ``<batch>.compact``), as
    Spark logged them (``file:///...``). Empty when the source is not a file source."""
    folder = checkpoint.path / "sources" / str(source)
    files: dict[int, list[str]] = {}
    try:
        names = [n for n in os.listdir(folder) if not n.startswith(".")]
    except OSError:
        return files
    for name in names:
        if not (name.isdigit() or name.endswith(".compact")):
            continue
        try:
            lines = (folder / name).read_text().splitlines()
        except (OSError, UnicodeDecodeError):
            continue
        for line in lines[1:]:   # the first line is the log's version ("v1")
            try:
                entry = json.loads(line)
                batch, path = int(entry["batchId"]), str(entry["path"])
            except (ValueError, KeyError, TypeError):
                continue
            if path not in files.setdefault(batch, []):
                files[batch].append(path)
    return files


def read_file_batches(checkpoint: Checkpoint, batches: dict[int, int]
                      ) -> tuple[pd.DataFrame, set[int]]:
    """The lines of the files each of ``batches`` (batch → late watermark ms) read, tagged
    with their batch, and the batches whose files are no longer all there."""
    logged = batch_files(checkpoint)
    columns: dict[str, list] = {c: [] for c in ("value", "topic", "partition", "offset",
                                                 "_sk_batch", "_sk_late_ms")}
    gone = set()
    for batch, late_ms in sorted(batches.items()):
        for uri in logged.get(batch, []):
            try:
                data = Path(unquote(urlparse(uri).path)).read_bytes()
            except OSError:
                gone.add(batch)
                continue
            lines = data.split(b"\n")
            if lines and lines[-1] == b"":   # the newline that ends the file starts no line
                lines.pop()
            for number, line in enumerate(lines, start=1):
                for name, value in (("value", line.removesuffix(b"\r")), ("topic", uri),
                                    ("partition", 0), ("offset", number),
                                    ("_sk_batch", batch), ("_sk_late_ms", late_ms)):
                    columns[name].append(value)
    return pd.DataFrame(columns), gone
