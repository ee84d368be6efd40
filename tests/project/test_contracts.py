"""Contracts a user relies on without thinking: numpy integers work as batch ids, waits time
out, and a changelog's meaning travels with it (never a silently wrong table)."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import pytest

import statekit as sk
from statekit.changelog import Changelog, materialize, read_changelog, upto_batch
from statekit.changelog.writer import ChangelogWriter
from statekit.restore import restore_stores


# --- whole numbers from pandas ------------------------------------------------------------
def test_batch_ids_read_out_of_pandas_are_accepted(logged, broker):
    query, log = logged
    first = query.metadata()["min_batch"].min()
    assert isinstance(first, np.integer)
    # the log was read when the query had drained; a later no-data batch (windows the
    # watermark evicts) may have committed since, so compare the batches the log holds
    changes = query.changes(from_batch=first, to_batch=log.last_batch)
    assert changes["batch"].min() == first and len(changes) == len(log)
    last = query.progress()["batch"].max()
    assert isinstance(last, np.integer)
    pd.testing.assert_frame_equal(query.snapshot(batch=last), query.snapshot(batch=int(last)))
    pd.testing.assert_frame_equal(query.changes(from_batch=np.int32(2), to_batch=np.int64(3)),
                                  query.changes(from_batch=2, to_batch=3))
    part = read_changelog(broker, query.changelog_topic, to_batch=np.int64(2),
                          partitions=[np.int64(1)])
    assert set(part.records["partition"]) == {1} and part.records["batch"].max() <= 2
    assert len(upto_batch(log, np.int64(2))) == (log.records["batch"] <= 2).sum()
    with restore_stores(broker, query.changelog_topic, query.spec, partitions=[np.int64(0)],
                        to_batch=np.int64(2)) as restored:
        assert list(restored.stores) == [0]


@pytest.mark.parametrize("bad", [True, 1.0, "1", np.float64(1.0)])
def test_bools_floats_and_strings_are_refused_as_batch_ids(logged, bad):
    query, log = logged
    with pytest.raises(sk.BadArgument, match=r"bad batch: .*; accepted: a batch id \(a whole "
                                             r"number >= 0\)"):
        query.snapshot(batch=bad)
    with pytest.raises(sk.BadArgument, match="from_batch"):
        query.changes(from_batch=bad)
    with pytest.raises(sk.BadArgument, match="to_batch"):
        log.materialize(to_batch=bad)


def test_a_batch_past_the_end_names_the_retained_range(logged):
    query, _ = logged
    with pytest.raises(sk.BatchNotRetained, match=rf"batch {query.last_batch + 1} .*"
                                                  rf"0\.\.{query.last_batch}"):
        query.snapshot(batch=np.int64(query.last_batch + 1))


# --- waits that end -------------------------------------------------------------------------
def test_waiting_for_a_batch_that_never_commits_times_out_naming_it(logged, broker):
    query, _ = logged
    never = query.last_batch + 5
    started = time.monotonic()
    with pytest.raises(TimeoutError, match=rf"batch {never} was not shipped .* not committed: "
                                           rf"the last committed batch is {query.last_batch}\)"
                                           rf"; the last batch shipped is {query.last_batch}"):
        query.changelog.wait_shipped(never, timeout=0.5)  # the background thread is running
    # a writer whose thread is not running (stopped, or never started) times out too
    idle = ChangelogWriter(query.reader, broker, query.changelog_topic)
    with pytest.raises(TimeoutError, match=f"batch {never} was not shipped"):
        idle.wait_shipped(never, timeout=0.5)
    assert time.monotonic() - started < 30
    assert idle.wait_shipped(np.int64(query.last_batch), timeout=5) == query.last_batch


def test_waiting_after_stop_times_out(spark, broker, games, tmp_path):
    from statekit.datasets import GAME_EVENT_SCHEMA, GAME_SPEC

    query = sk.start_query(games, GAME_SPEC, spark=spark, kafka=broker,
                           event_schema=GAME_EVENT_SCHEMA, checkpoint=str(tmp_path / "ck"),
                           name="stopped", trigger="available-now")
    query.query.awaitTermination(120)
    query.close()  # the writer's thread is gone now
    last = query.last_batch
    assert query.changelog.shipped_batch == last
    with pytest.raises(TimeoutError, match=rf"batch {last + 1} was not shipped .* the last "
                                           rf"batch shipped is {last}"):
        query.changelog.wait_shipped(last + 1, timeout=1.0)


# --- the changelog's meaning is explicit ------------------------------------------------------
def test_a_changelog_says_what_its_columns_are(logged):
    _, log = logged
    assert isinstance(log, Changelog)
    assert log.key_columns == ("player", "window_start", "window_end")
    assert log.value_columns == ("count", "sum_score", "max_score")
    assert "Changelog('board-counts-changelog'" in repr(log)
    assert "<b>Changelog</b>" in log._repr_html_()


def test_a_bare_frame_needs_its_columns_named_never_a_silently_wrong_table(logged):
    query, log = logged
    frame = pd.concat([log.records])  # what used to drop DataFrame.attrs silently
    with pytest.raises(sk.BadArgument, match="key_columns=.*value_columns="):
        materialize(frame)
    named = materialize(frame, key_columns=list(log.key_columns),
                        value_columns=list(log.value_columns))
    pd.testing.assert_frame_equal(named, log.materialize())
    assert list(named.columns) == [*log.key_columns, *log.value_columns, "partition"]
    with pytest.raises(sk.BadArgument, match="missing column 'sum_score'"):
        materialize(frame.drop(columns="sum_score"), key_columns=list(log.key_columns),
                    value_columns=list(log.value_columns))
    with pytest.raises(sk.BadArgument, match="missing column 'max_score'"):
        Changelog(frame.drop(columns="max_score"), log.topic, log.key_columns,
                  log.value_columns, log.last_batch)
    with pytest.raises(sk.BadArgument, match="a Changelog"):
        materialize([1, 2, 3])


def test_views_of_a_changelog_keep_its_meaning(logged):
    query, log = logged
    half = log.upto_batch(query.last_batch // 2)
    kept = half.compact()
    for view in (half, kept):
        assert (view.topic, view.key_columns, view.value_columns, view.last_batch) == (
            log.topic, log.key_columns, log.value_columns, log.last_batch)
    pd.testing.assert_frame_equal(kept.materialize(), half.materialize())


def test_a_checkpoint_url_is_read_where_it_is_or_refused_never_turned_into_a_local_folder():
    from statekit.errors import BadArgument
    from statekit.spark.object_path import ObjectPath
    from statekit.spark_state.checkpoint import Checkpoint

    with pytest.raises(BadArgument, match="hdfs://nn/ck.*mount"):
        Checkpoint("hdfs://nn/ck")
    with pytest.raises(BadArgument, match="s3://bucket/ck.*s3a://bucket/ck"):
        Checkpoint("s3://bucket/ck")
    on_s3 = Checkpoint("s3a://bucket/ck").path
    assert isinstance(on_s3, ObjectPath) and str(on_s3) == "s3a://bucket/ck"
    assert str(Checkpoint("file:///tmp/ck").path) == "/tmp/ck"
