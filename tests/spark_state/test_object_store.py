"""``s3a://`` checkpoints: ``open_checkpoint``, ``describe`` and snapshots read from an
S3-compatible server (moto's, in this process, on 127.0.0.1) equal the same checkpoint read
from a local copy; and bad input (no credentials, a bucket that does not exist) named.

One small plain PySpark query (a count per key over two JSON files, one a batch) writes its
checkpoint to the server through Hadoop's S3A connector, followed by ``statekit.attach``
while it runs; every test reads that one checkpoint. The shared session carries the
connector when ``make s3a-jars`` fetched it (``tests/conftest.py``); without it, or without
moto, the Spark tests are skipped, named.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

import statekit as sk
from statekit.errors import BadArgument, CheckpointError, ObjectStoreError, S3AJarsMissing
from statekit.inspect import open_checkpoint
from statekit.ports import free_port
from statekit.spark.object_path import ObjectPath
from statekit.spark.object_store import location
from statekit.spark.s3a_jars import S3A_JARS
from statekit.spark.s3a_settings import S3ASettings, ready_for, require_connector
from statekit.spark_state.checkpoint import Checkpoint

BUCKET = "statekit-checkpoints"
QUERY_TIMEOUT = 240
KEYS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1"}


# --- pure: settings and locations ----------------------------------------------------------
def test_settings_come_from_spark_conf_first_then_environment_then_aws_files(tmp_path):
    aws = tmp_path / ".aws"
    aws.mkdir()
    (aws / "credentials").write_text("[default]\naws_access_key_id = file-key\n"
                                     "aws_secret_access_key = file-secret\n"
                                     "[other]\naws_access_key_id = other-key\n"
                                     "aws_secret_access_key = other-secret\n")
    (aws / "config").write_text("[profile other]\nregion = eu-west-1\n")
    home = {"HOME": str(tmp_path)}
    assert S3ASettings.resolve("b1", {}, home).access_key == "file-key"
    other = S3ASettings.resolve("b1", {}, {**home, "AWS_PROFILE": "other"})
    assert (other.access_key, other.region) == ("other-key", "eu-west-1")
    assert "credentials [other]" in other.source
    env = S3ASettings.resolve("b1", {}, {**home, **KEYS})
    assert (env.access_key, env.source) == ("testing", "the environment")
    conf = {"spark.hadoop.fs.s3a.access.key": "conf-key",
            "spark.hadoop.fs.s3a.secret.key": "conf-secret",
            "spark.hadoop.fs.s3a.bucket.b2.access.key": "b2-key",
            "spark.hadoop.fs.s3a.bucket.b2.secret.key": "b2-secret",
            "spark.hadoop.fs.s3a.endpoint": "http://127.0.0.1:1"}
    assert S3ASettings.resolve("b1", conf, {**home, **KEYS}).access_key == "conf-key"
    b2 = S3ASettings.resolve("b2", conf, home)
    assert (b2.access_key, b2.endpoint, b2.path_style) == ("b2-key", "http://127.0.0.1:1", True)


def test_no_credentials_names_every_place_they_are_read_from(tmp_path):
    with pytest.raises(ObjectStoreError, match="no credentials for bucket 'b1'.*"
                       "spark.hadoop.fs.s3a.access.key.*AWS_ACCESS_KEY_ID.*~/.aws/credentials"):
        S3ASettings.resolve("b1", {}, {"HOME": str(tmp_path)})


def test_locations_other_schemes_and_bad_buckets_are_named():
    path = location("s3a://bucket/a//b/")
    assert isinstance(path, ObjectPath) and str(path) == "s3a://bucket/a/b"
    assert str(path / "offsets") == "s3a://bucket/a/b/offsets"
    assert path.relative_to(ObjectPath.parse("s3a://bucket/a")).as_posix() == "b"
    with pytest.raises(BadArgument, match="s3a://bucket/ck"):
        location("s3://bucket/ck")
    with pytest.raises(BadArgument, match="mount the hdfs:// location"):
        location("hdfs://namenode/ck")
    with pytest.raises(BadArgument, match="bucket name"):
        location("s3a://Not_A_Bucket/ck")


# --- an S3-compatible server and one query's checkpoint on it -------------------------------
@pytest.fixture(scope="module")
def s3_server():
    """moto's S3 server on a free port of 127.0.0.1, with the bucket made, and the keys it
    takes in the environment (restored after)."""
    server_module = pytest.importorskip("moto.server", reason="moto[server] is not installed")
    port = free_port()
    server = server_module.ThreadedMotoServer(ip_address="127.0.0.1", port=port,
                                              verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    before = {name: os.environ.get(name) for name in (*KEYS, "AWS_ENDPOINT_URL")}
    os.environ.update(KEYS, AWS_ENDPOINT_URL=endpoint)
    try:
        from pyarrow import fs

        fs.S3FileSystem(access_key="testing", secret_key="testing", scheme="http",
                        endpoint_override=f"127.0.0.1:{port}",
                        allow_bucket_creation=True).create_dir(BUCKET)
        yield endpoint
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        server.stop()


@pytest.fixture(scope="module")
def s3a_spark(spark):
    """The shared session, skipped (named) when its JVM lacks Hadoop's S3A connector."""
    try:
        require_connector(spark)
    except S3AJarsMissing:
        pytest.skip(f"Hadoop's S3A connector is not fetched: `{S3A_JARS.fetch_command}`")
    return spark


