"""A changelog topic read into pandas: its records, and what they decode to, said explicitly.

``read_changelog`` returns a ``Changelog``: ``records`` (one row per Kafka
record: ``partition``, ``offset``, ``timestamp``, ``batch``, ``seq``,
``tombstone``, ``key`` — the key's JSON text — then the decoded key columns and
value columns, NA on tombstones), plus the facts a frame alone cannot carry
safely: the ``topic``, which columns are the key and which the value, and the
``last_batch`` of the whole log. ``materialize`` replays it into the table it
describes; ``compact`` keeps what log compaction would.

Example:
    >>> import pandas as pd
    >>> records = pd.DataFrame({"partition": [0, 0, 0], "offset": [0, 1, 2],
    ...     "timestamp": pd.to_datetime(["2026-01-05 10:00"] * 3), "batch": [0, 0, 1],
    ...     "seq": [0, 1, 0], "tombstone": [False, False, True],
    ...     "key": ['{"k":"a"}', '{"k":"b"}', '{"k":"a"}'], "k": ["a", "b", "a"],
    ...     "n": pd.array([1, 2, None], dtype="Int64")})
    >>> log = Changelog(records, topic="app-s-changelog", key_columns=["k"],
    ...                 value_columns=["n"], last_batch=1)
    >>> log.materialize()
       k  n  partition
    0  b  2          0
    >>> log.materialize(to_batch=0)["k"].tolist()
    ['a', 'b']
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from statekit._lazy import np, pd
from statekit.errors import BadArgument, ChangelogError
from statekit.model.changelog_record import RECORD_COLUMNS
from statekit.spark_state.changes import apply_changes
from statekit.validate import optional_batch_id, require_columns

SOURCE = "as read_changelog() gives"


@dataclass(frozen=True, eq=False)
class Changelog:
    """The records of a changelog topic and the meaning of their columns.

    Attributes:
        records: one row per record, ``RECORD_COLUMNS`` then key and value columns,
            sorted by partition and offset.
        topic: the topic read.
        key_columns: the decoded key columns (group keys, then window columns).
        value_columns: the decoded value columns (the aggregates).
        last_batch: the last batch in the whole topic (not only in ``records`` when a
            batch range was read); -1 for an empty topic.
    """

    records: pd.DataFrame
    topic: str
    key_columns: Sequence[str]
    value_columns: Sequence[str]
    last_batch: int

    def __post_init__(self):
        object.__setattr__(self, "key_columns", tuple(self.key_columns))
        object.__setattr__(self, "value_columns", tuple(self.value_columns))
        require_columns(self.records, [*RECORD_COLUMNS, *self.key_columns, *self.value_columns],
                        "changelog records", SOURCE)

    def __len__(self) -> int:
        return len(self.records)

    def with_records(self, records: pd.DataFrame) -> Changelog:
        """The same topic and columns over other records (a filtered or compacted view)."""
        return Changelog(records.reset_index(drop=True), self.topic, self.key_columns,
                         self.value_columns, self.last_batch)

    @property
    def batches(self) -> np.ndarray:
        """The batch ids present, ascending."""
        return np.unique(self.records["batch"].to_numpy())

    def upto_batch(self, batch: int) -> Changelog:
        """The records of batches ``<= batch``: the topic as it was right after that batch."""
        from statekit.changelog.compaction import upto_batch

        return upto_batch(self, batch)

    def compact(self, **options) -> Changelog:
        """What log compaction keeps (``statekit.changelog.compaction.compact`` options)."""
        from statekit.changelog.compaction import compact

        return compact(self, **options)

    def materialize(self, to_batch: int | None = None) -> pd.DataFrame:
        """The table the log describes (see ``materialize``)."""
        return materialize(self, to_batch)

    def __repr__(self) -> str:
        return (f"Changelog({self.topic!r}, {len(self.records):,} records, "
                f"{int(self.records['tombstone'].sum()):,} tombstones, "
                f"last_batch={self.last_batch}, keys={list(self.key_columns)}, "
                f"values={list(self.value_columns)})")

    def _repr_html_(self) -> str:
        caption = (f"<p><b>Changelog</b> <code>{self.topic}</code>: {len(self.records):,} "
                   f"records, last batch {self.last_batch}; key columns "
                   f"{', '.join(self.key_columns)}; value columns "
                   f"{', '.join(self.value_columns)}. The frame is <code>.records</code>.</p>")
        return caption + self.records._repr_html_()


def materialize(
    changelog: Changelog | pd.DataFrame,
    to_batch: int | None = None,
    *,
    key_columns: Sequence[str] | None = None,
    value_columns: Sequence[str] | None = None,
) -> pd.DataFrame:
    """The table a changelog describes: the last record per key wins, tombstones delete.

    Replays the records (batches up to ``to_batch``) in offset order per partition
    with ``statekit.spark_state.apply_changes``; returns the key columns, value columns and
    ``partition``, sorted by keys. A ``Changelog`` knows its columns; a bare records
    frame needs ``key_columns`` and ``value_columns``.

    Raises:
        BadArgument: a frame without the columns to replay, or a bad ``to_batch``.
        ChangelogError: ``to_batch`` beyond the log's last batch.
    """
    records, keys, values, last = _parts(changelog, key_columns, value_columns)
    to_batch = optional_batch_id(to_batch, "to_batch")
    if to_batch is not None and to_batch > last:
        raise ChangelogError(f"batch {to_batch} is beyond the end of the changelog: its last "
                             f"batch is {last}")
    log = records if to_batch is None else records[records["batch"].to_numpy() <= to_batch]
    log = log.sort_values(["partition", "offset"], kind="stable")
    changes = log[[*keys, *values, "partition"]].assign(
        change=np.where(log["tombstone"].to_numpy(bool), "delete", "put"))
    # a key lives in one partition: keying on (partition, key) replays each log on its own
    table = apply_changes(changes, [*keys, "partition"], values)
    return table[[*keys, *values, "partition"]].sort_values(
        keys, kind="stable", ignore_index=True)


def _parts(changelog: Changelog | pd.DataFrame, key_columns: Sequence[str] | None,
           value_columns: Sequence[str] | None) -> tuple[pd.DataFrame, list, list, int]:
    """records, key columns, value columns and the last batch, said or given."""
    if isinstance(changelog, Changelog):
        keys = list(changelog.key_columns if key_columns is None else key_columns)
        values = list(changelog.value_columns if value_columns is None else value_columns)
        records, last = changelog.records, changelog.last_batch
    elif isinstance(changelog, pd.DataFrame):
        if key_columns is None or value_columns is None:
            raise BadArgument(
                "changelog", "a DataFrame without key_columns= and value_columns=",
                "a Changelog (as read_changelog() returns, it knows its columns), or a records "
                "frame with key_columns=[...] and value_columns=[...] given")
        keys, values, records = list(key_columns), list(value_columns), changelog
        last = int(records["batch"].max()) if "batch" in records and len(records) else -1
    else:
        raise BadArgument("changelog", type(changelog).__name__,
                          "a Changelog (as read_changelog() returns) or its records frame")
    require_columns(records, [*RECORD_COLUMNS, *keys, *values], "changelog records", SOURCE)
    return records, keys, values, last


def records_of(changelog: Changelog | pd.DataFrame, what: str = "changelog") -> pd.DataFrame:
    """The records frame of a ``Changelog``, or the frame itself."""
    if isinstance(changelog, Changelog):
        return changelog.records
    if isinstance(changelog, pd.DataFrame):
        return changelog
    raise BadArgument(what, type(changelog).__name__,
                      "a Changelog (as read_changelog() returns) or its records frame")


def same_kind(template: Changelog | pd.DataFrame, records: pd.DataFrame
              ) -> Changelog | pd.DataFrame:
    """``records`` wrapped like ``template``: a Changelog for a Changelog, else a frame."""
    if isinstance(template, Changelog):
        return template.with_records(records)
    return records.reset_index(drop=True)


def value_columns_of(changelog: Changelog | pd.DataFrame,
                     given: Sequence[str] | None = None) -> list[str]:
    """The value columns: given, known to a Changelog, or (bare frame) its numeric columns
    that are neither record nor key columns."""
    records = records_of(changelog)
    if given is not None:
        require_columns(records, list(given), "changelog records", SOURCE)
        return list(given)
    if isinstance(changelog, Changelog):
        return list(changelog.value_columns)
    return [c for c in records.columns if c not in RECORD_COLUMNS
            and pd.api.types.is_numeric_dtype(records[c])
            and not pd.api.types.is_bool_dtype(records[c])]


def key_columns_of(changelog: Changelog | pd.DataFrame) -> list[str]:
    """The key columns a Changelog knows (a bare frame: its non-record, non-numeric columns)."""
    if isinstance(changelog, Changelog):
        return list(changelog.key_columns)
    records = records_of(changelog)
    return [c for c in records.columns if c not in RECORD_COLUMNS
            and c not in value_columns_of(records)]

