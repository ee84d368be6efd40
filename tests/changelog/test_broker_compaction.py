"""What Apache Kafka's log cleaner really kept of a changelog, against statekit's prediction:
on a real cleaned topic, and the comparison itself with right and wrong inputs."""

from __future__ import annotations

import time

import pandas as pd
import pytest
from helpers.shipping import finished_checkpoint, state_copy, wait_for

from statekit.changelog.broker_compaction import check_broker, compare, infer_cleaned_to
from statekit.changelog.reader import read_changelog
from statekit.changelog.writer import ChangelogWriter
from statekit.errors import StatekitError
from statekit.kafka.cleaner_checkpoint import cleaned_offsets, parse_cleaner_checkpoint


def frame(rows) -> pd.DataFrame:
    """(partition, offset, key, tombstone, minutes after 10:00) rows as a changelog frame."""
    out = pd.DataFrame(rows, columns=["partition", "offset", "key", "tombstone", "minute"])
    out["timestamp"] = pd.Timestamp("2026-01-05 10:00") + pd.to_timedelta(out.pop("minute"),
                                                                          unit="min")
    return out


SHIPPED = frame([(0, 0, "a", False, 0), (0, 1, "b", False, 0), (0, 2, "a", False, 1),
                 (0, 4, "b", True, 1), (0, 5, "a", False, 2),
                 (1, 0, "c", False, 0), (1, 1, "c", False, 1)])
NOW = pd.Timestamp("2026-01-05 10:30")


# --- the comparison: right answers in several spellings, wrong ones refused ----------------
def test_a_broker_that_cleaned_up_to_offset_5_agrees():
    # below 5: a@0 and b@1 superseded; b's tombstone (29 min old, 10 min retention) gone
    kept = SHIPPED[SHIPPED["offset"].isin([2, 5]) & (SHIPPED["partition"] == 0)
                   | (SHIPPED["partition"] == 1)]
    check = compare(SHIPPED, kept, {0: 5}, now=NOW, delete_retention_ms=600_000)
    assert check.agrees and check.settled
    assert check.predicted[["partition", "offset"]].values.tolist() == [[0, 2], [0, 5], [1, 0],
                                                                       [1, 1]]
    assert check.per_partition().to_dict("list") == {
        "partition": [0, 1], "shipped": [5, 2], "predicted": [2, 2], "kept": [2, 2],
        "cleaned_to": [5, -1]}
    assert "they agree record for record" in check.summary()


def test_right_answers_written_differently_agree_too():
    kept = SHIPPED[SHIPPED["offset"].isin([2, 5]) & (SHIPPED["partition"] == 0)
                   | (SHIPPED["partition"] == 1)]
    shuffled = kept.sample(frac=1, random_state=3).astype({"partition": "int32"})
    utc = SHIPPED.assign(timestamp=SHIPPED["timestamp"].dt.tz_localize("UTC"))
    check = compare(utc, shuffled, {0: 5, 1: 0}, now=NOW.tz_localize("UTC"),
                    delete_retention_ms=600_000)
    assert check.agrees and check.settled
    # the first read already partly cleaned (a@0 gone): the same prediction
    partly = compare(SHIPPED[SHIPPED["offset"] != 0], kept, {0: 5}, now=NOW,
                     delete_retention_ms=600_000)
    assert partly.agrees and len(partly.predicted) == 4


def test_a_tombstone_still_held_past_its_retention_waits_and_is_no_disagreement():
    kept = SHIPPED[SHIPPED["offset"].isin([2, 4, 5]) & (SHIPPED["partition"] == 0)
                   | (SHIPPED["partition"] == 1)]
    check = compare(SHIPPED, kept, {0: 5}, now=NOW, delete_retention_ms=600_000)
    assert check.agrees and not check.settled
    assert check.tombstones_waiting["offset"].tolist() == [4]
    assert "1 tombstones past delete.retention.ms wait" in check.summary()
    # within its retention the tombstone is predicted kept: the broker holding it agrees
    young = compare(SHIPPED, kept, {0: 5}, now=NOW, delete_retention_ms=3_600_000)
    assert young.settled


@pytest.mark.parametrize("wrong, missing, unexpected", [
    ("a superseded record kept", [], [0]),
    ("the latest record of a key dropped", [5], []),
    ("a record of the open head dropped", [1], []),
])
def test_wrong_broker_logs_are_refused(wrong, missing, unexpected):
    right = {(0, 2), (0, 5), (1, 0), (1, 1)}
    keep = {
        "a superseded record kept": right | {(0, 0)},
        "the latest record of a key dropped": right - {(0, 5)},
        "a record of the open head dropped": right - {(1, 1)},
    }[wrong]
    kept = SHIPPED[[(p, o) in keep for p, o in zip(SHIPPED["partition"], SHIPPED["offset"],
                                                   strict=True)]]
    check = compare(SHIPPED, kept, {0: 5}, now=NOW, delete_retention_ms=600_000)
    assert not check.agrees, wrong
    assert check.missing["offset"].tolist() == missing
    assert check.unexpected["offset"].tolist() == unexpected
    assert "they differ" in check.summary()


