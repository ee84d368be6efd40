"""Restore of a 1,000,000-record changelog into rocksdict, against its two raw limits.

Produces N changelog records (``bench.changelog.produce``: JSON keys and values,
statekit headers, tombstones) to a 3-partition topic on the embedded broker,
then, after one warm-up round, times per round:

- **raw consume**: a bare confluent-kafka consume of the whole topic, every
  record's key and value touched (the speed of the broker and client);
- **raw write**: the same records (held in memory) written to a fresh rocksdict
  database with bare ``WriteBatch`` (50,000 a batch, WAL off — as the store
  does; the changelog is the durable copy);
- **restore**: ``restore_stores`` into fresh RocksDB window stores (consume,
  write batches, listener events, checkpoint file).

Ratio = restore rate / min(raw consume rate, raw write rate); **target ≥ 0.7**.
Also prints the second, checkpointed restore (nothing new: nothing replayed) and
a restore from the compacted copy.

    python -m bench.restore --records 1000000 --repeats 3
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from bench.changelog import PARTITIONS, produce
from bench.common import median, print_table, timed, verdict, write_result


def consume_all(bootstrap: str, topic: str) -> list[tuple[bytes, bytes | None]]:
    """Every record's (key, value), consumed with the bare client."""
    from statekit.kafka.topics import consume_ranges, end_offsets, plain_consumer

    consumer = plain_consumer(bootstrap)
    records: list[tuple[bytes, bytes | None]] = []
    try:
        ranges = end_offsets(consumer, topic, list(range(PARTITIONS)))
        for chunk in consume_ranges(consumer, topic, ranges):
            records.extend([(m.key(), m.value()) for m in chunk])
    finally:
        consumer.close()
    return records


def raw_write(records: list, folder: Path, batch_size: int = 50_000) -> int:
    """Bare rocksdict WriteBatch of ``records`` into a fresh database."""
    from rocksdict import Options, Rdict, WriteBatch, WriteOptions

    options = Options(raw_mode=True)
    options.create_if_missing(True)
    db = Rdict(str(folder), options)
    write_options = WriteOptions()
    write_options.disable_wal = True
    try:
        for start in range(0, len(records), batch_size):
            batch = WriteBatch(raw_mode=True)
            for key, value in records[start:start + batch_size]:
                if value is None:
                    batch.delete(key)
                else:
                    batch.put(key, value)
            db.write(batch, write_options)
        db.flush()
    finally:
        db.close()
    return len(records)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m bench.restore", description=__doc__)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=200_000, help="distinct windows")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)

    import statekit as sk
    from statekit.kafka import EmbeddedBroker
    from statekit.restore import compacted_copy, restore_stores

    spec = sk.QuerySpec(keys=["player"], window=sk.tumbling("59 minutes"),
                        aggregates=["count", "sum(score)", "max(score)"])
    work = Path(tempfile.mkdtemp(prefix="statekit-bench-restore-"))
    runs: dict[str, list[float]] = {"consume": [], "write": [], "restore": []}
    try:
        with EmbeddedBroker() as broker:
            bootstrap, topic = broker.bootstrap_servers, "bench-restore-changelog"
            written = produce(bootstrap, topic, args.records, args.keys, 50)
            for round_ in range(args.repeats + 1):  # round 0 warms up
                consume_s, records = timed(lambda: consume_all(bootstrap, topic))
                folder = work / f"raw{round_}"
                write_s, _ = timed(lambda f=folder, r=records: raw_write(r, f))
                target = work / f"restore{round_}"
                restore_s, result = timed(lambda t=target: restore_stores(
                    bootstrap, topic, spec, t, progress=False))
                restored = int(result.report["records"].sum())
                assert len(records) == restored == written, (len(records), restored, written)
                result.close()
                if round_:
                    runs["consume"].append(consume_s)
                    runs["write"].append(write_s)
                    runs["restore"].append(restore_s)
                del records
            again_s, again = timed(lambda: restore_stores(bootstrap, topic, spec, target,
                                                          progress=False))
            again_records = int(again.report["records"].sum())
            again.close()
            copy_s, copy = timed(lambda: compacted_copy(bootstrap, topic, progress=False))
            compacted_s, compacted = timed(lambda: restore_stores(
                bootstrap, copy, spec, work / "compacted", store_name="bench-restore",
                progress=False))
            compacted_records = int(compacted.report["records"].sum())
            compacted.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    seconds = {k: median(v) for k, v in runs.items()}
    rates = {k: written / s for k, s in seconds.items()}
    limit = min(rates["consume"], rates["write"])
    ratio = rates["restore"] / limit
    result = {"records": written, "repeats": args.repeats, "seconds": seconds, "runs": runs,
              "rec_per_s": rates, "ratio": ratio, "target": 0.7,
              "second_restore_s": again_s, "second_restore_records": again_records,
              "compacted_records": compacted_records, "compacted_restore_s": compacted_s}
    print_table(f"restore of a {written:,}-record changelog into rocksdict", [
        ("raw consume", f"{seconds['consume']:.2f} s  ({rates['consume']:,.0f} rec/s)"),
        ("raw WriteBatch", f"{seconds['write']:.2f} s  ({rates['write']:,.0f} rec/s)"),
        ("restore_stores", f"{seconds['restore']:.2f} s  ({rates['restore']:,.0f} rec/s)"),
        ("ratio vs the slower raw step", verdict(ratio, "≥ 0.7", ratio >= 0.7)),
        ("second restore (checkpointed)", f"{again_s:.2f} s, {again_records} records replayed"),
        ("restore from compacted copy", f"{compacted_s:.2f} s, {compacted_records:,} records"),
    ])
    write_result("restore", result)
    return result


if __name__ == "__main__":
    main()
