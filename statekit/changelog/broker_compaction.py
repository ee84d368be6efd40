"""What the broker's log cleaner actually kept of a changelog, beside what statekit predicts.

``compaction.compact`` models Kafka's log compaction in pandas as if the cleaner had just run
over the whole log. A real broker cleans a partition up to a point (``cleaned_to``): it never
touches the open segment, and it cleans again only when enough of the log is dirty. So the
prediction here is, per partition, ``compact`` over the records below ``cleaned_to`` and every
record from it on, as written. Compared by (partition, offset) with what the broker holds,
read from the log start:

* ``missing``: predicted kept, gone from the broker — a disagreement;
* ``unexpected``: kept by the broker, predicted gone — a disagreement, except
* ``tombstones_waiting``: tombstones predicted gone (older than ``delete.retention.ms``) that
  the broker still holds. Kafka counts ``delete.retention.ms`` from the pass that first
  cleaned a tombstone and drops it at a later pass, so a tombstone may outlive the model's
  earliest moment; it never goes earlier.

``cleaned_to`` comes from the broker's own ``cleaner-offset-checkpoint`` when statekit runs it
(``EmbeddedBroker.cleaned_offsets``); for a remote cluster it is inferred (one past the last
record the broker no longer holds), which is a lower bound.

``shipped`` may itself have been read while the cleaner ran: compaction of a log already
partly compacted gives the same records, because the cleaner only ever removes records that a
later record of their key (or time) already supersedes. What it must hold is every record
that supersedes another: a tombstone written after the read and dropped by the broker before
``kept`` is read would leave the prediction keeping the record it deleted. Read the log after
each round of writes (a tombstone lives at least ``delete.retention.ms`` after the pass that
first cleans it) and pass the union, as the tests do.

Example:
    >>> import pandas as pd
    >>> shipped = pd.DataFrame({"partition": [0, 0, 0, 0], "offset": [0, 1, 2, 3],
    ...     "key": ["a", "b", "a", "b"], "tombstone": [False] * 4,
    ...     "timestamp": pd.to_datetime(["2026-01-05 10:00"] * 4)})
    >>> kept = shipped[shipped["offset"] != 0]              # cleaned up to offset 3: a@0 gone
    >>> check = compare(shipped, kept, cleaned_to={0: 3})
    >>> check.agrees, check.predicted["offset"].tolist()
    (True, [1, 2, 3])
    >>> compare(shipped, shipped.iloc[2:], cleaned_to={0: 3}).missing["offset"].tolist()
    [1]
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from statekit.changelog.compaction import REQUIRED, Log, TimeLike, _records, compact
from statekit.validate import non_negative_number


@dataclass(frozen=True)
class BrokerCompaction:
    """A changelog as shipped, as statekit predicts the broker holds it, and as it holds it."""

    shipped: pd.DataFrame
    predicted: pd.DataFrame
    kept: pd.DataFrame
    #: partition → offset the cleaner has cleaned up to (partitions not cleaned: absent)
    cleaned_to: dict[int, int]
    #: True when ``cleaned_to`` is the broker's own record, False when inferred
    cleaned_known: bool
    missing: pd.DataFrame
    unexpected: pd.DataFrame
    tombstones_waiting: pd.DataFrame

    @property
    def agrees(self) -> bool:
        """Every record the broker holds is one statekit predicts, and none is missing."""
        return self.missing.empty and self.unexpected.empty

    @property
    def settled(self) -> bool:
        """``agrees``, and no tombstone past ``delete.retention.ms`` is still held."""
        return self.agrees and self.tombstones_waiting.empty

    def per_partition(self) -> pd.DataFrame:
        """One row per partition: ``shipped``, ``predicted`` and ``kept`` record counts and
        ``cleaned_to`` (-1 where the cleaner has not run yet)."""
        parts = sorted(set(self.shipped["partition"]) | set(self.kept["partition"]))
        count = {name: frame.groupby("partition").size() for name, frame in
                 (("shipped", self.shipped), ("predicted", self.predicted),
                  ("kept", self.kept))}
        return pd.DataFrame({
            "partition": parts,
            **{name: [int(c.get(p, 0)) for p in parts] for name, c in count.items()},
            "cleaned_to": [self.cleaned_to.get(p, -1) for p in parts]})

    def summary(self) -> str:
        """One line: what was shipped, predicted and kept, and whether they agree."""
        how = "the broker's record" if self.cleaned_known else "inferred"
        verdict = ("they agree record for record" if self.agrees else
                   f"they differ: {len(self.missing)} predicted records missing, "
                   f"{len(self.unexpected)} unexpected")
        waiting = (f"; {len(self.tombstones_waiting)} tombstones past delete.retention.ms "
                   f"wait for the cleaner's next pass" if len(self.tombstones_waiting) else "")
        return (f"{len(self.shipped):,} records shipped; statekit predicts the broker keeps "
                f"{len(self.predicted):,}; its log cleaner kept {len(self.kept):,} (cleaned up "
                f"to {self.cleaned_to or 'nothing yet'}, {how}): {verdict}{waiting}")


def infer_cleaned_to(shipped: pd.DataFrame, kept: pd.DataFrame) -> dict[int, int]:
    """Partition → the least offset the cleaner must have cleaned up to for the broker to have
    dropped what it dropped: past the record that superseded each dropped one (past the
    dropped record itself for a tombstone or a record with no later one). Partitions the
    broker holds whole are left out."""
    ordered = shipped.sort_values(["partition", "offset"], kind="stable")
    following = ordered.groupby(["partition", "key"], sort=False)["offset"].shift(-1)
    reach = following.fillna(ordered["offset"]).astype("int64")
    gone = _absent(ordered.assign(reach=reach), kept)
    return {int(p): int(o) + 1 for p, o in gone.groupby("partition")["reach"].max().items()}


def _utc(records: pd.DataFrame) -> pd.DataFrame:
    """``records`` with naive UTC timestamps (two reads may differ in their time zone)."""
    stamps = pd.to_datetime(records["timestamp"], utc=True).dt.tz_localize(None)
    return records.assign(timestamp=stamps)


def _absent(frame: pd.DataFrame, other: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``frame`` whose (partition, offset) is not in ``other``."""
    there = pd.MultiIndex.from_frame(other[["partition", "offset"]].astype("int64"))
    mine = pd.MultiIndex.from_frame(frame[["partition", "offset"]].astype("int64"))
    return frame[~mine.isin(there)]