@pytest.fixture(scope="module")
def checkpoints(s3a_spark, s3_server, tmp_path_factory):
    """(the s3a:// checkpoint, a local copy of it, what ``attach`` read while the query ran)
    of one count per key over two files, one a batch."""
    folder = tmp_path_factory.mktemp("s3a-input")
    for i in range(2):
        (folder / f"f{i}.json").write_text("\n".join(
            json.dumps({"k": f"k{j % 3}", "v": i * 10 + j}) for j in range(6)))
    remote = ObjectPath.parse(f"s3a://{BUCKET}/counts/checkpoint")
    ready_for(s3a_spark, remote)
    frame = (s3a_spark.readStream.schema("k string, v long").option("maxFilesPerTrigger", 1)
             .json(str(folder)).groupBy("k").count())
    query = (frame.writeStream.outputMode("update").format("noop")
             .option("checkpointLocation", str(remote))
             .trigger(processingTime="200 milliseconds").start())
    try:
        with sk.attach(query) as live:   # the checkpoint found from the query itself
            deadline = time.monotonic() + QUERY_TIMEOUT
            while live.last_batch < 1:   # both files: batches 0 and 1
                assert query.exception() is None, query.exception()
                assert time.monotonic() < deadline, f"no 2 batches in {QUERY_TIMEOUT} s"
                time.sleep(0.1)
            attached = {"checkpoint": str(live.checkpoint), "last_batch": live.last_batch,
                        "snapshot": live.snapshot(batch=1)}
    finally:
        query.stop()
    assert query.exception() is None, query.exception()
    local = tmp_path_factory.mktemp("s3a-copy") / "checkpoint"
    from pyarrow import fs

    fs.copy_files(f"{BUCKET}/counts/checkpoint", str(local),
                  source_filesystem=remote.filesystem,
                  destination_filesystem=fs.LocalFileSystem())
    return str(remote), local, attached


# --- reading it -------------------------------------------------------------------------------
def test_open_checkpoint_on_s3a_reads_what_a_local_copy_reads(checkpoints):
    remote, local, _ = checkpoints
    on_s3, copied = open_checkpoint(remote), open_checkpoint(local)
    assert on_s3.path == remote
    assert on_s3.query_id == copied.query_id
    assert on_s3.retained_batches() == copied.retained_batches() == [0, 1]
    for read in ("batches", "commits", "operators", "states"):
        left, right = getattr(on_s3, read)(), getattr(copied, read)()
        assert left.equals(right), read
    files = on_s3.state_files()
    assert len(files) == len(copied.state_files()) > 0
    assert all(f.startswith(f"{remote}/state/0/") for f in files["file"])


