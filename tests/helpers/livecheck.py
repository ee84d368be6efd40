"""Checks shared by the tests of attached queries (test_live, test_live_kinds,
test_live_tws): a part's changelog replays to its snapshot, and a routed ``get`` of every key
answers its entry."""

from __future__ import annotations

import json

import pandas as pd

from statekit.errors import StatekitError
from statekit.model.changelog_record import decode_json, encode_json


def comparable(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """Rows as text in one order; times as UTC instants (the changelog's JSON keeps them as
    ISO text)."""
    out = frame[columns].copy()
    for column in columns:
        if "time" in str(out[column].dtype) or column.endswith(("ts", "start", "end")):
            out[column] = pd.to_datetime(out[column], utc=True).astype(str)
        else:
            out[column] = out[column].astype(str)
    return out.sort_values(columns, ignore_index=True)


def assert_replays_to_snapshot(live, part: str, batch: int) -> None:
    view = live.state(part)
    columns = view.key_columns + view.value_columns
    pd.testing.assert_frame_equal(comparable(live.replay(part, batch), columns),
                                  comparable(live.snapshot(part, batch), columns),
                                  obj=f"{part} at batch {batch}")


def expected_entries(snapshot: pd.DataFrame, shape) -> list[tuple[dict, dict, int]]:
    """(key, the entry a ``get`` of it answers in JSON's types, its partition) for every key
    of a part's snapshot: its row, or for a list-valued part the key's rows as a list
    (sorted: the order of a join key's rows does not matter)."""
    keys = list(shape.key_columns)
    if not shape.lists:
        columns = [*keys, *shape.value_columns]
        return [({c: row[c] for c in keys}, decode_json(encode_json(row, columns)),
                 row["partition"]) for row in snapshot.to_dict("records")]
    names = [name for name, _ in shape.list_columns]
    entries = []
    for _, rows in snapshot.groupby(keys, sort=False, dropna=False):
        first = rows.iloc[0].to_dict()
        key = {c: first[c] for c in keys}
        listed = sorted((decode_json(encode_json(r, names)) for r in rows.to_dict("records")),
                        key=json.dumps)
        entries.append((key, decode_json(encode_json(key, keys)) | {"rows": listed},
                        first["partition"]))
    return entries


def topic_bounds(live, part: str) -> str:
    """The part's changelog topic's offsets as the broker reports them: the log end and the
    last stable offset (a ``read_committed`` reader's end) of each partition."""
    from statekit.kafka.offsets import offset_bounds
    from statekit.kafka.topics import partition_count

    writer = live.changelogs[part]
    parts = list(range(partition_count(writer.kafka, writer.topic)))
    written = offset_bounds(writer.kafka, writer.topic, parts, committed=False)
    stable = offset_bounds(writer.kafka, writer.topic, parts, committed=True)
    return (f"{writer.topic!r} (log start, log end) per partition: {written}; last stable "
            f"offsets: { {p: hi for p, (_, hi) in stable.items()} }")


def assert_routed_gets_equal_snapshot(live, part: str, workdir, then=None,
                                      last: int | None = None) -> None:
    """Serve ``part`` on two instances; a routed ``get`` of every key of its snapshot (at
    batch ``last``, shipped; None: wait until the last committed is) answers the key's
    entry, from the partition Spark placed it in, and ``all`` answers every entry; then
    ``then(client)``, while it still serves, if given."""
    last = live.wait_shipped(last)
    shape = live.part_shape(part)
    entries = expected_entries(live.snapshot(part, last), shape)
    assert entries, part
    with live.serve(part, instances=2, standbys=0, workdir=workdir) as cluster:
        client = cluster.client()
        answered = set()
        for key, entry, partition in entries:
            try:
                answer = client.get(key, min_batch=last, timeout=30)
            except StatekitError as exc:  # say where the topic stood, for the next reader
                raise AssertionError(f"{exc}; {topic_bounds(live, part)}") from exc
            got = answer.rows
            if shape.lists:
                got = [r | {"rows": sorted(r["rows"], key=json.dumps)} for r in got]
            assert got == [entry], (part, key)
            [where] = answer.partitions
            assert where.partition == partition and where.batch >= last, (part, key, where)
            answered.add(where.instance)
        assert len(answered) == 2, part   # each instance owns some of the keys
        missing = key | {shape.key_columns[-1]: None}
        assert client.get(missing).rows == []
        assert len(client.all(min_batch=last).rows) == len(entries)
        if then is not None:
            then(client)
