"""The end-to-end demo behind ``make demo`` / ``python -m statekit demo``.

Starts the embedded broker (or uses ``--bootstrap-servers``), replays the game
events, runs the windowed leaderboard until the input is drained, prints the
top players of the latest windows and the change feed summary, what the last
batch changed (``diff``) and why the top player holds its count (``explain``),
reads the changelog topic back (and what compaction would keep), checks the
restore before it runs (``restore_preflight``) and restores local RocksDB stores
from it, serves the store by key from two instances (the leaderboard, enriched
from a global store of player profiles), and writes the charts as HTML and PNG.
"""

from __future__ import annotations

import contextlib
import shutil
import time
from argparse import Namespace
from pathlib import Path

import pandas as pd

TOPIC = "games"


def _say(message: str) -> None:
    print(f"[statekit] {message}", flush=True)


def leaderboard(snapshot: pd.DataFrame, windows: int = 2, top: int = 5) -> pd.DataFrame:
    """Top players by total score in each of the latest ``windows`` windows of a snapshot."""
    latest = sorted(snapshot["window_start"].unique())[-windows:]
    rows = snapshot[snapshot["window_start"].isin(latest)]
    ranked = rows.sort_values(["window_start", "sum_score"], ascending=[True, False])
    return ranked.groupby("window_start").head(top)[
        ["window_start", "window_end", "player", "count", "sum_score", "max_score"]
    ].reset_index(drop=True)


def change_summary(changes: pd.DataFrame) -> pd.DataFrame:
    """Puts and deletes per batch of a change feed."""
    table = changes.groupby(["batch", "change"]).size().unstack(fill_value=0)
    for kind in ("put", "delete"):
        if kind not in table.columns:
            table[kind] = 0
    return table[["put", "delete"]]


def serve_leaderboard(servers: str, query, snapshot: pd.DataFrame, out: Path) -> pd.DataFrame:
    """Serve the store from 2 instances (a standby each) and ask them the leaderboard;
    returns where each partition lives."""
    from statekit.datasets import player_profiles
    from statekit.kafka.dataset_replay import replay
    from statekit.options.serve import GlobalTable, ServeOptions
    from statekit.serve import serve

    replay(player_profiles(), servers, "player-profiles", partitions=2, progress=False,
           topic_config={"cleanup.policy": "compact"})
    players = GlobalTable("players", "player-profiles", ("player",), plain_keys=True)
    started = time.monotonic()
    with serve(servers, query.changelog_topic, instances=2, standbys=1,
               workdir=out / "serving", options=ServeOptions(global_tables=[players])
               ) as cluster:
        cluster.wait_ready()
        client = cluster.client()
        _say(f"serving {query.changelog_topic!r} from {len(cluster.urls)} instances "
             f"({', '.join(f'{n} {u}' for n, u in cluster.urls.items())}), one standby per "
             f"partition, ready in {time.monotonic() - started:.1f} s")
        latest = snapshot["window_start"].max()
        board = client.top_k(latest, 5, "sum_score", enrich="players")
        _say(f"the leaderboard of {latest:%H:%M}, served by key (batch {board.batch}, "
             f"partitions answered by {sorted({p.instance for p in board.partitions})}):")
        print(board.to_pandas()[["player", "name", "team", "count", "sum_score"]]
              .to_string(index=False))
        best = board.rows[0]["player"]
        timed = time.perf_counter()
        windows = client.fetch({"player": best}, snapshot["window_start"].min(), latest)
        seconds = time.perf_counter() - timed
        spread = sorted({p.partition for p in windows.partitions})
        _say(f"{best}'s {len(windows.rows)} windows live in partitions {spread} (Spark hashes "
             f"the window with the key); fetched in {seconds * 1000:.1f} ms")
        return cluster.assignment.to_frame()


def debugging_lines(query, diff, last: int) -> str:
    """What changed in the last batch (``statekit.diff``) and why the top key of the latest
    window holds its count (``query.explain``), in two lines."""
    d = diff((query, max(last - 1, 0)), (query, last))
    counts = ", ".join(f"{int(d.counts[k])} {k}" for k in ("added", "removed", "changed"))
    snapshot = query.snapshot(batch=last)
    latest = snapshot[snapshot["window_start"] == snapshot["window_start"].max()]
    top = latest.sort_values(["count", "player"], ascending=[False, True]).iloc[0]
    why = query.explain(top["player"], window=top["window_start"])
    counted = int(why.records["counted"].sum())
    return (f"diff of batches {max(last - 1, 0)} and {last} ({d.how}): {counts}\n"
            f"[statekit] why {top['player']} has count {int(top['count'])} in the window of "
            f"{top['window_start']:%H:%M}: {counted} records counted, read back from Kafka "
            f"batch by batch, {len(why.records) - counted} did not count; pandas reproduces "
            f"the value: {why.agrees}")


