"""Exercises of notebook 09 (RocksDB in numbers: metrics, memory sizing, presets, the
micro-batch as record cache, compression, the state on disk)."""

from __future__ import annotations

from collections.abc import Mapping

from statekit.monitor.memory_sizing import RocksDBSizes
from statekit.spark.tuning import PREFIX, SPARK_DEFAULTS
from statekit.workshop.answers import mebibytes, number, one_of
from statekit.workshop.choices import Choices
from statekit.workshop.registry import exercise, review
from statekit.workshop.verdict import Point

NOTEBOOK = "09_rocksdb_tuning"


@exercise("09.1", "Predict, then run: gets per put under write_heavy", NOTEBOOK, "predict")
def gets_per_put(answer: object, *, measured: Mapping[str, float]):
    """``measured``: configuration → RocksDB gets per put (``compare_presets``)."""
    value = number(answer)
    if value is None:
        return [Point(False, f"{answer!r} is not a number")]
    want, default = measured["write_heavy"], measured["default"]
    if abs(value - want) <= 0.25:
        return [Point(True, f"{want:.2f}: the aggregation's own read of the key; Spark's row "
                            f"counting (trackTotalNumberOfRows, off in write_heavy) costs a "
                            f"get before every put, hence {default:.2f} with the defaults")]
    if abs(value - default) <= 0.25:
        return [Point(False, f"{default:.2f} is the defaults' figure; write_heavy sets "
                             f"trackTotalNumberOfRows=false, which drops the get Spark does "
                             f"before each put to count rows")]
    return [Point(False, f"{value:g} is not what ran: count one get for the aggregation to read "
                         f"the key's old value, plus one per put while rows are counted")]


#: Exercise 09.2's deployment.
PARTITIONS, OPERATORS = 8, 2


def memory_ceiling_mib(partitions: int = PARTITIONS, operators: int = OPERATORS,
                       conf: Mapping[str, str] | None = None) -> float:
    """What RocksDB memory can reach with unbounded memory: instances × (block cache + write
    buffers × their number), in MiB (indexes and filters come on top)."""
    sizes = RocksDBSizes.from_conf(conf)
    return partitions * operators * (sizes.block_cache_mb
                                     + sizes.write_buffer_mb * sizes.max_write_buffers)


@exercise("09.2", "Size it: the RocksDB memory ceiling of a deployment", NOTEBOOK, "build")
def memory_ceiling(answer: object):
    """``answer``: MiB that RocksDB may reach, 8 shuffle partitions × 2 stateful operators,
    Spark's defaults."""
    value = mebibytes(answer)
    if value is None:
        return [Point(False, f"{answer!r} is not a number of MiB")]
    want = memory_ceiling_mib()
    sizes = RocksDBSizes.from_conf(None)
    per = sizes.block_cache_mb + sizes.write_buffer_mb * sizes.max_write_buffers
    if abs(value - want) <= 1:
        return [Point(True, f"{want:,.0f} MiB: {PARTITIONS * OPERATORS} store instances "
                            f"(partitions × stateful operators) × ({sizes.block_cache_mb:g} MiB "
                            f"block cache + {sizes.write_buffer_mb:g} MiB × "
                            f"{sizes.max_write_buffers} write buffers)")]
    wrong = {
        PARTITIONS * per: "that is one operator's: every stateful operator has its own store "
                          "instance per partition",
        PARTITIONS * OPERATORS * (sizes.block_cache_mb + sizes.write_buffer_mb * 3):
            "three write buffers per store is the Kafka Streams rule of thumb; RocksDB under "
            "Spark keeps maxWriteBufferNumber = 2 by default",
        PARTITIONS * OPERATORS * sizes.block_cache_mb:
            "that counts the block caches only; each instance also has its memtables "
            "(write buffers)",
        PARTITIONS * OPERATORS * sizes.write_buffer_mb * sizes.max_write_buffers:
            "that counts the write buffers only; each instance also has its block cache "
            "(blockCacheSizeMB = 8)",
        500.0: "500 MiB is maxMemoryUsageMB, which applies only with boundedMemoryUsage=true",
    }
    for figure, why in wrong.items():
        if abs(value - figure) <= 1:
            return [Point(False, f"{value:,.0f} MiB: {why}")]
    return [Point(False, f"{value:,.0f} MiB is not it: instances = partitions × operators, "
                         f"each with a block cache and its write buffers")]


#: Exercise 09.3's budget, and the memtables' share of it.
BUDGET_MB, HALF = 128, 0.5


def _text(value: object) -> str:
    return str(value).strip().lower()


