"""What an interactive query answers: the rows, and for each partition who answered, at what batch.

Every answer carries one ``PartitionAnswer`` per partition it read: the
instance that answered, whether it was the partition's active owner or a
standby, the batch the store reflected (like the position Kafka Streams'
IQv2 returns with a result, in Spark batch ids), how many batches behind the
changelog writer it was, and how long the partition took. ``rows`` are plain
Python values (window times in ISO-8601 text, as in the changelog);
``to_pandas()`` gives a frame with times as ``datetime64``.

Example:
    >>> answer = QueryResult("get", [{"player": "p07", "count": 3}],
    ...                      [PartitionAnswer(2, "i1", "active", 9, 0, 0.0001)])
    >>> answer.value, answer.batch, answer.from_standby
    ({'player': 'p07', 'count': 3}, 9, False)
    >>> answer.report()[["partition", "instance", "role", "batch"]]
       partition instance    role  batch
    0          2       i1  active      9
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pandas as pd
import pyarrow as pa

from statekit.changelog.arrow import parse_times, table_to_pandas

REPORT_COLUMNS = ["partition", "instance", "role", "batch", "lag_batches", "seconds", "state"]
#: The most rows one row-shaped answer carries (``all``, ``fetch_all``, ``fetch_range``,
#: ``range``; ``top_k``'s k); the whole state goes columnar (``TableResult``), unbounded.
MAX_LIMIT = 100_000
#: Arrow schema metadata key holding a ``TableResult``'s per-partition report (JSON).
REPORT_METADATA = b"statekit.partitions"


@dataclass(slots=True)  # not frozen: a point lookup makes one, and frozen init costs 4x
class PartitionAnswer:
    """Who answered for one partition, and as of which batch."""

    partition: int
    instance: str
    role: str
    batch: int
    lag_batches: int = 0
    seconds: float = 0.0
    state: str = "running"

    @classmethod
    def from_dict(cls, data: Mapping) -> PartitionAnswer:
        return cls(**{k: data[k] for k in REPORT_COLUMNS if k in data})

    def to_dict(self) -> dict:
        """Its fields as a dict (what ``dataclasses.asdict`` gives, without its deep copy:
        every answer of every query carries these)."""
        return {"partition": self.partition, "instance": self.instance, "role": self.role,
                "batch": self.batch, "lag_batches": self.lag_batches,
                "seconds": self.seconds, "state": self.state}


class _Answered:
    """What every answer says about the partitions it read."""

    partitions: list[PartitionAnswer]
    missing: list[int]

    @property
    def batch(self) -> int:
        """The oldest batch among the partitions read (-1 when none was read)."""
        return min((p.batch for p in self.partitions), default=-1)

    @property
    def from_standby(self) -> bool:
        """True when a standby answered for some partition."""
        return any(p.role == "standby" for p in self.partitions)

    @property
    def complete(self) -> bool:
        return not self.missing

    def report(self) -> pd.DataFrame:
        """One row per partition: instance, role, batch, lag in batches, seconds, state."""
        return pd.DataFrame([p.to_dict() for p in self.partitions], columns=REPORT_COLUMNS)


@dataclass
class QueryResult(_Answered):
    """The answer to one query: ``rows`` and one ``PartitionAnswer`` per partition read."""

    kind: str
    rows: list[dict]
    partitions: list[PartitionAnswer] = field(default_factory=list)
    missing: list[int] = field(default_factory=list)  # partitions left out (partial results)

    @property
    def value(self) -> dict | None:
        """A point query's row (None when the key has no state)."""
        return self.rows[0] if self.rows else None

    def to_pandas(self, columns: Sequence[str] | None = None) -> pd.DataFrame:
        """The rows as a frame (window times as naive-UTC ``datetime64``)."""
        frame = pd.DataFrame.from_records(self.rows, columns=columns)
        return parse_times(frame)

    def to_dict(self) -> dict:
        return {"kind": self.kind, "rows": self.rows,
                "partitions": [p.to_dict() for p in self.partitions], "missing": self.missing}

    @classmethod
    def from_dict(cls, data: Mapping) -> QueryResult:
        return cls(data["kind"], list(data["rows"]),
                   [PartitionAnswer.from_dict(p) for p in data["partitions"]],
                   list(data.get("missing", [])))

    @classmethod
    def merge(cls, kind: str, parts: Sequence[QueryResult]) -> QueryResult:
        """Several partitions' answers as one (rows concatenated in the given order)."""
        rows = [row for part in parts for row in part.rows]
        report = sorted((p for part in parts for p in part.partitions),
                        key=lambda p: p.partition)
        missing = sorted({m for part in parts for m in part.missing})
        return cls(kind, rows, report, missing)

    def __repr__(self) -> str:
        standby = ", from a standby" if self.from_standby else ""
        partial = f", missing partitions {self.missing}" if self.missing else ""
        return (f"QueryResult({self.kind}, {len(self.rows)} rows, {len(self.partitions)} "
                f"partitions, batch {self.batch}{standby}{partial})")


@dataclass
class TableResult(_Answered):
    """The whole state of some partitions, columnar: ``table`` (Arrow; one row per state
    row, a ``partition`` column first) and one ``PartitionAnswer`` per partition read.

    Example:
        >>> answer = TableResult(pa.table({"partition": [2], "player": ["p07"]}),
        ...                      [PartitionAnswer(2, "i1", "active", 9)])
        >>> TableResult.from_ipc(answer.to_ipc()).to_pandas()
           partition player
        0          2    p07
    """

    table: pa.Table
    partitions: list[PartitionAnswer] = field(default_factory=list)
    missing: list[int] = field(default_factory=list)

    def to_pandas(self) -> pd.DataFrame:
        """The rows as a frame (window times as naive-UTC ``datetime64``)."""
        return table_to_pandas(self.table)

    def to_ipc(self) -> bytes:
        """An Arrow IPC stream; the report rides in the schema's metadata."""
        meta = {REPORT_METADATA: json.dumps({"partitions": [p.to_dict() for p in self.partitions],
                                             "missing": self.missing}).encode()}
        table = self.table.replace_schema_metadata(meta)
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        return sink.getvalue().to_pybytes()

    @classmethod
    def from_ipc(cls, data: bytes) -> TableResult:
        table = pa.ipc.open_stream(data).read_all()
        meta = json.loads((table.schema.metadata or {}).get(REPORT_METADATA, b"{}"))
        return cls(table.replace_schema_metadata(None),
                   [PartitionAnswer.from_dict(p) for p in meta.get("partitions", [])],
                   list(meta.get("missing", [])))

    @classmethod
    def merge(cls, parts: Sequence[TableResult]) -> TableResult:
        """Several partitions' tables as one (types widened where they differ: an int
        column that is all null in one partition, a float in another)."""
        tables = [part.table for part in parts if part.table.num_columns]
        if tables:
            table = pa.concat_tables(tables, promote_options="permissive")
        else:
            table = parts[0].table if parts else pa.table({})
        report = sorted((p for part in parts for p in part.partitions),
                        key=lambda p: p.partition)
        missing = sorted({m for part in parts for m in part.missing})
        return cls(table, report, missing)

    def __repr__(self) -> str:
        standby = ", from a standby" if self.from_standby else ""
        partial = f", missing partitions {self.missing}" if self.missing else ""
        return (f"TableResult({self.table.num_rows} rows, {len(self.partitions)} partitions, "
                f"batch {self.batch}{standby}{partial})")
