"""Read a changelog topic into pandas and check that it is whole.

``read_changelog`` returns a ``Changelog`` (``statekit.changelog.log``): one row
per record in ``records`` (``partition``, ``offset``, ``timestamp``, ``batch``,
``seq``, ``tombstone``, ``key`` — the key's JSON text — then the decoded key
columns and value columns, NA on tombstones) and, said explicitly, which
columns are key and value and the log's last batch. It refuses a topic that
statekit did not write, a log with a batch missing or repeated, and a batch
beyond the log's end, naming what it found.

Example:
    >>> log = read_changelog(broker, "statekit-aggregate-changelog")     # doctest: +SKIP
    >>> log.materialize(to_batch=3)          # equals query.snapshot(batch=3)   # doctest: +SKIP
"""

from __future__ import annotations

import io
from collections.abc import Sequence

from tqdm.auto import tqdm

from statekit._lazy import np, pa, pa_json, pd
from statekit.changelog import arrow as arrow_rows
from statekit.changelog.log import Changelog
from statekit.changelog.meta import Position, decode_meta, meta_topic
from statekit.errors import ChangelogError
from statekit.kafka.clients import plain_consumer
from statekit.kafka.offsets import consume_ranges, end_offsets
from statekit.kafka.topics import partition_count
from statekit.model import changelog_record as codec
from statekit.model.connection import Kafka, connect
from statekit.model.store_schema import StoreSchema
from statekit.spark_state.times import epoch_ms_times, pandas_times
from statekit.validate import batch_span, optional_batch_id, whole_number

_PROGRESS_FROM = 100_000  # records: show a progress bar for reads this large


def topic_partitions(kafka: Kafka, topic: str, partitions: Sequence[int] | None) -> list[int]:
    """``partitions`` of ``topic`` checked against what it has (all of them when None)."""
    n = partition_count(kafka, topic)
    if partitions is None:
        return list(range(n))
    return [whole_number(p, "partition", minimum=0, maximum=n - 1,
                         accepted=f"a partition of {topic!r}: 0..{n - 1}") for p in partitions]


def read_changelog(
    kafka: Kafka,
    topic: str,
    *,
    from_batch: int | None = None,
    to_batch: int | None = None,
    partitions: Sequence[int] | None = None,
    progress: bool | None = None,
    check: bool = True,
) -> Changelog:
    """The records of changelog ``topic`` (batches ``from_batch..to_batch``) as a ``Changelog``.

    Records are sorted by partition and offset; the result also says the key and
    value columns and ``last_batch`` (the last batch in the whole log).
    ``progress`` shows a tqdm bar (by default for reads over 100,000 records).
    ``check=False`` skips the proof that no batch is missing or repeated (for a
    compacted copy, whose offsets no longer show what was removed).
    """
    conn = connect(kafka)
    wanted = topic_partitions(conn, topic, partitions)
    from_batch = optional_batch_id(from_batch, "from_batch")
    if from_batch is not None:
        from_batch, to_batch = batch_span(from_batch, to_batch)
    to_batch = optional_batch_id(to_batch, "to_batch")
    consumer = plain_consumer(conn)
    try:
        ranges = end_offsets(consumer, topic, wanted)
        total = sum(hi - lo for lo, hi in ranges.values())
        show = total >= _PROGRESS_FROM if progress is None else progress
        columns = _collect(consumer, topic, ranges, total, show)
    finally:
        consumer.close()
    frame, key_columns, value_columns = _decode(columns, topic)
    for p in wanted if check else ():
        _check_whole(frame, topic, p, ranges[p][0])
    last = int(frame["batch"].max()) if len(frame) else -1
    frame = frame.drop(columns=["_count", "_prev"])
    beyond = to_batch if to_batch is not None else from_batch
    if beyond is not None and beyond > last:
        raise ChangelogError(
            f"batch {beyond} is beyond the end of changelog {topic!r}: its last batch is "
            f"{last}" + ("" if last >= 0 else " (the topic holds no records)"))
    if from_batch is not None or to_batch is not None:
        lo = -1 if from_batch is None else from_batch
        hi = last if to_batch is None else to_batch
        frame = frame[(frame["batch"] >= lo) & (frame["batch"] <= hi)].reset_index(drop=True)
    return Changelog(frame, topic, key_columns, value_columns, last)


