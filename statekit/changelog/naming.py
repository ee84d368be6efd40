"""A changelog topic's name and configuration, as Kafka Streams names and configures them.

``<app>-<store>-changelog``, compacted; a windowed store's changelog is also deleted by
time (``compact,delete``) with ``retention.ms`` = the windows' retention plus
``ADDITIONAL_RETENTION_MS``, as Kafka Streams adds a day.

How soon the broker's log cleaner compacts is set per topic too: ``QUICK_CLEANING`` by
default, chosen for one laptop (Kafka's own defaults wait for a 7-day segment roll and half
the log dirty, and keep a tombstone a day); ``cleaning=`` (and ``start_query``'s
``changelog_topic_config``) sets a real cluster's.

Example:
    >>> changelog_topic("leaderboard", "counts")
    'leaderboard-counts-changelog'
    >>> topic_config(False, cleaning={})
    {'cleanup.policy': 'compact'}
    >>> topic_config(False)["segment.ms"]       # the cleaner never touches the open segment
    '1000'
"""

from __future__ import annotations

from collections.abc import Mapping

from statekit.errors import BadArgument
from statekit.validate import kafka_name

#: Kafka Streams keeps windowed changelogs this much longer than the windows need.
ADDITIONAL_RETENTION_MS = 24 * 3600 * 1000

#: Topic settings under which Apache Kafka's log cleaner compacts a changelog within seconds on
#: a laptop, the same for key-value and windowed stores (the broker looks for work every half
#: second: ``statekit.kafka.broker.BROKER_SETTINGS``):
#: a segment is closed after a second (the cleaner never cleans the open one), cleaning starts
#: once 1 % of the log is dirty, records are compactable at once, and a tombstone stays 10 s
#: after the cleaner first saw it (time for a restore reading the log to see it).
QUICK_CLEANING: dict[str, str] = {
    "segment.ms": "1000",
    "min.cleanable.dirty.ratio": "0.01",
    "min.compaction.lag.ms": "0",
    "delete.retention.ms": "10000",
}

#: Over ``QUICK_CLEANING``, for a changelog to be read whole before the broker compacts it (the
#: demo and notebook 3): no record is compactable for an hour, until
#: ``broker_compaction.clean_and_compare`` lets the cleaner go.
HOLD_COMPACTION: dict[str, str] = {"min.compaction.lag.ms": str(3_600_000)}


def changelog_topic(app: str, store: str) -> str:
    """The changelog topic name of ``store`` in application ``app``, as Kafka Streams names it."""
    kafka_name(app, "application name")
    kafka_name(store, "store name")
    return kafka_name(f"{app}-{store}-changelog", "changelog topic name")


def topic_config(windowed: bool, retention_ms: int | None = None,
                 cleaning: Mapping[str, object] | None = None) -> dict[str, str]:
    """Topic configs of a changelog: ``compact``, or ``compact,delete`` with ``retention.ms``,
    and the cleaner's pace (``QUICK_CLEANING`` when ``cleaning`` is None)."""
    pace = {k: str(v) for k, v in (QUICK_CLEANING if cleaning is None else cleaning).items()}
    if not windowed:
        return {"cleanup.policy": "compact", **pace}
    if retention_ms is None or retention_ms <= 0:
        raise BadArgument("retention.ms of a windowed changelog", retention_ms,
                          "a positive number of milliseconds")
    return {"cleanup.policy": "compact,delete", "retention.ms": str(int(retention_ms)), **pace}
