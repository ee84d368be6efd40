"""Faults from outside: a full disk, a read-only disk, a broker that stops answering, and what a
notebook sees of them (one clear error; Spark's traces and plan go to ``spark_log()``).

The disk tests mount a small tmpfs of their own (they need root on Linux and are skipped,
with the reason, elsewhere); the real disk is never filled. The stalled broker is an
``EmbeddedBroker`` of the test's own, stopped with SIGSTOP and resumed with SIGCONT.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

import statekit as sk
from statekit.changelog.writer import ChangelogWriter
from statekit.datasets import GAME_EVENT_SCHEMA, GAME_SPEC, game_events
from statekit.errors import BrokerUnreachable, DiskFull
from statekit.kafka.dataset_replay import replay
from statekit.spark.session import spark_log


@pytest.fixture()
def small_disk(tmp_path):
    """A 4 MB tmpfs of this test's own (skipped where it cannot be mounted)."""
    where = tmp_path / "disk"
    where.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(where)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    yield where
    subprocess.run(["umount", "-l", str(where)], capture_output=True)


def fill(disk: Path) -> Path:
    """Write zeros into ``disk`` until it is full; the filler file's path."""
    filler = disk / "filler"
    with open(filler, "wb") as out:
        try:
            while True:
                out.write(b"\0" * 65536)
                out.flush()
        except OSError:
            pass
    return filler


def read_only(folder: Path) -> None:
    """Make ``folder`` read-only in place: a read-only bind mount of itself (a plain remount
    would wait for files Spark still holds open there)."""
    subprocess.run(["mount", "--bind", str(folder), str(folder)], check=True)
    subprocess.run(["mount", "-o", "remount,ro,bind", str(folder)], check=True)


def start(topic, broker, spark, checkpoint, name, **kwargs):
    return sk.start_query(topic, GAME_SPEC, spark=spark, kafka=broker,
                          event_schema=GAME_EVENT_SCHEMA, checkpoint=str(checkpoint), name=name,
                          max_offsets_per_trigger=500, trigger="100 milliseconds", **kwargs)


@pytest.mark.slow   # two query runs around a full disk
@pytest.mark.timeout(600)
def test_a_full_disk_is_named_progress_still_reads_and_the_query_resumes(
        spark, broker, topic_name, small_disk):
    records = game_events().records
    replay(records.iloc[:1000], broker, topic_name, partitions=2, progress=False)
    checkpoint = small_disk / "ck"
    query = start(topic_name, broker, spark, checkpoint, "full-disk", changelog=False)
    query.wait_until_drained()
    committed = query.last_batch
    query.checkpoint.progress_path(committed).unlink()  # its report was lost to the full disk
    filler = fill(small_disk)
    replay(records.iloc[1000:1500], broker, topic_name, create=False, progress=False)
    with pytest.raises(DiskFull, match=rf"no space left on the device of {str(checkpoint)!r} "
                                       rf"\(\d+ bytes free\); about [\d,]+ bytes are needed: "
                                       rf".*resumes from its last commit") as err:
        query.wait_until_drained(120)
    assert "=== Streaming Query ===" not in str(err.value) and len(str(err.value)) < 1000
    assert err.value.folder == str(checkpoint) and err.value.needed > 0
    progress = query.progress()  # reads only: the full disk does not matter
    assert progress["batch"].tolist() == list(range(committed + 1))
    read_only(checkpoint)
    try:
        with pytest.raises(OSError):
            (checkpoint / "probe").write_text("x")
        assert query.progress()["input_rows"].sum() == 1000  # nor does a read-only one
        query.close()
    finally:
        subprocess.run(["umount", str(checkpoint)], check=True)
    filler.unlink()
    again = start(topic_name, broker, spark, checkpoint, "full-disk-again", changelog=False)
    try:
        again.wait_until_drained()
        assert again.progress()["input_rows"].sum() == 1500  # resumed: nothing read twice
    finally:
        again.close()


