"""A changelog topic's name and configuration, as Kafka Streams names and configures them.

``<app>-<store>-changelog``, compacted; a windowed store's changelog is also deleted by
time (``compact,delete``) with ``retention.ms`` = the windows' retention plus
``ADDITIONAL_RETENTION_MS``, as Kafka Streams adds a day.

Example:
    >>> changelog_topic("leaderboard", "counts")
    'leaderboard-counts-changelog'
    >>> topic_config(False)
    {'cleanup.policy': 'compact'}
"""

from __future__ import annotations

from statekit.errors import BadArgument
from statekit.validate import kafka_name

#: Kafka Streams keeps windowed changelogs this much longer than the windows need.
ADDITIONAL_RETENTION_MS = 24 * 3600 * 1000


def changelog_topic(app: str, store: str) -> str:
    """The changelog topic name of ``store`` in application ``app``, as Kafka Streams names it."""
    kafka_name(app, "application name")
    kafka_name(store, "store name")
    return kafka_name(f"{app}-{store}-changelog", "changelog topic name")


def topic_config(windowed: bool, retention_ms: int | None = None) -> dict[str, str]:
    """Topic configs of a changelog: ``compact``, or ``compact,delete`` with ``retention.ms``."""
    if not windowed:
        return {"cleanup.policy": "compact"}
    if retention_ms is None or retention_ms <= 0:
        raise BadArgument("retention.ms of a windowed changelog", retention_ms,
                          "a positive number of milliseconds")
    return {"cleanup.policy": "compact,delete", "retention.ms": str(int(retention_ms))}
