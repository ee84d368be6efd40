"""Three Apache Kafka KRaft nodes (``KafkaCluster``) and the changelog under node failures: the
leader of a changelog partition killed in the middle of a shipping round and in the middle of
a restore, and two of three nodes down under ``acks=all`` with ``min.insync.replicas=2``.

One cluster for the module; each test starts with every node running and every partition in
sync, and its teardown starts again the nodes it took down. The query whose state is shipped
read its events from the cluster itself (no other broker runs)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import ConfigResource
from helpers.plainrun import assert_same_rows
from helpers.shipping import (
    KEYS,
    assert_each_batch_once,
    finished_checkpoint,
    state_copy,
    wait_for,
)

from statekit.changelog import writer as writer_module
from statekit.changelog.reader import read_changelog
from statekit.changelog.writer import ChangelogWriter
from statekit.datasets import GAME_SPEC, game_events
from statekit.errors import BadArgument, ChangelogError, StatekitError
from statekit.kafka import KafkaCluster
from statekit.kafka.clients import admin_client
from statekit.kafka.dataset_replay import replay
from statekit.kafka.topics import create_topic, describe_topic_config
from statekit.kafka.transactions import transactional_producer
from statekit.processes import is_alive
from statekit.restore import RestoreListener, restore_stores
from statekit.restore import rebuild as rebuild_module
from statekit.spark_state.state_reader import StateReader

pytestmark = pytest.mark.slow



@pytest.fixture(scope="module")
def cluster():
    with KafkaCluster(brokers=3) as running:
        yield running


@pytest.fixture()
def healthy(cluster):
    """The cluster with every node running and every partition in sync, before and after."""
    cluster.wait_in_sync(timeout=120)
    yield cluster
    cluster.start()  # the nodes the test killed or stopped (their ports and folders)
    cluster.wait_in_sync(timeout=120)


@pytest.fixture(scope="module")
def finished(spark, cluster, tmp_path_factory) -> Path:
    """The checkpoint of a query that read the game events from the cluster in 500-record
    batches (changelog off: each test ships a copy with a writer of its own)."""
    # the events' times (5 January 2026) lie further back than Kafka's default retention.ms
    # (7 days): kept, or the broker deletes them ~30 s after it started (its first check)
    replay(game_events(), cluster, "cluster-games", partitions=4, progress=False,
           topic_config={"retention.ms": "-1"})
    return finished_checkpoint(spark, cluster, "cluster-games",
                               tmp_path_factory.mktemp("cluster"), "cluster")


@pytest.fixture()
def state(spark, finished, tmp_path) -> StateReader:
    return state_copy(spark, finished, tmp_path)


class KillAfter:
    """A producer that runs ``kill()`` once ``after`` records went through its ``produce``
    (everything else is the real producer's)."""

    def __init__(self, producer, after: int, kill):
        self._producer, self._left, self._kill = producer, after, kill

    def produce(self, *args, **kwargs):
        self._left -= 1
        if self._left == 0:
            self._kill()
        return self._producer.produce(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._producer, name)


class Failover:
    """Kills the leader of ``partition`` of ``topic`` and times, on a thread of its own, how
    long until the cluster names another leader."""

    def __init__(self, cluster: KafkaCluster, topic: str, partition: int = 0):
        self.cluster, self.topic, self.partition = cluster, topic, partition
        self.victim = self.new_leader = None
        self.killed_at = self.elected_after = None
        self.was_controller = False
        self._watch: threading.Thread | None = None

    def kill(self) -> None:
        self.victim = self.cluster.leader_of(self.topic, self.partition)
        self.was_controller = self.cluster.controller() is self.victim
        self.killed_at = time.monotonic()
        self.cluster.kill(self.victim)
        self._watch = threading.Thread(target=self._wait_for_leader, daemon=True)
        self._watch.start()

    def _wait_for_leader(self) -> None:
        self.new_leader = self.cluster.leader_of(self.topic, self.partition,
                                                 other_than=self.victim, timeout=120)
        self.elected_after = time.monotonic() - self.killed_at

    def join(self) -> None:
        self._watch.join(150)
        assert self.new_leader is not None and self.new_leader is not self.victim

    def __str__(self) -> str:
        role = " (the active controller too)" if self.was_controller else ""
        return (f"node {self.victim.node_id}{role} killed; node {self.new_leader.node_id} "
                f"leads {self.topic}-{self.partition} {self.elected_after:.2f} s later")


def meta_partition(cluster: KafkaCluster, topic: str, partition: int):
    return admin_client(cluster).list_topics(topic=topic, timeout=10).topics[topic] \
        .partitions[partition]


# --- (a) the cluster forms ----------------------------------------------------------------
def test_the_cluster_forms_and_a_topic_has_three_replicas_in_sync(healthy, topic_name):
    cluster = healthy
    assert cluster.running and len(cluster.nodes) == 3
    assert cluster.bootstrap_servers == ",".join(f"127.0.0.1:{n.port}" for n in cluster.nodes)
    meta = admin_client(cluster).list_topics(timeout=10)
    assert sorted(meta.brokers) == [1, 2, 3]
    # one quorum of three voters, one cluster id, a log folder each
    voters = {n.settings()["controller.quorum.voters"] for n in cluster.nodes}
    assert len(voters) == 1 and voters.pop().count("@127.0.0.1:") == 3
    ids = {(n.data_dir / "meta.properties").read_text().split("cluster.id=")[1].split()[0]
           for n in cluster.nodes}
    assert ids == {cluster.cluster_id}
    assert len({n.log_dir for n in cluster.nodes}) == 3
    assert all(n.log_dir.parent == cluster.folder for n in cluster.nodes)
    create_topic(cluster, topic_name, partitions=3)  # the cluster's default: 3 replicas
    for p in range(3):
        wait_for(lambda p=p: cluster.in_sync(topic_name, p) == [1, 2, 3], 30,
                 f"partition {p} fully in sync")
        leader = cluster.leader_of(topic_name, p)
        assert leader in cluster.nodes and leader.running
        assert sorted(meta_partition(cluster, topic_name, p).replicas) == [1, 2, 3]
    assert describe_topic_config(cluster, topic_name)["min.insync.replicas"] == "2"
    # the transaction coordinator's log, created by the first transactional producer: the
    # same three replicas and two in sync
    transactional_producer(cluster, f"{topic_name}-txn")
    internal = admin_client(cluster).list_topics("__transaction_state", timeout=10) \
        .topics["__transaction_state"].partitions.values()
    assert internal and all(sorted(p.replicas) == [1, 2, 3] for p in internal)
    resource = ConfigResource(ConfigResource.Type.TOPIC, "__transaction_state")
    configs = admin_client(cluster).describe_configs([resource])[resource].result(30)
    assert configs["min.insync.replicas"].value == "2"


# --- (b) the leader killed mid-round ----------------------------------------------------------
def test_a_leader_killed_mid_round_loses_and_repeats_nothing(healthy, state, monkeypatch):
    """``kill -9`` of the node leading changelog partition 0, halfway through the records of a
    round: the round (or the next, when it failed) commits once a new leader is elected, and
    the topic then holds each change of each batch exactly once."""
    cluster, topic = healthy, "cluster-kill-round-changelog"
    writer = ChangelogWriter(state, cluster, topic)
    assert writer.ship(through=2) == 2
    failover = Failover(cluster, topic)
    real = writer_module.ship_round
    rows = []

    def round_with_a_kill(producer, topic_, table, *args, **kwargs):
        if not rows:  # the first round only: a retried round runs undisturbed
            rows.append(table.num_rows)
            producer = KillAfter(producer, table.num_rows // 2, failover.kill)
        return real(producer, topic_, table, *args, **kwargs)

    monkeypatch.setattr(writer_module, "ship_round", round_with_a_kill)
    errors = []
    while True:
        try:
            assert writer.ship(through=6) == 6
            break
        except ChangelogError as exc:  # the round failed: as its error says, ship again
            errors.append(exc)
            assert "not committed" in str(exc) and len(errors) < 5
    committed_after = time.monotonic() - failover.killed_at
    monkeypatch.undo()
    failover.join()
    assert not failover.victim.running and rows and rows[0] > 1
    print(f"\nleader failover mid-round: {failover}, after {rows[0] // 2} of the round's "
          f"{rows[0]} records; the round committed {committed_after:.2f} s after the kill "
          f"({len(errors)} failed attempts{': ' + str(errors[0])[:200] if errors else ''})")
    assert writer.ship() == state.batch_range()[1]  # it carries on, on two nodes
    assert_each_batch_once(cluster, state, topic)


# --- (c) the leader killed mid-restore ------------------------------------------------------
def test_a_leader_killed_mid_restore_restores_the_whole_state(healthy, state, tmp_path,
                                                             monkeypatch):
    cluster, topic = healthy, "cluster-kill-restore-changelog"
    writer = ChangelogWriter(state, cluster, topic)
    last = state.batch_range()[1]
    for batch in range(last + 1):  # a round each: record batches of their own
        assert writer.ship(through=batch) == batch
    # a consumer that fetches little at a time (a record batch: a round's records of a
    # partition) and keeps little in its queue, so that most of the restore is fetched after
    # the kill; it looks again 0.1 s after a full queue (librdkafka's fetch.queue.backoff.ms,
    # 1 s by default)
    small = {"message.max.bytes": 1000, "fetch.max.bytes": 1024,
             "max.partition.fetch.bytes": 512, "queued.max.messages.kbytes": 1,
             "queued.min.messages": 1, "fetch.queue.backoff.ms": 100}
    real = rebuild_module.plain_consumer
    monkeypatch.setattr(rebuild_module, "plain_consumer",
                        lambda kafka, *a, **kw: real(kafka, *a, **{**small, **kw}))
    failover = Failover(cluster, topic, partition=0)
    after_kill: list[tuple[float, int]] = []  # (when, records) of partition 0 after the kill

    class KillOnFirstChunk(RestoreListener):
        def on_batch_restored(self, partition, batch_end_offset, n):
            if partition != 0:
                return
            if failover.victim is None:
                failover.kill()
            else:
                after_kill.append((time.monotonic(), n))

    started = time.monotonic()
    with restore_stores(cluster, topic, GAME_SPEC, tmp_path / "stores", consumers="one",
                        chunk=20, listeners=[KillOnFirstChunk()]) as restored:
        took = time.monotonic() - started
        assert_same_rows(restored.table(), state.snapshot(last), KEYS)
        report = restored.report.set_index("partition")
    failover.join()
    elected = failover.killed_at + failover.elected_after
    later = [(at, n) for at, n in after_kill if at >= elected]
    print(f"\nleader failover mid-restore: {failover}; of partition 0's "
          f"{report.loc[0, 'records']} records, {sum(n for _, n in after_kill)} were restored "
          f"after the kill, {sum(n for _, n in later)} after the new leader was elected, the "
          f"first of those {later[0][0] - failover.killed_at if later else float('nan'):.2f} "
          f"s after the kill; the restore took {took:.2f} s")
    assert later, "all of partition 0 was fetched before the kill: the drill drilled nothing"
    assert report["records"].sum() == len(read_changelog(cluster, topic))


# --- (d) two of three nodes down ---------------------------------------------------------------
@pytest.mark.parametrize("how", ["stop", "kill"])
def test_two_of_three_nodes_down_fail_a_round_naming_them_and_min_insync_replicas(
        healthy, state, how):
    """``stop``: each shuts down in order, its replicas leave the in-sync sets, which shrink to
    the one node left (below ``min.insync.replicas=2``). ``kill``: ``kill -9`` of both, which
    takes the controllers' majority too: nothing can change any more. Either way no
    ``acks=all`` write completes; the writer's error says which nodes do not answer, what
    ``acks=all`` needs, and what to do; doing it works."""
    cluster, topic = healthy, f"cluster-two-down-{how}-changelog"
    writer = ChangelogWriter(state, cluster, topic, flush_timeout=10)
    assert writer.ship(through=1) == 1
    left = cluster.leader_of(topic, 0)
    down = [n for n in cluster.nodes if n is not left]
    for node in down:
        getattr(cluster, how)(node)
    with pytest.raises(ChangelogError) as info:
        writer.ship()
    message = str(info.value)
    print(f"\ntwo nodes down ({how}): {message}")
    assert "not committed" in message
    for node in down:
        assert f"{node.bootstrap_servers}" in message
    assert re.search(r"acks=all.*min\.insync\.replicas", message)
    assert "start the brokers that are down" in message
    cluster.start()  # as the error says
    assert writer.ship() == state.batch_range()[1]
    assert_each_batch_once(cluster, state, topic)


# --- a cluster of its own: errors, and dying with its parent -----------------------------------
def test_a_node_that_cannot_start_is_named_and_the_others_are_stopped():
    with pytest.raises(BadArgument, match="a number of nodes from 1 to 9"):
        KafkaCluster(brokers=0)
    cluster = KafkaCluster(brokers=3)
    folder = cluster.folder
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        cluster.nodes[1].port = busy
        try:
            with pytest.raises(StatekitError) as info:
                cluster.start()
            pids = [n.pid for n in cluster.nodes]
        finally:
            cluster.close()
    message = str(info.value)
    assert f"node 2 (127.0.0.1:{busy}, folder {folder / 'node-2'})" in message
    assert f"client port {busy} is in use" in message and "did not start" in message
    assert pids == [None, None, None] and not cluster.running  # node 1 was stopped again
    assert not folder.exists()


def test_the_nodes_die_with_their_parent():
    """Started on a thread of their own, the nodes would get their parent-death signal when
    that thread ends: the cluster starts them on the caller's thread."""
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import time
        from statekit.kafka import KafkaCluster
        cluster = KafkaCluster(brokers=3).start()
        time.sleep(1)  # long after the threads that prepared and waited for the nodes ended
        print(cluster.folder, *(n.pid for n in cluster.nodes if n.running), flush=True)
        time.sleep(600)
    """)], stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[2])
    try:
        words = child.stdout.readline().split()
        assert len(words) == 4, f"the child printed {words}"
        folder, pids = Path(words[0]), [int(w) for w in words[1:]]
        assert all(is_alive(pid) for pid in pids)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
        wait_for(lambda: not any(is_alive(pid) for pid in pids), 30, "every node gone")
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    shutil.rmtree(folder, ignore_errors=True)  # nothing ran its close()
