"""Failover drill: kill the process that owns a store, time how long until the state is served.

Three ways to take over, as in Kafka Streams:

* **no standby**: a new instance restores the whole changelog into an empty store;
* **standby**: a replica that has been tailing the changelog is promoted (it
  replays only what it had not consumed yet);
* **stale standby**: a replica that stopped tailing at an earlier batch catches up.

Each run starts a real store owner (``statekit.drills.worker store``), kills it
with SIGKILL once it serves, and times the replacement from the kill to its
first answered point query; the replacement's contents are checked against the
changelog replayed in pandas.

Example:
    >>> failover_drill(broker, query.changelog_topic, query.spec, "/tmp/drill")  # doctest: +SKIP
           scenario  records_replayed  restore_seconds  seconds_to_serve  correct
    0    no standby              1168            0.041             0.046     True
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from collections.abc import Sequence

import pandas as pd

from statekit.changelog.reader import read_changelog
from statekit.drills.worker import start_worker, store_config, wait_for_line
from statekit.errors import BadArgument
from statekit.model.changelog_record import decode_json
from statekit.model.connection import Kafka, KafkaConnection, connect
from statekit.model.query_spec import QuerySpec
from statekit.options.restore import RestoreOptions
from statekit.restore.rebuild import restore_stores
from statekit.restore.result import RestoreResult
from statekit.spark_state.changes import same_rows
from statekit.standby.replica import StandbyReplica
from statekit.validate import optional_batch_id

SCENARIOS = ("no standby", "standby", "stale standby")
REPORT_COLUMNS = ["scenario", "records_replayed", "restore_seconds", "seconds_to_serve",
                  "correct", "standby_lag_at_kill"]


def _point_query(result: RestoreResult, spec: QuerySpec, key_json: str, partition: int):
    """Answer one point query the way a serving instance would (window fetch / sessions)."""
    key = decode_json(key_json.encode())
    group = {k: key[k] for k in spec.keys}
    store = result.stores[partition]
    if spec.kind == "running":  # a key-value store
        value = store.get(group)
        return [] if value is None else [value]
    start = pd.Timestamp(key["window_start"].rstrip("Z"))
    ms = int(start.value // 1_000_000)
    if spec.kind == "session":
        with store.find_sessions(group, ms, ms) as found:
            return list(found)
    with store.fetch(group, ms, ms) as found:
        return list(found)


def _take_over(scenario: str, kafka: KafkaConnection, topic: str, spec: QuerySpec,
               workdir: str, probe: tuple[str, int], stale_batch: int,
               expected: pd.DataFrame) -> dict:
    here = os.path.join(workdir, scenario.replace(" ", "-"))
    active_dir = os.path.join(here, "active")
    standby_dir = os.path.join(here, "replacement" if scenario == "no standby" else "standby")
    standby, lag = None, 0
    if scenario == "standby":
        standby = StandbyReplica(kafka, topic, spec, standby_dir).start()
    elif scenario == "stale standby":
        restore_stores(kafka, topic, spec, standby_dir,
                       options=RestoreOptions(to_batch=stale_batch, progress=False)).close()
    owner = start_worker("store", store_config(topic, kafka, active_dir, spec))
    try:
        wait_for_line(owner, "serving")
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait(30)
    killed = time.perf_counter()
    if standby is not None:
        samples = standby.lag()
        lag = int(samples.groupby("partition")["lag"].last().sum()) if len(samples) else 0
        result = standby.promote()
    else:
        result = restore_stores(kafka, topic, spec, standby_dir,
                                options=RestoreOptions(progress=False))
    answer = _point_query(result, spec, *probe)
    served = time.perf_counter()
    try:
        correct = len(answer) == 1 and same_rows(result.table(), expected)
    finally:
        result.close()
    return {"scenario": scenario, "records_replayed": int(result.report["records"].sum()),
            "restore_seconds": result.wall_seconds,  # partitions restore together
            "seconds_to_serve": served - killed, "correct": correct,
            "standby_lag_at_kill": lag}


def failover_drill(
    kafka: Kafka,
    topic: str,
    spec: QuerySpec,
    workdir: str | os.PathLike,
    *,
    scenarios: Sequence[str] = SCENARIOS,
    stale_batch: int | None = None,
) -> pd.DataFrame:
    """Run the failover drill for each scenario; one report row per scenario.

    Args:
        kafka: the cluster (a ``KafkaConnection``, ``"host:port"`` or an ``EmbeddedBroker``).
        topic: the store's changelog topic (statekit format).
        spec: what the state holds.
        workdir: where the stores of the drill live (emptied first).
        stale_batch: the batch the stale standby stopped at (default: the middle batch).
    """
    bad = [s for s in scenarios if s not in SCENARIOS]
    if bad:
        raise BadArgument("failover scenario", bad[0], SCENARIOS)
    conn = connect(kafka)
    stale_batch = optional_batch_id(stale_batch, "stale_batch")
    log = read_changelog(conn, topic)
    records = log.records
    puts = records[~records["tombstone"]]
    expected = log.materialize()
    live = puts[puts["key"].isin(set(records.drop_duplicates("key", keep="last")
                                     .query("not tombstone")["key"]))]
    if not len(live):
        raise BadArgument("changelog topic", topic, "a changelog whose store holds some rows")
    probe_row = live.iloc[-1]
    probe = (probe_row["key"], int(probe_row["partition"]))
    stale = log.last_batch // 2 if stale_batch is None else stale_batch
    workdir = str(workdir)
    shutil.rmtree(workdir, ignore_errors=True)
    os.makedirs(workdir)
    columns = [c for c in expected.columns if c != "partition"]
    rows = [_take_over(s, conn, topic, spec, workdir, probe, stale, expected[columns])
            for s in scenarios]
    return pd.DataFrame(rows, columns=REPORT_COLUMNS)

