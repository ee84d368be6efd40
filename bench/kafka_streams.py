"""statekit on Spark against Kafka Streams itself, the same records, one run (issue 42 item 4).

Produces R game-like events (``bench.throughput.produce``: players ``p000``..``p999``, event
time 1 ms apart) to one 4-partition topic on the embedded broker, then, for one ``QuerySpec``
(count, sum and max of score per player per 1-minute tumbling window; a grace of a day so that
neither engine drops or evicts a window and both end with the same state):

1. **throughput**: the reference Kafka Streams application (``statekit.kafka_streams``: one
   instance with ``num.stream.threads=2``, the 2 threads Spark's ``local[2]`` has; its default
   10 MB record cache) from ``start`` until it has committed every input and repartition
   record, against ``start_query`` on Spark (``local[2]``, batches of ``--batch``, changelog
   on, as Kafka Streams logs its store) from ``start_query`` until drained and its changelog
   shipped. Records/s (wall) and records per CPU-second of the processes doing the work (the
   Kafka Streams JVM; Spark's JVM, its Python workers and this driver), from ``/proc``; the
   broker's CPU apart. Both stores are then compared row by row: they must be equal;
2. **restore** of that state from each engine's changelog: a Kafka Streams instance on an
   empty state directory restoring ``<app>-aggregate-changelog`` (timed by its
   ``StateRestoreListener``: ``KafkaStreamsApp.restores()``; also the wall from ``start``),
   against ``statekit.restore.restore_stores`` of the query's changelog into rocksdict;
3. **queries by key** on loopback, p50 and p99: ``GET /key?key=<player>&from=<w>&to=<w>`` on
   the Kafka Streams instance against ``GET /stores/<store>/get?key=...`` on a statekit
   ``serve()`` instance of the changelog, the same (player, window) sample, each over a
   keep-alive ``http.client`` connection of its own, in alternate rounds of 100;
4. **failover**: two instances and one standby on each engine, a key's active instance
   killed (SIGKILL), then the seconds until the key is answered again through the other
   instance, and (Kafka Streams) until its answer comes from an active store again.

    python -m bench.kafka_streams                       # 1,000,000 records
    python -m bench.kafka_streams --records 20000 --lookups 200 --no-write   # a smoke run

Kept whole: one run whose four parts use what the earlier ones made (the topic, the last
round's application id and both changelogs); split, each part would take the others' setup
as arguments it cannot check.
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import shutil
import tempfile
import time
import urllib.parse
from pathlib import Path
from typing import TYPE_CHECKING

from bench.common import (
    cpu_by_kind,
    cpu_snapshot,
    embedded_kafka,
    median,
    print_table,
    session,
    timed,
    write_result,
)
from bench.results import Figure, Run
from bench.serving import percentiles
from bench.throughput import BASE_MS, EVENT_SCHEMA, PLAYERS, produce
from statekit.restore.result import wall_seconds

if TYPE_CHECKING:
    import pandas as pd

TOPIC = "bench-kafka-streams-games"
APP_ID = "bench-kafka-streams"
WINDOW_MS = 60_000
STORE = "bench_ks"
#: neither engine evicts or drops a window: both end with the whole state
GRACE = "1 day"
#: the events are from 2024: keep their windowed changelog records (retention by timestamp)
KEEP = {"windowstore.changelog.additional.retention.ms": str(100 * 365 * 86_400_000)}
STREAM_THREADS = 2


def spec():
    import statekit as sk

    return sk.QuerySpec(keys=["player"], window=sk.tumbling("1 minute"),
                        aggregates=["count", "sum(score)", "max(score)"], watermark=GRACE)


def app_options(state_dir: Path, app_id: str):
    import statekit as sk

    return sk.kafka_streams.AppOptions(
        application_id=app_id, state_dir=state_dir,
        streams_config={**KEEP, "num.stream.threads": str(STREAM_THREADS)})


def cpu_of(pids: list[int]) -> float:
    """CPU seconds (user + system) the processes ``pids`` spent so far."""
    from statekit.processes import process_table

    table = process_table()
    return sum(table[p].cpu_s for p in pids if p in table)


def _broker_cpu(before: dict, after: dict) -> float:
    return cpu_by_kind(before, after).get("broker", 0.0)


# --- 1. throughput ---------------------------------------------------------------------------
def kafka_streams_throughput(broker, records: int, work: Path, app_id: str
                             ) -> tuple[dict, pd.DataFrame]:
    """Start the app (``app_id``) on the topic, time it until it consumed everything;
    (figures, its store), the app closed."""
    import statekit as sk

    before = cpu_snapshot()
    start = time.perf_counter()
    app = sk.kafka_streams.start(TOPIC, spec(), kafka=broker, instances=1, standbys=0,
                                 options=app_options(work / app_id, app_id))
    running = time.perf_counter() - start
    pids = [i.process.pid for i in app.instances]
    app.wait_until_consumed(timeout=1800)
    seconds = time.perf_counter() - start
    cpu = cpu_of(pids)
    broker_cpu = _broker_cpu(before, cpu_snapshot())
    with app:
        metrics = app.progress().iloc[0].to_dict()
        store = app.snapshot(sort=True)
    return {"seconds": seconds, "start_to_running_s": running,
            "records_per_s": records / seconds, "cpu_s": cpu,
            "records_per_cpu_s": records / cpu, "broker_cpu_s": broker_cpu,
            "process_total": metrics.get("process-total"),
            "commit_total": metrics.get("commit-total"),
            "changelog": app.changelog_topics()["aggregate"]}, store


def statekit_throughput(spark, broker, records: int, batch: int, work: Path, name: str
                        ) -> tuple[dict, pd.DataFrame]:
    """``start_query`` (``name``) on the topic until drained and its changelog shipped;
    (figures, its store), the query closed."""
    import statekit as sk

    before = cpu_snapshot()
    start = time.perf_counter()
    query = sk.start_query(TOPIC, spec(), spark=spark, kafka=broker,
                           event_schema=EVENT_SCHEMA, max_offsets_per_trigger=batch,
                           trigger="100 ms", name=name, store_name=STORE,
                           checkpoint=str(work / name), changelog=True)
    query.wait_until_drained(timeout=1800)
    drained = time.perf_counter() - start
    shipped = query.changelog.ship()
    seconds = time.perf_counter() - start
    after = cpu_snapshot()
    spent = cpu_by_kind(before, after)
    cpu = sum(v for k, v in spent.items() if k != "broker")
    frame = query.progress()
    busy = frame[frame["input_rows"] > 0]
    store = query.snapshot(sort=True)
    topic = query.changelog_topic
    query.close()
    return {"seconds": seconds, "drained_s": drained, "shipped_batch": shipped,
            "records_per_s": records / seconds, "cpu_s": cpu,
            "records_per_cpu_s": records / cpu, "cpu_by_kind": spent,
            "broker_cpu_s": spent.get("broker", 0.0), "batches": len(busy),
            "input_rows": int(frame["input_rows"].sum()), "changelog": topic}, store


def compare(ks_store: pd.DataFrame, spark_store: pd.DataFrame) -> dict:
    """Both stores, (player, window) by (player, window): how many rows, how many differ."""
    from statekit.reference.aggregates import rows_differing

    spark_rows = spark_store.drop(columns=["partition"], errors="ignore")
    ks_rows = ks_store.drop(columns=["partition"], errors="ignore")
    keys = spec().key_columns
    differ = rows_differing(ks_rows, spark_rows, keys)
    return {"spark_rows": len(spark_rows), "kafka_streams_rows": len(ks_rows),
            "differing_rows": len(differ),
            "spark_count_sum": int(spark_rows["count"].sum()),
            "kafka_streams_count_sum": int(ks_rows["count"].sum())}


# --- 2. restore ------------------------------------------------------------------------------
def kafka_streams_restore(broker, work: Path, app_id: str, folder: str) -> tuple[dict, object]:
    """A new instance of app ``app_id`` on an empty state directory (``work / folder``): it
    restores the store from the changelog; (figures, the app, running)."""
    import statekit as sk

    start = time.perf_counter()
    app = sk.kafka_streams.start(TOPIC, spec(), kafka=broker, instances=1, standbys=0,
                                 options=app_options(work / folder, app_id))
    rows = app.wait_until_restored(timeout=600, poll=0.02)
    wall = time.perf_counter() - start
    records = int(rows["records"].sum())
    # the listener's span: the first partition's onRestoreStart to the last onRestoreEnd
    span = wall_seconds(rows)
    partitions = rows.drop(columns=["instance", "started", "finished"]).to_dict("records")
    return {"records": records, "seconds": span, "wall_from_start_s": wall,
            "records_per_s": records / span, "partitions": partitions}, app


def statekit_restore(broker, topic: str, folder: Path) -> dict:
    """``restore_stores`` of the query's changelog into fresh stores in ``folder``."""
    from statekit.restore import restore_stores

    seconds, result = timed(lambda: restore_stores(broker, topic, spec(), folder,
                                                   progress=False))
    with result:
        records = int(result.report["records"].sum())
    return {"records": records, "seconds": seconds, "records_per_s": records / seconds}


