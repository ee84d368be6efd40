"""Changelog topics: every committed state change in Kafka, read back, and compacted.

Names resolve on first use: the pandas parts (``format``, ``log``,
``compaction``) load without pyspark; only the writer needs Spark.

Example:
    >>> from statekit.changelog import changelog_topic
    >>> changelog_topic("leaderboard", "counts")
    'leaderboard-counts-changelog'
"""

from statekit._lazy import lazy_exports

_NAMES = {
    "Changelog": "statekit.changelog.log",
    "materialize": "statekit.changelog.log",
    "compact": "statekit.changelog.compaction",
    "compaction_stats": "statekit.changelog.compaction",
    "upto_batch": "statekit.changelog.compaction",
    "changelog_topic": "statekit.changelog.naming",
    "HOLD_COMPACTION": "statekit.changelog.naming",
    "QUICK_CLEANING": "statekit.changelog.naming",
    "BrokerCompaction": "statekit.changelog.broker_compaction",
    "check_broker": "statekit.changelog.broker_compaction",
    "clean_and_compare": "statekit.changelog.broker_compaction",
    "decode_json": "statekit.model.changelog_record",
    "encode_key": "statekit.model.changelog_record",
    "read_changelog": "statekit.changelog.reader",
    "ChangelogWriter": "statekit.changelog.writer",
}
__getattr__, __dir__ = lazy_exports(__name__, _NAMES)
__all__ = sorted(_NAMES)
