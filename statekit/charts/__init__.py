"""Altair charts of state: pure functions from pandas DataFrames to charts.

The widgets that drive them (``ChangelogScrubber``, ``DrillPanel``) live a layer
up, in ``statekit.widgets``.

Example:
    >>> chart = state_rows_chart(query.progress())                       # doctest: +SKIP
    >>> save_chart(chart, "statekit-out/state_rows")                     # doctest: +SKIP
"""

from statekit.charts.changelog import (
    broker_compaction_chart,
    compaction_stats_chart,
    key_history_chart,
    log_vs_compacted_chart,
    state_files_chart,
)
from statekit.charts.diff import diff_chart, diff_counts_chart, diff_values_chart
from statekit.charts.disk import compression_chart, pinned_files_chart, state_on_disk_chart
from statekit.charts.durability import (
    recovery_reads_chart,
    replication_chart,
    transaction_marks_chart,
)
from statekit.charts.engines import (
    changelog_records_chart,
    failover_answers_chart,
    held_by_engine_chart,
    key_placement_chart,
    restores_chart,
    segments_chart,
)
from statekit.charts.explain import (
    explain_chart,
    explain_records_chart,
    explain_values_chart,
)
from statekit.charts.failover import failover_timeline_chart
from statekit.charts.inspect import (
    compare_state_rows_chart,
    describe_chart,
    describe_charts,
    operator_chart,
    partition_rows_chart,
    skew_chart,
    state_rows_per_batch_chart,
    watermark_per_batch_chart,
)
from statekit.charts.lookups import lookup_cost_chart, top_k_chart
from statekit.charts.monitor import (
    cache_hit_ratio_chart,
    changelog_growth_chart,
    commit_phases_chart,
    input_chart,
    memory_chart,
    operator_memory_chart,
    operators_chart,
    record_cache_chart,
    watermark_chart,
)
from statekit.charts.output import offline, save_chart, stacked
from statekit.charts.progress import change_feed_chart, state_growth_chart, state_rows_chart
from statekit.charts.racks import zone_outage_chart
from statekit.charts.restore import (
    cutover_chart,
    failover_chart,
    restore_gantt_chart,
    restore_preflight_chart,
    restore_rate_chart,
    standby_lag_chart,
)
from statekit.charts.serving import latency_chart, leaderboard_chart, placement_chart

__all__ = [
    "changelog_records_chart",
    "failover_answers_chart",
    "held_by_engine_chart",
    "key_placement_chart",
    "restores_chart",
    "segments_chart",
    "broker_compaction_chart",
    "cache_hit_ratio_chart",
    "change_feed_chart",
    "changelog_growth_chart",
    "commit_phases_chart",
    "compaction_stats_chart",
    "compare_state_rows_chart",
    "compression_chart",
    "cutover_chart",
    "describe_chart",
    "describe_charts",
    "diff_chart",
    "diff_counts_chart",
    "diff_values_chart",
    "explain_chart",
    "explain_records_chart",
    "explain_values_chart",
    "failover_chart",
    "failover_timeline_chart",
    "input_chart",
    "key_history_chart",
    "lookup_cost_chart",
    "latency_chart",
    "leaderboard_chart",
    "log_vs_compacted_chart",
    "memory_chart",
    "offline",
    "operator_chart",
    "operator_memory_chart",
    "operators_chart",
    "partition_rows_chart",
    "pinned_files_chart",
    "placement_chart",
    "record_cache_chart",
    "recovery_reads_chart",
    "replication_chart",
    "restore_gantt_chart",
    "restore_preflight_chart",
    "restore_rate_chart",
    "save_chart",
    "skew_chart",
    "stacked",
    "standby_lag_chart",
    "state_files_chart",
    "state_growth_chart",
    "state_on_disk_chart",
    "state_rows_chart",
    "state_rows_per_batch_chart",
    "transaction_marks_chart",
    "watermark_chart",
    "watermark_per_batch_chart",
    "top_k_chart",
    "zone_outage_chart",
]