# --- 3. queries by key -----------------------------------------------------------------------
def sample(n: int, windows: int, seed: int = 7) -> list[tuple[str, int]]:
    rng = random.Random(seed)
    return [(f"p{rng.randrange(PLAYERS):03d}", BASE_MS // WINDOW_MS * WINDOW_MS
             + rng.randrange(windows) * WINDOW_MS) for _ in range(n)]


def _connection(url: str) -> http.client.HTTPConnection:
    host, port = urllib.parse.urlsplit(url).netloc.split(":")
    return http.client.HTTPConnection(host, int(port), timeout=30)


def _getter(conn: http.client.HTTPConnection):
    def get(path: str) -> bytes:
        conn.request("GET", path)
        answer = conn.getresponse()
        body = answer.read()
        if answer.status != 200:
            raise RuntimeError(f"GET {path}: {answer.status} {body[:200]!r}")
        return body
    return get


def lookups(ks_url: str, sk_url: str, store: str, keys: list[tuple[str, int]],
            chunk: int = 100, warmup: int = 200) -> dict:
    """p50/p99 of a key query on each engine, alternating rounds of ``chunk``; every answer
    must hold one row, the same on both."""
    ks_get, sk_get = _getter(_connection(ks_url)), _getter(_connection(sk_url))
    ks_paths = [f"/key?{urllib.parse.urlencode({'key': p, 'from': w, 'to': w})}"
                for p, w in keys]
    sk_paths = [f"/stores/{store}/get?" + urllib.parse.urlencode(
        {"key": json.dumps({"player": p, "window_start": w})}) for p, w in keys]
    for path in ks_paths[:warmup]:
        ks_get(path)
    for path in sk_paths[:warmup]:
        sk_get(path)
    took: dict[str, list[float]] = {"kafka_streams": [], "statekit": []}
    same = 0
    for start in range(0, len(keys), chunk):
        answers = {}
        for name, get, paths in (("kafka_streams", ks_get, ks_paths),
                                 ("statekit", sk_get, sk_paths)):
            answers[name] = []
            for path in paths[start:start + chunk]:
                t0 = time.perf_counter_ns()
                body = get(path)
                took[name].append((time.perf_counter_ns() - t0) / 1e9)
                answers[name].append(body)
        for ks_body, sk_body in zip(answers["kafka_streams"], answers["statekit"], strict=True):
            ks_rows, sk_rows = json.loads(ks_body)["rows"], json.loads(sk_body)["rows"]
            if len(ks_rows) == 1 and len(sk_rows) == 1 \
                    and ks_rows[0]["count"] == sk_rows[0]["count"]:
                same += 1
    return {"kafka_streams": percentiles(took["kafka_streams"]),
            "statekit": percentiles(took["statekit"]), "same_answers": same,
            "lookups": len(keys)}