@exercise("09.3", "Tune RocksDB for a memory-constrained executor", NOTEBOOK, "build")
def memory_constrained(answer: object):
    """``answer``: Spark settings (dict) capping all of RocksDB at ``BUDGET_MB`` MB."""
    if not isinstance(answer, Mapping) or not answer:
        return [Point(False, "expected a dict of Spark settings, e.g. "
                             "{'spark.sql.streaming.stateStore.rocksdb.<name>': '<value>'}")]
    points = []
    known = {k.lower(): k for k in SPARK_DEFAULTS}
    others = {"spark.sql.streaming.stateStore.rocksdb.".lower() + n.lower() for n in (
        "formatVersion", "compactOnCommit", "lockAcquireTimeoutMs", "maxOpenFiles",
        "allowFAllocate", "resetStatsOnLoad", "changelogCheckpointing.enabled")}
    settings = {str(k).strip().lower(): v for k, v in answer.items()}
    for given in answer:
        name = str(given).strip().lower()
        if not name.startswith(PREFIX.lower()):
            points.append(Point(False, f"{given!r}: RocksDB options of Spark's state store are "
                                       f"set as {PREFIX}<name>"))
        elif name not in known and name not in others:
            points.append(Point(False, f"{given!r}: not a RocksDB setting of Spark's state "
                                       f"store (known: {', '.join(sorted(SPARK_DEFAULTS))})"))
    bounded = settings.get(f"{PREFIX}boundedMemoryUsage".lower())
    points.append(Point(_text(bounded) == "true",
                        "boundedMemoryUsage=true: one block cache and write buffer manager "
                        "shared by every store instance of the executor"
                        if _text(bounded) == "true" else
                        "without boundedMemoryUsage=true each store instance has its own "
                        "block cache and memtables, so memory grows with the partitions"))
    budget = settings.get(f"{PREFIX}maxMemoryUsageMB".lower())
    budget_ok = mebibytes(budget) == BUDGET_MB
    points.append(Point(budget_ok, f"maxMemoryUsageMB={BUDGET_MB}: the shared budget"
                        if budget_ok else
                        f"maxMemoryUsageMB must be {BUDGET_MB} (it is {budget!r}; Spark's "
                        f"default is 500)"))
    ratio_key = f"{PREFIX}writeBufferCacheRatio"
    ratio = settings.get(ratio_key.lower())
    default = number(SPARK_DEFAULTS[ratio_key])
    if ratio is None:
        points.append(Point(default == HALF, f"writeBufferCacheRatio left out: Spark's default "
                                             f"is {default:g}, so memtables may take half of "
                                             f"the budget, as asked (writing it out says so "
                                             f"to the next reader)"))
    else:
        share = number(ratio)
        if share == HALF:
            points.append(Point(True, f"writeBufferCacheRatio={ratio}: half of the budget for "
                                      f"the memtables (Spark's default is {default:g} too)"))
        elif share is not None and 0 < share < 1:
            points.append(Point(False, f"writeBufferCacheRatio={ratio}: {share:.0%} of the "
                                       f"budget for the memtables; the exercise asks for half "
                                       f"({HALF:g})"))
        else:
            points.append(Point(False, f"writeBufferCacheRatio={ratio!r} must be a fraction "
                                       f"between 0 and 1 (the memtables' share of the budget); "
                                       f"half is {HALF:g}"))
    return points


@exercise("09.4", "Predict, then run: changelog records per key per batch", NOTEBOOK, "predict")
def records_per_key(answer: object, *, measured: float, events_per_key: float):
    """``measured``: the highest changelog records per key in any batch (``summarize``);
    ``events_per_key``: events folded into each record at the biggest batch size."""
    value = number(answer)
    if value is None:
        return [Point(False, f"{answer!r} is not a number")]
    if abs(value - measured) < 1e-9:
        return [Point(True, f"{measured:g}: each key a batch touched is written once at its "
                            f"commit, however many events it got (up to {events_per_key:.1f} "
                            f"on average at the biggest batch size): the micro-batch plays "
                            f"the record cache's part")]
    if value > measured:
        return [Point(False, f"{value:g} would be a write per event; Spark aggregates the "
                             f"batch first and writes each key once (Kafka Streams needs its "
                             f"record cache for that; Spark has none)")]
    return [Point(False, f"{value:g}: every key the batch touched is written, once")]