def broker_cleaned(servers: str, log, broker=None) -> str:
    """Let the broker's log cleaner compact the changelog ``log`` was read from, and say what
    it kept beside what statekit predicts for the same point."""
    from statekit.changelog.broker_compaction import clean_and_compare

    try:
        check = clean_and_compare(servers, log, broker, timeout=30)
    except TimeoutError as exc:
        return str(exc)
    return f"the broker's log cleaner on {log.topic!r}: {check.summary()}"


def attach_own_job(spark, dataset, servers: str, out: Path) -> None:
    """A plain PySpark job (no statekit in it), attached: its parts, state, changelogs; then
    a changed version of it checked against its checkpoint before it would start."""
    import statekit as sk
    from statekit.kafka.topics import delete_topic, list_topics
    from statekit.spark_state.changes import same_rows

    folder = dataset.write_files(out / "own-job" / "in")
    checkpoint = out / "own-job" / "checkpoint"
    # a run before this one left its checkpoint, ledgers and (on a broker that outlived it)
    # topics: this run ships its changelogs from batch 0 again
    for leftover in ("checkpoint", "ledgers"):
        shutil.rmtree(out / "own-job" / leftover, ignore_errors=True)
    for topic in list_topics(servers):
        if topic.startswith("own_job-op"):
            delete_topic(servers, topic)
    job = (own_job(spark, dataset, folder, ["game"]).writeStream.format("noop")
           .outputMode("update").queryName("own_job")
           .option("checkpointLocation", str(checkpoint)).start())
    try:
        live = sk.attach(job, kafka=servers, ledger_dir=out / "own-job" / "ledgers")
        job.processAllAvailable()
        last = live.wait_shipped()
        states = live.states()
        parts = ", ".join(f"{p} ({k})" for p, k in zip(states["part"], states["kind"],
                                                       strict=True))
        _say(f"your own job (plain PySpark: dropDuplicatesWithinWatermark, then groupBy) "
             f"attached with statekit.attach: parts {parts}; last batch {last}")
        for part, topic in live.changelog_topics().items():
            snap = live.snapshot(part, last)
            placed = bool((live.state_partitions(part, snap) == snap["partition"]).all())
            log = live.read_changelog(part)
            _say(f"  part {part}: {len(snap)} rows, each in the partition statekit computes: "
                 f"{placed}; changelog {topic!r}: {len(log)} records, replays to the "
                 f"snapshot: {same_rows(log.materialize(), snap)}")
        live.close()
    finally:
        job.stop()
    changed = sk.check_restart(own_job(spark, dataset, folder, ["game", "player"]), checkpoint,
                               output_mode="update")
    refused = changed.refused
    _say("restart pre-flight of the job changed to group by game and player, rehearsed by "
         "Spark on a scratch copy of its checkpoint: "
         + (f"refused, {refused['what'].iloc[0]}: {refused['spark'].iloc[0].split(':')[0]}"
            if not changed.compatible else "it would start"))


def own_job(spark, dataset, folder: Path, keys: list[str]):
    """The demo's own job (plain PySpark, no statekit in it): the events deduplicated within
    the watermark, then counted and summed per ``keys``."""
    from pyspark.sql import functions as F

    return (spark.readStream.schema(dataset.schema).option("maxFilesPerTrigger", 1)
            .json(str(folder)).withWatermark("ts", "10 minutes")
            .dropDuplicatesWithinWatermark(["player", "game", "ts"])
            .groupBy(*keys).agg(F.count("*").alias("events"), F.sum("score").alias("points")))


