"""What a network hop costs a point query: the same keys read from a local store in this
process, and through the routing client's REST call to their owner.

Kafka Streams' interactive queries answer a key from the local store when this instance
holds its partition, and over the application's own RPC (REST) to the owner otherwise.
``point_read_latencies`` times both for keys whose partitions ``stores`` hold (e.g. a
``restore_stores(...)`` of some partitions): ``store.get_raw`` of the key's store bytes, as a
serving instance reads it, and ``client.get(key)``.

Example:
    >>> times = point_read_latencies(client, restored.stores, keys)      # doctest: +SKIP
    >>> times.groupby("kind")["seconds"].median()                        # doctest: +SKIP
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from statekit._lazy import pd
from statekit.errors import BadArgument
from statekit.validate import whole_number

LOCAL, REMOTE = "local get (in-process store)", "REST get (routed to the owner)"


def point_read_latencies(client, stores: Mapping[int, object], keys: Sequence[Mapping],
                         repeat: int = 3) -> pd.DataFrame:
    """Seconds of each point read, ``repeat`` times per key and path, for the ``keys`` whose
    partition ``stores`` hold (the others are left out).

    Columns: ``key`` (index in ``keys``), ``partition``, ``kind`` (``LOCAL`` or ``REMOTE``;
    ``statekit.charts.latency_chart`` draws the frame),
    ``seconds``, ``found`` (the read found the row). ``attrs["skipped"]``: keys left out.
    """
    repeat = whole_number(repeat, "repeat", minimum=1)
    if not stores:
        raise BadArgument("stores", dict(stores), "partition → local store of that partition "
                                                  "(e.g. restore_stores(...).stores)")
    codec, rows, skipped = client.codec, [], 0
    for index, key in enumerate(keys):
        full = codec.key(key)
        partition = codec.partition(full)
        store = stores.get(partition)
        if store is None:
            skipped += 1
            continue
        data = codec.store_key(full)
        for _ in range(repeat):
            started = time.perf_counter()
            found = store.get_raw(data)
            local = time.perf_counter() - started
            started = time.perf_counter()
            answer = client.get(key)
            remote = time.perf_counter() - started
            rows.append((index, partition, LOCAL, local, found is not None))
            rows.append((index, partition, REMOTE, remote, bool(answer.rows)))
    frame = pd.DataFrame(rows, columns=["key", "partition", "kind", "seconds", "found"])
    frame.attrs["skipped"] = skipped
    return frame