RECORD_CACHE = Choices(
    {"a": "RocksDB's block cache (spark.sql.streaming.stateStore.rocksdb.blockCacheSizeMB)",
     "b": "the micro-batch: the batch is aggregated before the store is written, so each "
          "key it touched is written once; a longer trigger (a bigger batch) folds more "
          "events into one write",
     "c": "the memtables (writeBufferSizeMB): puts to the same key merge there",
     "d": "statestore.cache.max.bytes, which Spark reads like Kafka Streams"},
    right="b",
    why={"a": "the block cache keeps SST blocks for reads; it merges no writes",
         "b": "right: Spark has no record cache; one changelog record per key per micro-batch "
              "is what it writes",
         "c": "memtables hold every put until a flush; the writes already happened (and are "
              "in Spark's changelog file of the batch)",
         "d": "that is a Kafka Streams setting; Spark has no record cache and no such setting"})


review("09.5", "Review: what plays the record cache's part in Spark?", NOTEBOOK, RECORD_CACHE)


COMPACTION = Choices(
    {"a": "Kafka's log compaction of the changelog topic (cleanup.policy=compact)",
     "b": "RocksDB's LSM compaction: merging SST files of the store's local RocksDB instance, "
          "dropping overwritten and deleted keys",
     "c": "Spark writing a snapshot of the state so older delta files can go"},
    right="b",
    why={"a": "the broker compacts the topic statekit ships; Spark neither writes nor sees it",
         "b": "right: rocksdbCommitCompactLatency and compactOnCommit are RocksDB's own "
              "compaction, inside each store instance",
         "c": "that is Spark's snapshot (its maintenance thread uploads N.zip and removes old "
              "files), measured by the snapshot metrics, not the compaction ones"})


review("09.6", "Review: which compaction is rocksdbCommitCompactLatency?", NOTEBOOK, COMPACTION)


SIZING = Choices(
    {"a": "all of them: JVM heap, block cache, write buffers and OS page cache are the state "
          "store's",
     "b": "the block cache and the write buffers (with indexes and filters), once per store "
          "instance = shuffle partition × stateful operator, in native memory outside the "
          "JVM heap",
     "c": "the JVM heap only: Spark keeps RocksDB's data on the heap"},
    right="b",
    why={"a": "the heap is the executor's (spark.executor.memory), shared with all of Spark; "
              "the page cache is the OS's",
         "b": "right: those terms are RocksDB's, configured by "
              "spark.sql.streaming.stateStore.rocksdb.*; memoryUsedBytes measures them",
         "c": "RocksDB is native (off-heap): its memory is not in the JVM heap and not "
              "limited by it"})


review("09.7", "Review: which terms of the sizing rule are the state store's?", NOTEBOOK, SIZING)


#: Codec spellings a learner may use, each read with ``words``.
CODEC_NAMES = {"none": "none", "no compression": "none", "uncompressed": "none",
               "snappy": "snappy", "lz4": "lz4", "zstd": "zstd", "zstandard": "zstd"}


@exercise("09.8", "Predict, then run: the codec that keeps this state smallest", NOTEBOOK,
          "predict")
def smallest_codec(answer: object, *, sizes: Mapping[str, float]):
    """``sizes``: codec → SST bytes of the same rows (``compressed_sizes``)."""
    said = one_of(answer, CODEC_NAMES)
    if said is None:
        return [Point(False, f"{answer!r}: name one codec of {', '.join(sizes)}")]
    smallest = min(sizes, key=sizes.get)
    none = sizes.get("none") or max(sizes.values())
    if said == smallest:
        return [Point(True, f"{said}: {sizes[said]:,.0f} bytes, {sizes[said] / none:.0%} of "
                            f"uncompressed; it costs more CPU per block than lz4, Spark's "
                            f"default ({sizes.get('lz4', 0):,.0f} bytes here)")]
    if said == "none":
        return [Point(False, "no compression is the biggest: the rows repeat column names, "
                             "players and window times, which every codec shrinks")]
    return [Point(False, f"{said} keeps {sizes[said]:,.0f} bytes here; {smallest} keeps "
                         f"{sizes[smallest]:,.0f} (lz4 and snappy trade size for speed)")]


LOCAL_DISK = Choices(
    {"a": "the state: the query has to start again from the earliest offsets",
     "b": "nothing durable: the local RocksDB folders are working copies; the next batch of "
          "each partition loads its latest snapshot from the checkpoint and replays the "
          "delta files after it",
     "c": "the delta files (N.changelog) written since the last snapshot"},
    right="b",
    why={"a": "the state's durable copy is the checkpoint (state/<operator>/<partition>), not "
              "the executor's disk",
         "b": "right: as Kafka Streams rebuilds a lost state.dir from the changelog topic, "
              "Spark rebuilds a store instance's local folder from the checkpoint; it costs "
              "time (a restore), not data",
         "c": "delta files are written to the checkpoint at every commit, not kept on the "
              "executor"})


review("09.9", "Review: an executor's local state folders are wiped. What is lost?", NOTEBOOK,
       LOCAL_DISK)