def test_the_cleaned_point_of_a_remote_broker_is_inferred_as_a_lower_bound():
    # a@0 gone: the cleaner reached a@2 at least; b@1 gone too: it reached b's tombstone at 4
    only_a = SHIPPED[~((SHIPPED["offset"] == 0) & (SHIPPED["partition"] == 0))]
    assert infer_cleaned_to(SHIPPED, only_a) == {0: 3}
    kept = SHIPPED[~SHIPPED["offset"].isin([0, 1]) | (SHIPPED["partition"] == 1)]
    assert infer_cleaned_to(SHIPPED, kept) == {0: 5}
    check = compare(SHIPPED, kept, now=NOW, delete_retention_ms=3_600_000)
    assert check.cleaned_to == {0: 5} and not check.cleaned_known and check.settled
    assert "inferred" in check.summary()


def test_a_frame_without_the_columns_is_named():
    with pytest.raises(StatekitError, match="tombstone"):
        compare(SHIPPED.drop(columns="tombstone"), SHIPPED, {0: 1})


# --- Kafka's cleaner-offset-checkpoint file ----------------------------------------------
def test_the_cleaner_checkpoint_file_is_read_and_bad_ones_are_named(tmp_path):
    text = "0\n3\nboard-counts-changelog 0 1180\nboard-counts-changelog 2 977\nother 0 5\n"
    assert parse_cleaner_checkpoint(text)[("board-counts-changelog", 2)] == 977
    (tmp_path / "cleaner-offset-checkpoint").write_text(text)
    assert cleaned_offsets(tmp_path, "board-counts-changelog") == {0: 1180, 2: 977}
    assert cleaned_offsets(tmp_path / "none", "x") == {}
    for bad, why in [("1\n0\n", "version"), ("0\nx\n", "number of entries"),
                     ("0\n2\nt 0 1\n", "says 2 entries and holds 1"),
                     ("0\n1\nt zero 1\n", "'t zero 1' is not")]:
        with pytest.raises(StatekitError, match=why):
            parse_cleaner_checkpoint(bad, "f")


# --- a real topic, cleaned by Apache Kafka's log cleaner -------------------------------------
@pytest.fixture(scope="module")
def finished(spark, broker, games, tmp_path_factory):
    return finished_checkpoint(spark, broker, games, tmp_path_factory.mktemp("cleaned"),
                               "cleaned")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_topic_cleaned_by_the_broker_holds_exactly_what_statekit_predicts(
        spark, broker, finished, tmp_path):
    state = state_copy(spark, finished, tmp_path)
    topic = "cleaned-aggregate-changelog"
    last = state.batch_range()[1]
    writer = ChangelogWriter(state, broker, topic, topic_config={  # the cleaner at its pace
        "delete.retention.ms": "1000", "min.compaction.lag.ms": "0"})
    # the last batches evict windows behind the watermark (tombstones): three rounds, each
    # followed by a cleaning pass; the passes after the first drop its expired tombstones
    rounds = [last - 3, last - 1, last]
    passes, reads = [], []
    for i, through in enumerate(rounds):
        if i:
            time.sleep(1.2)  # past delete.retention.ms and segment.ms: the round rolls a segment
        assert writer.ship(through=through) == through  # dirty records: another pass
        # read before the cleaner can drop what the round wrote (a tombstone goes only at a
        # pass after delete.retention.ms from the pass that first saw it)
        reads.append(read_changelog(broker, topic, progress=False))
        before = passes[-1] if passes else {}

        def cleaned_again(before=before):
            done = broker.cleaned_offsets(topic)
            return len(done) == 3 and all(done[p] > before.get(p, -1) for p in done) and done

        passes.append(wait_for(cleaned_again, 90, f"cleaning pass {i + 1}", every=0.5))
    first = passes[0]
    shipped = reads[-1].with_records(pd.concat([r.records for r in reads]).drop_duplicates(
        ["partition", "offset"]).sort_values(["partition", "offset"]))
    check = wait_for(lambda: (c := check_broker(broker, shipped, broker)).agrees and
                  c.cleaned_to == broker.cleaned_offsets(topic) and c, 30, "a settled read",
                     every=0.5)
    assert check.cleaned_known and check.agrees
    waiting = check.tombstones_waiting
    assert len(check.kept) == len(check.predicted) + len(waiting) < len(check.shipped)
    shipped_part = check.shipped["partition"]
    early = check.shipped[check.shipped["offset"] < shipped_part.map(first)]
    assert early["tombstone"].sum() > 0  # windows evicted behind the watermark, early on
    kept, part = check.kept, check.kept["partition"]
    # Kafka drops a tombstone at the first pass after delete.retention.ms from the pass that
    # first cleaned it: those of the first pass's range are gone, later ones may wait
    assert not kept[kept["offset"] < part.map(first)]["tombstone"].any()
    assert (waiting["offset"] >= waiting["partition"].map(first)).all()
    cleaned = kept[kept["offset"] < part.map(check.cleaned_to)]
    assert not cleaned.duplicated(["partition", "key"]).any()  # one record per key

    # a pass that lands between the two reads: the cleaner's record read before the log
    # says less than the log shows; check_broker reads both again until they agree
    class RecordBehindThePass:
        def __init__(self):
            self.calls = 0

        def cleaned_offsets(self, name):
            self.calls += 1
            return {} if self.calls == 1 else broker.cleaned_offsets(name)

    def read_behind_a_pass():
        lagging = RecordBehindThePass()
        again = check_broker(broker, shipped, lagging)
        return lagging.calls >= 3 and again.agrees and again  # (a later pass may go on)

    again = wait_for(read_behind_a_pass, 30, "a settled read behind a pass", every=0.5)
    assert again.cleaned_known and sorted(again.cleaned_to) == [0, 1, 2]