def _collect(consumer, topic: str, ranges, total: int, show: bool) -> dict[str, list]:
    cols: dict[str, list] = {c: [] for c in
                             ("partition", "offset", "timestamp", "batch", "seq", "count", "prev",
                              "key", "value")}
    part_, off_, ts_, batch_, seq_, count_, prev_, key_, value_ = cols.values()
    with tqdm(total=total, desc=topic, unit="rec", disable=not show) as bar:
        for chunk in consume_ranges(consumer, topic, ranges):
            for msg in chunk:
                try:
                    head = codec.RecordHeaders.parse(msg.headers())
                except ChangelogError as e:
                    raise ChangelogError(f"topic {topic!r} partition {msg.partition()} "
                                         f"offset {msg.offset()}: {e}") from None
                if head is None:
                    raise ChangelogError(
                        f"topic {topic!r} is not a statekit changelog: the record at partition "
                        f"{msg.partition()} offset {msg.offset()} (key {_excerpt(msg.key())}) "
                        f"has no {codec.H_FORMAT!r} header; statekit changelogs carry the headers "
                        f"{', '.join(codec.HEADERS)}")
                part_.append(msg.partition())
                off_.append(msg.offset())
                ts_.append(msg.timestamp()[1])
                batch_.append(head.batch)
                seq_.append(head.seq)
                count_.append(head.count)
                prev_.append(head.prev)
                key_.append(msg.key())
                value_.append(msg.value())
            bar.update(len(chunk))
    return cols


def _excerpt(data: bytes | None) -> str:
    if data is None:
        return "null"
    text = data[:60].decode("utf-8", "replace")
    return repr(text + ("…" if len(data) > 60 else ""))


def _json_table(lines: list[bytes]) -> pa.Table:
    """Many small JSON objects decoded at once by Arrow's JSON reader."""
    if not lines:
        return pa.table({})
    return pa_json.read_json(io.BytesIO(b"\n".join(lines)),
                             read_options=pa_json.ReadOptions(block_size=1 << 26))


def _decode(cols: dict[str, list], topic: str) -> tuple[pd.DataFrame, list[str], list[str]]:
    n = len(cols["offset"])
    ints = {c: np.array(cols[c], dtype=np.int64) for c in ("offset", "batch", "seq", "count",
                                                           "prev")}
    frame = pd.DataFrame({
        "partition": np.array(cols["partition"], dtype=np.int32),
        "offset": ints["offset"],
        "timestamp": epoch_ms_times(cols["timestamp"]),
        "batch": ints["batch"], "seq": ints["seq"], "_count": ints["count"],
        "_prev": ints["prev"],
    })
    values = cols["value"]
    tomb = np.fromiter((v is None for v in values), dtype=bool, count=n)
    frame["tombstone"] = tomb
    keys = cols["key"]
    try:
        key_table = _json_table(keys)
        value_table = _json_table([v for v in values if v is not None])
    except (pa.ArrowInvalid, TypeError) as exc:
        raise ChangelogError(f"changelog {topic!r} has a key or value that is not a JSON "
                             f"object: {exc}") from None
    frame["key"] = pd.array([k.decode() for k in keys], dtype=object) if n else []
    key_columns = key_table.column_names
    value_columns = value_table.column_names
    for name in key_columns:
        if name in codec.RECORD_COLUMNS:
            raise ChangelogError(f"changelog {topic!r} has a key column named {name!r}, which "
                                 f"clashes with the record columns {list(codec.RECORD_COLUMNS)}")
        frame[name] = _pandas_column(key_table[name])
    put_rows = np.flatnonzero(~tomb)
    for name in value_columns:
        if name in key_columns or name in codec.RECORD_COLUMNS:
            raise ChangelogError(f"changelog {topic!r} has a value column named {name!r}, "
                                 f"also a key or record column")
        column = _pandas_column(value_table[name])
        if isinstance(column.dtype, pd.Int64Dtype) or pd.api.types.is_integer_dtype(column):
            full = pd.array(np.zeros(n, dtype=np.int64), dtype="Int64")
            full[:] = pd.NA
            full[put_rows] = column.to_numpy()
        else:
            full = pd.Series(np.full(n, np.nan), dtype="float64" if column.dtype.kind == "f"
                             else object)
            full.iloc[put_rows] = column.to_numpy()
        frame[name] = full
    frame = arrow_rows.parse_times(frame)
    frame = frame.sort_values(["partition", "offset"], kind="stable", ignore_index=True)
    return frame, list(key_columns), list(value_columns)