def predict(shipped: Log, cleaned_to: Mapping[int, int], now: TimeLike | None = None,
            delete_retention_ms: float = 86_400_000, retention_ms: float | None = None
            ) -> pd.DataFrame:
    """The records a broker holds once it has cleaned each partition up to ``cleaned_to``:
    ``compact`` below that offset, every record from it on."""
    records = _records(shipped, REQUIRED, "shipped changelog")
    non_negative_number(delete_retention_ms, "delete_retention_ms", unit="milliseconds")
    part = records["partition"].to_numpy()
    limit = np.array([cleaned_to.get(int(p), 0) for p in part], dtype=np.int64)
    below = records["offset"].to_numpy() < limit
    if now is None:
        now = pd.Timestamp(dt.datetime.now(dt.UTC))
    cleaned = compact(records[below], now=now, delete_retention_ms=delete_retention_ms,
                      retention_ms=retention_ms)
    both = pd.concat([cleaned, records[~below]], ignore_index=True)
    return both.sort_values(["partition", "offset"], kind="stable", ignore_index=True)


def compare(shipped: Log, kept: Log, cleaned_to: Mapping[int, int] | None = None,
            now: TimeLike | None = None, delete_retention_ms: float = 86_400_000,
            retention_ms: float | None = None) -> BrokerCompaction:
    """``shipped`` (as read before or while the cleaner ran) against ``kept`` (read from the
    log start now); ``cleaned_to`` the broker's record, inferred when None."""
    shipped_records = _utc(_records(shipped, REQUIRED, "shipped changelog"))
    kept_records = _utc(_records(kept, REQUIRED, "kept changelog"))
    known = cleaned_to is not None
    cleaned = ({int(p): int(o) for p, o in cleaned_to.items()} if known
               else infer_cleaned_to(shipped_records, kept_records))
    # a record the broker holds that the first read missed was written after it
    later = _absent(kept_records, shipped_records)
    everything = pd.concat([shipped_records, later], ignore_index=True)
    predicted = predict(everything, cleaned, now, delete_retention_ms, retention_ms)
    missing = _absent(predicted, kept_records)
    extra = _absent(kept_records, predicted)
    tombstone = extra["tombstone"].to_numpy(dtype=bool)
    return BrokerCompaction(
        shipped=everything, predicted=predicted, kept=kept_records, cleaned_to=cleaned,
        cleaned_known=known, missing=missing.reset_index(drop=True),
        unexpected=extra[~tombstone].reset_index(drop=True),
        tombstones_waiting=extra[tombstone].reset_index(drop=True))


