"""Restore of a changelog into rocksdict at the speed of the log, against its raw limits.

Produces N changelog records (``bench.changelog.produce``: JSON keys and values,
statekit headers, tombstones) to a 3-partition topic on the embedded broker,
then, after one warm-up round, times per round (all in the same run):

- **raw consume**: a bare confluent-kafka consume of the whole topic by one
  consumer assigned to every partition, every record's key and value touched
  (the speed of the broker and client — the log's speed);
- **raw consume, one consumer per partition**: the same with a consumer per
  partition, each in a thread (the other way to read a topic concurrently);
- **raw write**: the same records written to a fresh rocksdict database with
  bare ``WriteBatch`` (50,000 a batch, WAL off — as the store does); skipped
  with ``--no-raw-write`` (it holds every record in memory);
- **restore**: ``restore_stores`` into fresh RocksDB window stores, as it runs by
  default (``consumers="auto"``: at 1,000,000 records, worker processes; the way
  it picked is printed) (consume, write batches, listener events, checkpoint files);
- **restore, processes**: ``restore_stores(consumers="processes")``: the
  partitions split among worker processes (one per partition, up to two per CPU),
  each partition read by a consumer of its own and written there (listener events
  sent back);
- **restore, consumer per partition**: ``restore_stores(consumers="per_partition")``:
  a consumer per partition, each in a thread of this interpreter (the default
  before worker processes);
- **restore, one consumer**: ``restore_stores(consumers="one")``: all partitions
  through one consumer, chunks split by partition on one thread;
- **restore, sequential**: ``restore_stores(partitions=[p])`` one partition
  after another (how it restored first).

Ratio = the default restore's rate / raw consume rate with a consumer per partition
(the bound the default restore reads at); **target ≥ 0.9**. Also printed: the same against one
consumer's raw consume, restore / min(raw consume, raw write) (the earlier target, ≥ 0.7),
the second (checkpointed) restore and a restore from the compacted copy, and the
1- and 5-minute load average (the machine is shared; ratios are what count).

    python -m bench.restore --records 1000000 --repeats 3
    python -m bench.restore --ten-million       # opt-in: 10,000,000 records
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import threading
from pathlib import Path

from bench.changelog import PARTITIONS, produce
from bench.common import embedded_kafka, median, print_table, timed, verdict, write_result
from bench.results import Figure, Run

TARGET = 0.9


def consume_all(bootstrap: str, topic: str, keep: bool = True
                ) -> list[tuple[bytes, bytes | None]] | int:
    """Every record's (key, value) consumed by one consumer of all partitions
    (or, with ``keep=False``, just how many: the values are touched, not kept)."""
    from statekit.kafka.clients import plain_consumer
    from statekit.kafka.offsets import consume_ranges, end_offsets

    consumer = plain_consumer(bootstrap)
    records: list[tuple[bytes, bytes | None]] = []
    n = 0
    try:
        ranges = end_offsets(consumer, topic, list(range(PARTITIONS)))
        for chunk in consume_ranges(consumer, topic, ranges, chunk=50_000):
            pairs = [(m.key(), m.value()) for m in chunk]
            if keep:
                records.extend(pairs)
            n += len(pairs)
    finally:
        consumer.close()
    return records if keep else n


def consume_per_partition(bootstrap: str, topic: str) -> int:
    """How many records a consumer per partition, each in a thread, read in all."""
    from statekit.kafka.clients import plain_consumer
    from statekit.kafka.offsets import consume_ranges, end_offsets

    counts = [0] * PARTITIONS
    failures: list[BaseException] = []

    def read(p: int) -> None:
        consumer = plain_consumer(bootstrap)
        try:
            ranges = end_offsets(consumer, topic, [p])
            for chunk in consume_ranges(consumer, topic, ranges, chunk=50_000):
                counts[p] += len([(m.key(), m.value()) for m in chunk])
        except BaseException as exc:   # re-raised in the main thread
            failures.append(exc)
        finally:
            consumer.close()

    _in_threads(read)
    if failures:
        raise failures[0]
    return sum(counts)


def _in_threads(fn) -> None:
    threads = [threading.Thread(target=fn, args=(p,)) for p in range(PARTITIONS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


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


def _restored(result) -> int:
    """How many records a restore wrote (its stores closed)."""
    with result:
        return int(result.report["records"].sum())


def restore_sequential(bootstrap: str, topic: str, spec, folder: Path) -> int:
    """``restore_stores`` one partition after another; how many records it wrote."""
    from statekit.restore import restore_stores

    return sum(_restored(restore_stores(bootstrap, topic, spec, folder, partitions=[p],
                                        progress=False)) for p in range(PARTITIONS))


def load_average() -> list[float]:
    """The 1-, 5- and 15-minute load average (empty where the OS has none)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m bench.restore", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--ten-million", action="store_true",
                        help="opt-in size: 10,000,000 records (implies --no-raw-write)")
    parser.add_argument("--keys", type=int, default=200_000, help="distinct windows")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-raw-write", action="store_true",
                        help="skip the raw WriteBatch baseline (it holds all records in memory)")
    args = parser.parse_args(argv)
    if args.ten_million:
        args.records, args.no_raw_write = 10_000_000, True
    if args.records < PARTITIONS or args.repeats < 1:
        parser.error(f"--records must be at least {PARTITIONS} and --repeats at least 1; "
                     f"got {args.records} and {args.repeats}")

    import statekit as sk
    from statekit.kafka import EmbeddedBroker
    from statekit.options.restore import auto_consumers
    from statekit.restore import compacted_copy, restore_stores

    spec = sk.QuerySpec(keys=["player"], window=sk.tumbling("59 minutes"),
                        aggregates=["count", "sum(score)", "max(score)"])
    work = Path(tempfile.mkdtemp(prefix="statekit-bench-restore-"))
    names = ["consume", "consume_per_partition", "restore", "restore_processes",
             "restore_per_partition", "restore_one_consumer", "restore_sequential"] + (
        [] if args.no_raw_write else ["write"])
    runs: dict[str, list[float]] = {k: [] for k in names}
    load_before = load_average()
    # one results file per size: the default 1M, and e.g. restore-10000000 for --ten-million
    started = Run("restore" if args.records == 1_000_000 else f"restore-{args.records}")
    try:
        with EmbeddedBroker() as broker:
            bootstrap, topic = broker.bootstrap_servers, "bench-restore-changelog"
            produce_s, written = timed(lambda: produce(bootstrap, topic, args.records,
                                                       args.keys, 50))
            for round_ in range(args.repeats + 1):  # round 0 warms up
                took: dict[str, float] = {}
                took["consume"], records = timed(
                    lambda: consume_all(bootstrap, topic, keep=not args.no_raw_write))
                consumed = records if isinstance(records, int) else len(records)
                if not args.no_raw_write:
                    took["write"], _ = timed(
                        lambda f=work / f"raw{round_}", r=records: raw_write(r, f))
                del records
                took["consume_per_partition"], per_part = timed(
                    lambda: consume_per_partition(bootstrap, topic))
                target = work / f"restore{round_}"
                took["restore"], result = timed(lambda t=target: restore_stores(
                    bootstrap, topic, spec, t, progress=False))
                restored = int(result.report["records"].sum())
                overlap = _overlap(result.report)
                result.close()
                took["restore_processes"], processes = timed(
                    lambda f=work / f"proc{round_}": _restored(restore_stores(
                        bootstrap, topic, spec, f, progress=False, consumers="processes")))
                took["restore_per_partition"], threads = timed(
                    lambda f=work / f"thr{round_}": _restored(restore_stores(
                        bootstrap, topic, spec, f, progress=False,
                        consumers="per_partition")))
                took["restore_one_consumer"], one = timed(
                    lambda f=work / f"one{round_}": _restored(restore_stores(
                        bootstrap, topic, spec, f, progress=False, consumers="one")))
                took["restore_sequential"], sequential = timed(
                    lambda f=work / f"seq{round_}": restore_sequential(bootstrap, topic,
                                                                       spec, f))
                counts = (consumed, per_part, restored, processes, threads, one, sequential,
                          written)
                assert len(set(counts)) == 1, counts
                for folder in work.glob(f"*{round_}"):
                    if folder != target:
                        shutil.rmtree(folder, ignore_errors=True)
                if round_:
                    for k, s in took.items():
                        runs[k].append(s)
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
    load_after = load_average()
    seconds = {k: median(v) for k, v in runs.items()}
    rates = {k: written / s for k, s in seconds.items()}
    ratio = rates["restore"] / rates["consume_per_partition"]
    default_mode = auto_consumers(written, PARTITIONS)
    limit = min(rates["consume"], rates.get("write", rates["consume"]))
    result = {"records": written, "repeats": args.repeats, "produce_s": produce_s,
              "seconds": seconds, "runs": runs, "rec_per_s": rates,
              "default_consumers": default_mode,
              "ratio_vs_raw_consume_per_partition": ratio, "target": TARGET,
              "processes_ratio_vs_raw_consume_per_partition":
                  rates["restore_processes"] / rates["consume_per_partition"],
              "per_partition_ratio_vs_raw_consume_per_partition":
                  rates["restore_per_partition"] / rates["consume_per_partition"],
              "processes_speedup_vs_per_partition":
                  seconds["restore_per_partition"] / seconds["restore_processes"],
              "ratio_vs_raw_consume_one_consumer": rates["restore"] / rates["consume"],
              "ratio_vs_slower_raw_step": rates["restore"] / limit,
              "speedup_vs_sequential": seconds["restore_sequential"] / seconds["restore"],
              "per_partition_speedup_vs_one_consumer":
                  seconds["restore_one_consumer"] / seconds["restore_per_partition"],
              "partition_overlap_s": overlap,
              "second_restore_s": again_s, "second_restore_records": again_records,
              "compacted_records": compacted_records, "compacted_restore_s": compacted_s,
              "load_average_before": load_before, "load_average_after": load_after}
    rows = [
        ("raw consume, one consumer", _fig(seconds, rates, "consume")),
        ("raw consume, consumer per partition", _fig(seconds, rates, "consume_per_partition")),
    ]
    if "write" in seconds:
        rows.append(("raw WriteBatch", _fig(seconds, rates, "write")))
    rows += [
        (f"restore_stores (default: auto → {default_mode})", _fig(seconds, rates, "restore")),
        ("restore_stores(consumers='processes')", _fig(seconds, rates, "restore_processes")),
        ("restore_stores(consumers='per_partition')",
         _fig(seconds, rates, "restore_per_partition")),
        ("restore_stores(consumers='one')", _fig(seconds, rates, "restore_one_consumer")),
        ("restore, partitions one after another", _fig(seconds, rates, "restore_sequential")),
        ("restore (default) / raw consume, consumer per partition",
         verdict(ratio, f"≥ {TARGET}", ratio >= TARGET)),
        ("  processes / raw consume, consumer per partition",
         f"{result['processes_ratio_vs_raw_consume_per_partition']:.2f}"),
        ("  threads (per_partition) / raw consume, consumer per partition",
         f"{result['per_partition_ratio_vs_raw_consume_per_partition']:.2f}"),
        ("processes vs threads (speed-up)",
         f"{result['processes_speedup_vs_per_partition']:.2f}×"),
        ("restore / raw consume, one consumer",
         f"{result['ratio_vs_raw_consume_one_consumer']:.2f}"),
        ("threads (per_partition) vs one consumer (speed-up)",
         f"{result['per_partition_speedup_vs_one_consumer']:.2f}×"),
        ("restore / slower raw step", f"{result['ratio_vs_slower_raw_step']:.2f}"),
        ("speed-up vs sequential", f"{result['speedup_vs_sequential']:.2f}×"),
        ("partitions' bars overlap (last round)", f"{overlap:.2f} s"),
        ("second restore (checkpointed)", f"{again_s:.2f} s, {again_records} records replayed"),
        ("restore from compacted copy", f"{compacted_s:.2f} s, {compacted_records:,} records"),
        ("load average before → after", f"{load_before} → {load_after} (2 cores, shared)"),
    ]
    print_table(f"restore of a {written:,}-record changelog into rocksdict", rows)
    write_result(started, figures_of(result), result, broker=embedded_kafka())
    return result