def _pandas_column(column: pa.ChunkedArray) -> pd.Series:
    if pa.types.is_timestamp(column.type):
        return pandas_times(column)
    if pa.types.is_integer(column.type):
        return pd.Series(column.to_pandas(types_mapper={pa.int64(): pd.Int64Dtype()}.get))
    return pd.Series(column.to_pandas())


def _check_whole(frame: pd.DataFrame, topic: str, partition: int, low: int) -> None:
    """Refuse a partition whose records skip or repeat a batch.

    Between two records whose offsets are not consecutive, a break is let pass: the
    broker's log cleaner may have removed records there on purpose. (The commit marker
    that ends each of the writer's transactions takes an offset too, but the records
    around a marker still chain, so markers alone never excuse a break.)
    """
    part = frame[frame["partition"] == partition]
    if not len(part):
        return
    off, batch, seq, count, prev = (part[c].to_numpy() for c in
                                    ("offset", "batch", "seq", "_count", "_prev"))
    adjacent = off[1:] == off[:-1] + 1

    def fail(i: int, expected: str) -> None:
        raise ChangelogError(
            f"changelog {topic!r} partition {partition} has a gap or repeat in its batches: "
            f"at offset {off[i]} it holds batch {batch[i]} record {seq[i] + 1} of {count[i]} "
            f"(previous batch here {prev[i]}), expected {expected}")

    if off[0] == 0 and (seq[0] != 0 or prev[0] != -1):
        fail(0, "the first record of the first batch")
    same = batch[1:] == batch[:-1]
    ok_same = same & (seq[1:] == seq[:-1] + 1)
    ok_next = (~same & (batch[1:] > batch[:-1]) & (seq[1:] == 0)
               & (seq[:-1] == count[:-1] - 1) & (prev[1:] == batch[:-1]))
    bad = np.flatnonzero(~(ok_same | ok_next) & adjacent)
    if len(bad):
        i = bad[0]
        if same[i]:
            fail(i + 1, f"record {seq[i] + 2} of batch {batch[i]}")
        fail(i + 1, f"record 1 of a batch after {batch[i]}, whose record {seq[i] + 1} of "
                    f"{count[i]} came before")
    if seq[-1] != count[-1] - 1:  # the log cleaner never removes the last batch
        fail(len(off) - 1, f"{count[-1] - seq[-1] - 1} more records of batch {batch[-1]}")


def read_meta(kafka: Kafka, topic: str, timeout: float = 30.0
              ) -> tuple[StoreSchema | None, dict[int, Position]]:
    """The store schema and the latest position per partition from ``topic``'s metadata topic.

    ``(None, {})`` when the topic has none yet (nothing shipped).
    """
    from statekit.kafka.topics import list_topics

    conn = connect(kafka)
    name = meta_topic(topic)
    if name not in list_topics(conn):
        return None, {}
    consumer = plain_consumer(conn)
    schema, latest = None, {}
    try:
        ranges = end_offsets(consumer, name, [0])
        for chunk in consume_ranges(consumer, name, ranges, timeout=timeout):
            for msg in chunk:
                record = decode_meta(msg.key(), msg.value(), name)
                if isinstance(record, Position):
                    latest[record.partition] = record
                else:
                    schema = record
    finally:
        consumer.close()
    return schema, dict(sorted(latest.items()))
