"""Changelog topics: every committed state change in Kafka, read back, and compacted.

Example:
    >>> from statekit.changelog import changelog_topic
    >>> changelog_topic("leaderboard", "counts")
    'leaderboard-counts-changelog'
"""

from statekit.changelog.compaction import compact, compaction_stats, upto_batch
from statekit.changelog.format import changelog_topic, decode_json, encode_key
from statekit.changelog.reader import materialize, read_changelog
from statekit.changelog.writer import ChangelogWriter

__all__ = [
    "ChangelogWriter",
    "changelog_topic",
    "compact",
    "compaction_stats",
    "decode_json",
    "encode_key",
    "materialize",
    "read_changelog",
    "upto_batch",
]