def figures_of(r: dict) -> list[Figure]:
    """The results file's figures: records/s (medians), restore against the raw consume."""
    rates = r["rec_per_s"]
    one, per_part = "raw consume, one consumer", "raw consume, a consumer per partition"
    out = [Figure(one, rates["consume"], "records/s"),
           Figure(per_part, rates["consume_per_partition"], "records/s")]
    if "write" in rates:
        out.append(Figure("raw rocksdict WriteBatch", rates["write"], "records/s"))
    out += [
        Figure("restore_stores (default)", rates["restore"], "records/s", baseline=per_part,
               ratio=r["ratio_vs_raw_consume_per_partition"], target=f"ratio >= {TARGET}"),
        Figure("restore_stores(consumers='processes')", rates["restore_processes"],
               "records/s", baseline=per_part,
               ratio=r["processes_ratio_vs_raw_consume_per_partition"]),
        Figure("restore_stores(consumers='per_partition')", rates["restore_per_partition"],
               "records/s", baseline=per_part,
               ratio=r["per_partition_ratio_vs_raw_consume_per_partition"]),
        Figure("restore_stores(consumers='one')", rates["restore_one_consumer"], "records/s",
               baseline=one, ratio=rates["restore_one_consumer"] / rates["consume"]),
        Figure("restore, partitions one after another", rates["restore_sequential"],
               "records/s", baseline=one, ratio=rates["restore_sequential"] / rates["consume"]),
        Figure("second restore (checkpointed)", r["second_restore_s"], "s"),
        Figure(f"restore of the compacted copy ({r['compacted_records']:,} records)",
               r["compacted_restore_s"], "s"),
    ]
    return out


def _fig(seconds: dict, rates: dict, key: str) -> str:
    return f"{seconds[key]:.2f} s  ({rates[key]:,.0f} rec/s)"


def _overlap(report) -> float:
    """Seconds during which every partition of a restore report was being restored."""
    if report.empty:
        return 0.0
    return max(0.0, (report["finished"].min() - report["started"].max()).total_seconds())


if __name__ == "__main__":
    main()