# --- 4. failover -----------------------------------------------------------------------------
def _until(fn, timeout: float = 120.0, every: float = 0.01):
    """Call ``fn`` until it returns a true value (exceptions count as not yet)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = fn()
            if value:
                return value
        except Exception:  # noqa: BLE001 - a dead or moving instance: ask again
            pass
        time.sleep(every)
    raise TimeoutError(f"not answered within {timeout:.0f} s")


def kafka_streams_failover(broker, work: Path, key: tuple[str, int], app_id: str) -> dict:
    import statekit as sk
    from statekit.kafka_streams.client import KafkaStreamsClient

    player, window = key
    app = sk.kafka_streams.start(TOPIC, spec(), kafka=broker, instances=2, standbys=1,
                                 options=app_options(work / "ks-failover", app_id))
    try:
        app.wait_until_consumed(timeout=600)
        first = app.client.get(player, via=0, from_ms=window, to_ms=window)
        active = next(i.index for i in app.instances if i.url.endswith(first["active"]))
        survivor = 1 - active
        # the survivor's standby holds the key (a standby's updates reach no restore listener)
        _until(lambda: app.client.call("/key", {"key": player, "from": str(window),
                                                "to": str(window), "local": "stale"},
                                       via=survivor)["rows"] == first["rows"], timeout=600)
        quick = KafkaStreamsClient([i.url for i in app.instances], timeout=5.0,
                                   rebalance_wait=0.0)
        start = time.perf_counter()
        app.kill(active)
        answer = _until(lambda: quick.get(player, via=survivor, from_ms=window, to_ms=window))
        answered = time.perf_counter() - start
        role = answer["role"]
        _until(lambda: quick.get(player, via=survivor, from_ms=window,
                                 to_ms=window)["role"] == "active", timeout=300)
        as_active = time.perf_counter() - start
        return {"answered_s": answered, "first_role": role, "active_again_s": as_active,
                "rows": answer["rows"] == first["rows"]}
    finally:
        app.close()


def statekit_failover(broker, topic: str, work: Path, key: tuple[str, int]) -> dict:
    from statekit.serve import serve

    player, window = key
    the_key = {"player": player, "window_start": window}
    with serve(broker, topic, instances=2, standbys=1, workdir=work / "sk-failover",
               timeout=600) as cluster:
        cluster.wait_ready(timeout=600)
        client = cluster.client(timeout=5.0)
        first = client.get(the_key).rows
        owner = client.metadata_for_key(the_key).active
        survivor = next(n for n in cluster.names if n != owner)
        get = _getter(_connection(cluster.urls[survivor]))
        path = f"/stores/{client.store}/get?" + urllib.parse.urlencode({"key": json.dumps(the_key)})
        start = time.perf_counter()
        cluster.kill(owner)
        body = _until(lambda: (lambda b: b if json.loads(b)["rows"] else None)(get(path)))
        answered = time.perf_counter() - start
        # the monitor's failover: the dead instance's partitions promoted on the survivor
        _until(lambda: owner not in cluster.assignment.active.values())
        as_active = time.perf_counter() - start
        client.close()
        return {"answered_s": answered, "active_again_s": as_active,
                "rows": json.loads(body)["rows"] == first}


# --- the run ---------------------------------------------------------------------------------
def _said(what: str, value: object) -> object:
    print(f"[bench.kafka_streams {time.strftime('%H:%M:%S')}] {what}: {value}", flush=True)
    return value


def _medians(rounds: list[dict], fields: tuple[str, ...]) -> dict:
    return {f: median([one[f] for one in rounds]) for f in fields}


def throughput_rounds(spark, broker, records: int, batch: int, work: Path, repeats: int
                      ) -> dict:
    """``repeats`` rounds, the engines' order alternating, each on a fresh application id and
    checkpoint; both stores compared in every round. Medians, and every round."""
    rounds = []
    for i in range(repeats):
        one, stores = {}, {}
        for engine in ("kafka_streams", "statekit")[::1 if i % 2 == 0 else -1]:
            if engine == "kafka_streams":
                one[engine], stores[engine] = kafka_streams_throughput(broker, records, work,
                                                                       f"{APP_ID}-{i}")
            else:
                one[engine], stores[engine] = statekit_throughput(spark, broker, records, batch,
                                                                  work, f"bench_ks{i}")
        one["equal"] = compare(stores["kafka_streams"], stores["statekit"])
        rounds.append(_said(f"throughput, round {i}", one))
    fields = ("seconds", "records_per_s", "cpu_s", "records_per_cpu_s", "broker_cpu_s")
    ks = [one["kafka_streams"] for one in rounds]
    sk = [one["statekit"] for one in rounds]
    kinds = sorted({k for one in sk for k in one["cpu_by_kind"]})
    return {"kafka_streams": {**_medians(ks, fields),
                              **_medians(ks, ("start_to_running_s",))},
            "statekit": {**_medians(sk, fields), **_medians(sk, ("drained_s",)),
                         "cpu_by_kind": {k: median([one["cpu_by_kind"].get(k, 0.0)
                                                    for one in sk]) for k in kinds}},
            "rounds": rounds}


def restore_rounds(broker, work: Path, app_id: str, topic: str, repeats: int
                   ) -> tuple[dict, object]:
    """``repeats`` restores on each engine, alternating; (medians and every round, the last
    Kafka Streams app, running)."""
    rounds, app = [], None
    for i in range(repeats):
        one = {"statekit": statekit_restore(broker, topic, work / f"sk-restore-{i}")}
        if app is not None:
            app.close()
        one["kafka_streams"], app = kafka_streams_restore(broker, work, app_id,
                                                          f"ks-restore-{i}")
        rounds.append(_said(f"restore, round {i}", {
            k: {f: v for f, v in one[k].items() if f != "partitions"} for k in one}))
        last = one
    fields = ("seconds", "records_per_s", "records")
    return {"statekit": _medians([r["statekit"] for r in rounds], fields),
            "kafka_streams": {**_medians([r["kafka_streams"] for r in rounds],
                                         (*fields, "wall_from_start_s")),
                              "partitions": last["kafka_streams"]["partitions"]},
            "rounds": rounds}, app


def run(records: int, batch: int, lookups_n: int, repeats: int = 3, write: bool = True,
        spark=None) -> dict:
    """Every part at ``records`` records; ``spark``: a session to use (default: the bench's
    own, ``bench.common.session``; a test passes the suite's, whose JVM has what the other
    tests need)."""
    from statekit.kafka import EmbeddedBroker
    from statekit.serve import serve

    started = Run("kafka_streams")
    wall = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="statekit-bench-ks-"))
    r: dict = {"records": records, "batch": batch, "partitions": 4, "repeats": repeats,
               "kafka_streams_setup": f"1 instance, num.stream.threads={STREAM_THREADS}, "
                                      "statestore cache 10 MB (default), commit 1 s",
               "spark_setup": f"local[2], shuffle partitions 4, batches of {batch:,}, "
                              "trigger 100 ms, changelog on"}
    windows = -(-records // WINDOW_MS)
    try:
        with EmbeddedBroker() as broker:
            r["produce_s"] = _said("produced", produce(broker.bootstrap_servers, TOPIC,
                                                       records))
            spark = spark or session()
            r["throughput"] = throughput_rounds(spark, broker, records, batch, work, repeats)
            r["equal"] = [one["equal"] for one in r["throughput"]["rounds"]]
            app_id = f"{APP_ID}-{repeats - 1}"
            sk_topic = r["throughput"]["rounds"][-1]["statekit"]["changelog"]
            r["restore"], ks = restore_rounds(broker, work, app_id, sk_topic, repeats)
            try:
                with serve(broker, sk_topic, instances=1, standbys=0,
                           workdir=work / "sk-serve", timeout=600) as cluster:
                    cluster.wait_ready(timeout=600)
                    client = cluster.client()
                    r["lookups"] = lookups(ks.instances[0].url, cluster.urls["i0"],
                                           client.store, sample(lookups_n, windows),
                                           warmup=min(200, lookups_n))
                    _said("lookups", r["lookups"])
            finally:
                ks.close()
            key = sample(1, windows, seed=11)[0]
            r["failover"] = {"kafka_streams": kafka_streams_failover(broker, work, key, app_id),
                             "statekit": statekit_failover(broker, sk_topic, work, key)}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    r["wall_s"] = time.perf_counter() - wall
    summarize(r)
    report(r)
    if write:
        write_result(started, figures_of(r), r, broker=embedded_kafka())
    return r


def summarize(r: dict) -> None:
    t, s, q, f = r["throughput"], r["restore"], r["lookups"], r["failover"]
    r["ratios"] = {
        "throughput_records_per_s": t["statekit"]["records_per_s"]
        / t["kafka_streams"]["records_per_s"],
        "throughput_records_per_cpu_s": t["statekit"]["records_per_cpu_s"]
        / t["kafka_streams"]["records_per_cpu_s"],
        "restore_records_per_s": s["statekit"]["records_per_s"]
        / s["kafka_streams"]["records_per_s"],
        "restore_seconds": s["kafka_streams"]["seconds"] / s["statekit"]["seconds"],
        "lookup_p99": q["kafka_streams"]["p99_us"] / q["statekit"]["p99_us"],
        "lookup_p50": q["kafka_streams"]["p50_us"] / q["statekit"]["p50_us"],
        "failover_answered": f["kafka_streams"]["answered_s"] / f["statekit"]["answered_s"],
        "failover_active": f["kafka_streams"]["active_again_s"]
        / f["statekit"]["active_again_s"],
    }


def figures_of(r: dict) -> list[Figure]:
    """The results file's figures; every ratio is statekit's speed over Kafka Streams' (> 1:
    statekit faster)."""
    t, s, q, f, x = r["throughput"], r["restore"], r["lookups"], r["failover"], r["ratios"]
    ks_t, ks_c = "Kafka Streams, records/s", "Kafka Streams, records per CPU-s"
    ks_r, ks_p99 = "Kafka Streams restore, records/s", "Kafka Streams GET /key p99"
    ks_p50, ks_f = "Kafka Streams GET /key p50", "Kafka Streams failover, key answered"
    ks_a = "Kafka Streams failover, key answered by an active store"
    return [
        Figure(ks_t, t["kafka_streams"]["records_per_s"], "records/s"),
        Figure("statekit on Spark, records/s", t["statekit"]["records_per_s"], "records/s",
               baseline=ks_t, ratio=x["throughput_records_per_s"]),
        Figure(ks_c, t["kafka_streams"]["records_per_cpu_s"], "records/CPU-s"),
        Figure("statekit on Spark, records per CPU-s", t["statekit"]["records_per_cpu_s"],
               "records/CPU-s", baseline=ks_c, ratio=x["throughput_records_per_cpu_s"]),
        Figure(ks_r, s["kafka_streams"]["records_per_s"], "records/s"),
        Figure("statekit restore_stores, records/s", s["statekit"]["records_per_s"],
               "records/s", baseline=ks_r, ratio=x["restore_records_per_s"],
               target="ratio >= 1.0"),
        Figure("Kafka Streams restore, seconds", s["kafka_streams"]["seconds"], "s"),
        Figure("statekit restore_stores, seconds", s["statekit"]["seconds"], "s",
               baseline="Kafka Streams restore, seconds", ratio=x["restore_seconds"],
               target="ratio >= 1.0"),
        Figure(ks_p99, q["kafka_streams"]["p99_us"] / 1000, "ms"),
        Figure("statekit REST get p99", q["statekit"]["p99_us"] / 1000, "ms", baseline=ks_p99,
               ratio=x["lookup_p99"], target="ratio >= 1.0"),
        Figure(ks_p50, q["kafka_streams"]["p50_us"] / 1000, "ms"),
        Figure("statekit REST get p50", q["statekit"]["p50_us"] / 1000, "ms", baseline=ks_p50,
               ratio=x["lookup_p50"]),
        Figure(ks_f, f["kafka_streams"]["answered_s"], "s"),
        Figure("statekit failover, key answered", f["statekit"]["answered_s"], "s",
               baseline=ks_f, ratio=x["failover_answered"]),
        Figure(ks_a, f["kafka_streams"]["active_again_s"], "s"),
        Figure("statekit failover, key answered by an active store",
               f["statekit"]["active_again_s"], "s", baseline=ks_a,
               ratio=x["failover_active"]),
    ]


def report(r: dict) -> None:
    t, s, q, f, e, x = (r["throughput"], r["restore"], r["lookups"], r["failover"],
                        r["equal"], r["ratios"])
    ks, sk = t["kafka_streams"], t["statekit"]
    print_table(f"statekit on Spark vs Kafka Streams, {r['records']:,} records", [
        ("throughput, Kafka Streams", f"{ks['seconds']:.1f} s ({ks['records_per_s']:,.0f} "
                                      f"rec/s), {ks['cpu_s']:.1f} CPU-s "
                                      f"({ks['records_per_cpu_s']:,.0f} rec/CPU-s)"),
        ("throughput, statekit", f"{sk['seconds']:.1f} s ({sk['records_per_s']:,.0f} rec/s), "
                                 f"{sk['cpu_s']:.1f} CPU-s ({sk['records_per_cpu_s']:,.0f} "
                                 f"rec/CPU-s) {sk['cpu_by_kind']}"),
        ("  ratios (statekit / KS)", f"{x['throughput_records_per_s']:.2f} wall, "
                                     f"{x['throughput_records_per_cpu_s']:.2f} per CPU-s"),
        ("same state", f"{sum(x['differing_rows'] for x in e)} rows differ over {len(e)} "
                       f"rounds; {e[-1]['spark_rows']:,} rows on Spark, "
                       f"{e[-1]['kafka_streams_rows']:,} in Kafka Streams"),
        ("restore, Kafka Streams", f"{s['kafka_streams']['records']:,} records in "
                                   f"{s['kafka_streams']['seconds']:.2f} s (listener), "
                                   f"{s['kafka_streams']['wall_from_start_s']:.2f} s from start"),
        ("restore, statekit", f"{s['statekit']['records']:,} records in "
                              f"{s['statekit']['seconds']:.2f} s"),
        ("  ratios (statekit / KS)", f"{x['restore_records_per_s']:.2f} records/s, "
                                     f"{x['restore_seconds']:.2f} by seconds"),
        ("GET by key, Kafka Streams", f"p50 {q['kafka_streams']['p50_us'] / 1000:.2f} ms, "
                                      f"p99 {q['kafka_streams']['p99_us'] / 1000:.2f} ms"),
        ("GET by key, statekit", f"p50 {q['statekit']['p50_us'] / 1000:.2f} ms, "
                                 f"p99 {q['statekit']['p99_us'] / 1000:.2f} ms"),
        ("  ratios (KS / statekit)", f"p99 {x['lookup_p99']:.2f}, p50 {x['lookup_p50']:.2f}, "
                                     f"{q['same_answers']}/{q['lookups']} answers equal"),
        ("failover, Kafka Streams", f"{f['kafka_streams']}"),
        ("failover, statekit", f"{f['statekit']}"),
        ("wall", f"{r['wall_s']:.0f} s"),
    ])


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m bench.kafka_streams", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=100_000, help="Spark's records per batch")
    parser.add_argument("--lookups", type=int, default=5000, help="key queries per engine")
    parser.add_argument("--repeats", type=int, default=3,
                        help="rounds of throughput and of restore (medians)")
    parser.add_argument("--no-write", action="store_true", help="print, write no results file")
    args = parser.parse_args(argv)
    if args.records < PLAYERS or args.lookups < 1 or args.repeats < 1:
        parser.error(f"--records must be at least {PLAYERS} (one event per player), --lookups "
                     f"and --repeats at least 1; got {args.records}, {args.lookups} and "
                     f"{args.repeats}")
    return run(args.records, args.batch, args.lookups, args.repeats, write=not args.no_write)


if __name__ == "__main__":
    main()