def test_stop_on_a_full_disk_names_the_changelog_ledger_folder(spark, broker, topic_name,
                                                               small_disk):
    replay(game_events().records.iloc[:1000], broker, topic_name, partitions=2, progress=False)
    query = start(topic_name, broker, spark, small_disk / "ck", "full-ledger", changelog=False)
    query.wait_until_drained()
    # a changelog writer that ships only when asked: stop() ships the batches committed
    query.changelog = ChangelogWriter(query.reader, broker, f"{topic_name}-changelog")
    fill(small_disk)
    ledger = query.checkpoint.ledger_path(query.changelog.topic).parent
    written = re.escape(repr(str(ledger))[:-1] + "/")  # the ledger file, in its folder
    with pytest.raises(DiskFull, match=f"no space left to write {written}") as err:
        query.close()
    assert isinstance(err.value, OSError) and not query.is_active


@pytest.mark.slow   # the source waits 30 s for the stopped broker
@pytest.mark.timeout(600)
def test_a_stalled_broker_is_named_and_the_query_resumes_from_its_checkpoint(spark, tmp_path):
    records = game_events().records.iloc[:3000]
    with sk.EmbeddedBroker() as own:
        replay(records, own, "stalled", partitions=2, progress=False)
        query = sk.start_query("stalled", GAME_SPEC, spark=spark, kafka=own,
                               event_schema=GAME_EVENT_SCHEMA, checkpoint=str(tmp_path / "ck"),
                               name="stalled", max_offsets_per_trigger=300, trigger="1 second",
                               changelog=False)
        query.wait_for_batches(2)
        os.kill(own.pid, signal.SIGSTOP)
        try:
            with pytest.raises(BrokerUnreachable) as err:
                query.wait_until_drained(200)
        finally:
            os.kill(own.pid, signal.SIGCONT)
        message = str(err.value)
        assert own.bootstrap_servers in message and "not answering" in message
        assert "resumes from its last commit" in message
        assert "=== Streaming Query ===" not in message and "Traceback" not in message
        assert len(message) < 1000
        assert "=== Streaming Query ===" in str(err.value.spark_error)  # the full error stays
        assert "=== Streaming Query ===" in spark_log().read_text(errors="replace")
        again = sk.start_query("stalled", GAME_SPEC, spark=spark, kafka=own,
                               event_schema=GAME_EVENT_SCHEMA, checkpoint=str(tmp_path / "ck"),
                               name="stalled-again", max_offsets_per_trigger=300,
                               trigger="100 milliseconds", changelog=False)
        try:
            again.wait_until_drained()
            assert again.progress()["input_rows"].sum() == 3000
        finally:
            again.close()


CHILD = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    import statekit as sk
    from pyspark.sql import functions as F
    from statekit.spark.session import spark_log, spark_session

    spark = spark_session("local[1]", shuffle_partitions=1)
    source = Path(sys.argv[1])
    source.mkdir()
    (source / "a.json").write_text(json.dumps({"player": "p1", "ts": "2026-01-05T10:00:00Z"}))

    @F.udf("string")
    def broken(player):
        raise ValueError("this UDF always fails")

    events = (spark.readStream.schema("player string, ts timestamp").json(str(source))
              .withColumn("player", broken("player")))
    query = sk.start_query(events, keys=["player"], window=sk.tumbling("1 minute"),
                           spark=spark, checkpoint=sys.argv[2], changelog=False)
    try:
        query.wait_until_drained(240)
    except sk.StatekitError as exc:
        print("STATEKIT ERROR:", exc)
    print("SPARK LOG:", spark_log())
""")


@pytest.mark.slow   # a Spark session of its own in a child process
@pytest.mark.timeout(600)
def test_a_failed_query_shows_one_clear_error_and_no_java_trace(tmp_path):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    run = subprocess.run([sys.executable, str(script), str(tmp_path / "in"),
                          str(tmp_path / f"ck-{uuid.uuid4().hex[:6]}")],
                         capture_output=True, text=True, timeout=500)
    shown = run.stdout + run.stderr
    assert "STATEKIT ERROR: query 'statekit' failed: this UDF always fails" in run.stdout, shown
    assert "\tat org.apache" not in shown and "=== Streaming Query ===" not in shown
    assert "Traceback" not in shown and "ERROR" not in run.stderr
    log = Path(run.stdout.split("SPARK LOG:")[1].strip())
    logged = log.read_text(errors="replace")
    assert "\tat org.apache" in logged and "this UDF always fails" in logged