def test_snapshot_and_describe_on_s3a_equal_the_local_copy(checkpoints):
    remote, local, _ = checkpoints
    on_s3, copied = open_checkpoint(remote), open_checkpoint(local)
    for batch in (0, 1):
        left = on_s3.state().snapshot(batch).sort_values("k", ignore_index=True)
        right = copied.state().snapshot(batch).sort_values("k", ignore_index=True)
        assert left.equals(right), batch
    last = on_s3.state().snapshot().set_index("k")["count"].to_dict()
    assert last == {"k0": 4, "k1": 4, "k2": 4}
    described, described_local = on_s3.describe(), copied.describe()
    assert described.flag_names == described_local.flag_names
    assert described.table.drop(columns=["checkpoint"], errors="ignore").equals(
        described_local.table.drop(columns=["checkpoint"], errors="ignore"))


def test_attach_follows_a_query_whose_checkpoint_is_on_s3a(checkpoints):
    remote, local, attached = checkpoints
    assert attached["checkpoint"] == remote and attached["last_batch"] == 1
    copied = open_checkpoint(local).state().snapshot(1)
    columns = [c for c in copied.columns if c in attached["snapshot"].columns]
    assert attached["snapshot"][columns].sort_values("k", ignore_index=True).equals(
        copied[columns].sort_values("k", ignore_index=True))


def test_a_bucket_that_does_not_exist_is_named(s3_server):
    with pytest.raises(ObjectStoreError, match="bucket 'no-such-bucket' does not exist at "
                       "http://127.0.0.1"):
        open_checkpoint("s3a://no-such-bucket/ck")
    with pytest.raises(Exception, match=f"'s3a://{BUCKET}/nowhere' does not exist"):
        open_checkpoint(f"s3a://{BUCKET}/nowhere")


def test_missing_credentials_for_s3a_name_the_settings(s3_server, monkeypatch, tmp_path):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE",
                 "AWS_SHARED_CREDENTIALS_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(ObjectStoreError, match="no credentials for bucket 'another-bucket'.*"
                       "AWS_ACCESS_KEY_ID"):
        open_checkpoint("s3a://another-bucket/ck")


def test_the_jars_are_named_when_not_fetched(tmp_path):
    with pytest.raises(S3AJarsMissing, match="python -m statekit.spark.s3a_jars"):
        S3A_JARS.jars({"XDG_CACHE_HOME": str(tmp_path)})
    assert Path(S3A_JARS.pom).is_file()


def test_what_writes_into_the_checkpoint_refuses_s3a_naming_the_capability():
    checkpoint = Checkpoint("s3a://bucket/ck")
    assert checkpoint.progress_dir == ObjectPath.parse("s3a://bucket/ck/_statekit/progress")
    with pytest.raises(CheckpointError, match="keeping progress reports needs a local "
                       "checkpoint folder.*'s3a://bucket/ck' is an s3a:// location"):
        checkpoint.write_progress(0, "{}")
    with pytest.raises(CheckpointError, match="counting late events needs a local"):
        checkpoint.write_late_count(0, 1, 0)


class _NoConnectorJVM:
    """A session whose JVM cannot load a class (as one started without the connector)."""

    class sparkContext:  # noqa: N801 (SparkSession's attribute name)
        class _jsc:  # noqa: N801
            @staticmethod
            def hadoopConfiguration():
                return type("Conf", (), {"getClassLoader": staticmethod(lambda: None)})()

        class _jvm:  # noqa: N801
            class java:  # noqa: N801
                class lang:  # noqa: N801
                    class Class:  # noqa: N801
                        @staticmethod
                        def forName(name, initialize, loader):  # noqa: N802 (Java's name)
                            raise RuntimeError(f"py4j: java.lang.ClassNotFoundException: {name}")


def test_a_session_started_without_the_connector_is_told_how_to_start_one():
    with pytest.raises(S3AJarsMissing, match=r"started without Hadoop's S3A connector.*"
                       r"spark_session\(s3a=True\)") as caught:
        require_connector(_NoConnectorJVM())
    assert "py4j" not in str(caught.value) and "ClassNotFound" not in str(caught.value)