#: reads of the log and the cleaner's record until they agree (``check_broker``)
_CONSISTENT_READS = 5


def check_broker(kafka, shipped: Log, broker=None, now: TimeLike | None = None
                 ) -> BrokerCompaction:
    """Read the changelog ``shipped`` came from as the broker holds it now and ``compare``,
    with the topic's own ``delete.retention.ms`` and ``retention.ms``; ``broker``: an
    ``EmbeddedBroker`` whose cleaner record gives ``cleaned_to`` (inferred otherwise).

    Example:
        >>> log = query.read_changelog()                            # doctest: +SKIP
        >>> check_broker(broker, log, broker).summary()             # doctest: +SKIP
        '8,112 records shipped; statekit predicts the broker keeps 3,020; its log cleaner ...'
    """
    from statekit.changelog.reader import read_changelog
    from statekit.kafka.topics import describe_topic_config

    topic = shipped.topic
    settings = describe_topic_config(kafka, topic)
    retention = int(settings.get("retention.ms", "-1"))
    delete_policy = "delete" in settings.get("cleanup.policy", "")

    def cleaner_record() -> dict[int, int] | None:
        return broker.cleaned_offsets(topic) if hasattr(broker, "cleaned_offsets") else None

    # the cleaner swaps a partition's cleaned segments in before it records how far it
    # cleaned: its record is read first, so the log read after holds at least that much
    # cleaning; read again until a pass did not land between the two reads
    cleaned = cleaner_record()
    for _ in range(_CONSISTENT_READS):
        kept = read_changelog(kafka, topic, progress=False)
        after = cleaner_record()
        if after == cleaned:
            break
        cleaned = after
    return compare(shipped, kept, cleaned, now=now,
                   delete_retention_ms=float(settings.get("delete.retention.ms", 86_400_000)),
                   retention_ms=retention if delete_policy and retention >= 0 else None)


def clean_and_compare(kafka, shipped: Log, broker=None, timeout: float = 60.0
                      ) -> BrokerCompaction:
    """Let the broker's log cleaner compact the topic ``shipped`` was read from (whose
    compaction ``naming.HOLD_COMPACTION`` held back), wait for its pass over every partition
    (the embedded ``broker``'s record; on a remote cluster, until something is gone), and
    ``check_broker``. TimeoutError naming the topic when the cleaner has not run in
    ``timeout`` seconds.

    Example:
        >>> clean_and_compare(broker, log, broker).agrees           # doctest: +SKIP
        True
    """
    import time

    from statekit.kafka.topics import alter_topic_config

    alter_topic_config(kafka, shipped.topic, {"min.compaction.lag.ms": "0"})
    parts = _records(shipped, REQUIRED, "shipped changelog")["partition"].nunique()
    deadline = time.monotonic() + timeout
    while True:
        check = check_broker(kafka, shipped, broker)
        done = (len(check.cleaned_to) == parts if check.cleaned_known
                else len(check.kept) < len(check.shipped))
        if done:
            return check
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"the broker's log cleaner has not compacted {shipped.topic!r} within "
                f"{timeout:g} s (its pace: the topic's segment.ms and "
                f"min.cleanable.dirty.ratio, the broker's log.cleaner.backoff.ms)")
        time.sleep(0.5)