def main(args: Namespace) -> int:
    from statekit.changelog import compaction_stats
    from statekit.changelog.naming import HOLD_COMPACTION
    from statekit.charts import (
        change_feed_chart,
        compaction_stats_chart,
        describe_chart,
        log_vs_compacted_chart,
        placement_chart,
        restore_gantt_chart,
        save_chart,
        state_rows_chart,
    )
    from statekit.datasets import game_events
    from statekit.inspect import diff, open_checkpoint
    from statekit.kafka import EmbeddedBroker
    from statekit.kafka.dataset_replay import replay
    from statekit.options.query import RunOptions, SourceOptions
    from statekit.options.restore import RestoreOptions
    from statekit.query.start import start_query
    from statekit.restore import restore_preflight, restore_stores
    from statekit.spark.session import spark_session
    from statekit.spark_state.changes import same_rows

    out = Path(args.out).resolve()
    checkpoint = out / "checkpoint"
    shutil.rmtree(checkpoint, ignore_errors=True)
    shutil.rmtree(out / "stores", ignore_errors=True)
    shutil.rmtree(out / "serving", ignore_errors=True)
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        servers = args.bootstrap_servers
        if servers is None:
            # it boots while Spark's JVM does; the first call given the broker waits for it
            broker = EmbeddedBroker().start(wait=False)
            stack.callback(broker.close)
            servers = broker.bootstrap_servers
            _say(f"embedded Apache Kafka broker (KRaft, log on disk) on {servers}")
        else:
            _say(f"using Kafka at {servers}")
            broker = None
        spark = spark_session(args.master)
        _say(f"Spark {spark.version} on {spark.sparkContext.master}, RocksDB state store, "
             "changelog checkpointing on")
        dataset = game_events()
        report = replay(dataset, broker or servers, TOPIC, partitions=4)
        _say(f"replayed {report.records} game events into topic {TOPIC!r} "
             f"({report.records_per_second:,.0f} records/s), "
             f"per partition {report.partition_counts}")
        query = start_query(
            TOPIC, dataset.spec, spark=spark,
            source_options=SourceOptions(kafka=servers, event_schema=dataset.schema,
                                         max_offsets_per_trigger=500),
            run=RunOptions(name="leaderboard", checkpoint=str(checkpoint),
                           trigger="200 milliseconds",
                           changelog_topic_config=HOLD_COMPACTION))
        stack.callback(query.stop)
        last = query.wait_until_drained()
        progress = query.progress()
        _say(f"query 'leaderboard' drained the topic in {last + 1} batches; "
             f"{int(progress['input_rows'].sum())} records in, "
             f"{query.malformed_count()} malformed (see query.malformed()), "
             f"{query.late_events()} late events dropped by the watermark")
        snapshot = query.snapshot()
        _say(f"snapshot of batch {last}: {len(snapshot)} state rows (windows x players) "
             f"in {snapshot['partition'].nunique()} partitions")
        print(leaderboard(snapshot).to_string(index=False))
        changes = query.changes(from_batch=0, to_batch=last)
        _say(f"change feed of batches 0..{last}: {int((changes['change'] == 'put').sum())} puts, "
             f"{int((changes['change'] == 'delete').sum())} deletes (windows evicted)")
        print(change_summary(changes).T.to_string())
        _say(debugging_lines(query, diff, last))
        query.close()
        log = query.read_changelog()
        compacted = log.compact()
        stats = compaction_stats(log, compacted)
        _say(f"changelog topic {query.changelog_topic!r}: {len(log)} records "
             f"({int(log.records['tombstone'].sum())} tombstones), one per state change, each "
             f"batch once; compaction would keep {len(compacted)} "
             f"({len(compacted) / len(log):.0%})")
        _say(broker_cleaned(servers, log, broker))
        same = same_rows(log.materialize(), snapshot)
        _say(f"replaying the changelog rebuilds the {len(snapshot)}-row store: {same}")
        check = restore_preflight(servers, query.changelog_topic, query.spec,
                                  checkpoint.parent / "stores", checkpoint=checkpoint)
        _say(f"restore pre-flight: {'ok' if check.ok else 'NOT ok'}, "
             f"{int(check.partitions['to_read'].sum())} offsets to read, about "
             f"{check.estimated_seconds or 0:.1f} s at the sampled "
             f"{check.records_per_s or 0:,.0f} records/s; {len(check.findings)} finding(s)")
        with restore_stores(servers, query.changelog_topic, query.spec,
                            checkpoint.parent / "stores",
                            options=RestoreOptions(progress=False)) as restored:
            table = restored.table()
            equal = same_rows(table, snapshot)
            _say(f"restored {int(restored.report['records'].sum())} changelog records into "
                 f"{len(restored.stores)} local RocksDB stores in "
                 f"{restored.report['seconds'].sum():.2f} s: {len(table)} rows, "
                 f"equal to the snapshot: {equal}")
            report = restored.report
        placement = serve_leaderboard(servers, query, snapshot, out)
        description = open_checkpoint(checkpoint, spark=spark).describe(
            progress=query.progress())
        flags = ", ".join(f.name for f in description.flags) or "none"
        _say(f"open_checkpoint(...).describe(): {len(description.table)} state store part(s), "
             f"{int(description.rows['rows'].max())} rows at most in a partition; "
             f"what looks wrong: {flags}")
        attach_own_job(spark, dataset, servers, out)
        files = save_chart(state_rows_chart(progress), out / "state_rows")
        files += save_chart(change_feed_chart(changes), out / "change_feed")
        files += save_chart(log_vs_compacted_chart(log, compacted), out / "log_vs_compacted")
        files += save_chart(compaction_stats_chart(stats), out / "compaction_stats")
        files += save_chart(restore_gantt_chart(report), out / "restore_gantt")
        files += save_chart(placement_chart(placement), out / "placement")
        files += save_chart(describe_chart(description), out / "describe")
        for path in files:
            _say(f"wrote {path}")
    _say(f"done in {time.monotonic() - started:.1f} s")
    return 0
