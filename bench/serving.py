"""Interactive queries on an N-key store: point lookups, fetch, top-k and a full gather.

Builds a real checkpoint like ``bench.snapshot`` (one tumbling window, group key
``player``, ``count``, ``sum(score)``, ``max(score)``; N keys), ships its changes
to a changelog topic on the embedded broker with ``ChangelogWriter`` (which also
writes the ``-meta`` topic serving reads), then measures, each against a
baseline taken in the same run:

- point lookups (random existing keys, after a warm-up), p50 / p99:
  in process (``ServingInstance.get`` holding every partition, each answer checked and
  dropped as a service hands it on, and also with every answer kept; floor: the raw
  ``store.get_raw(bytes)`` under it), over REST on loopback (statekit's own
  keep-alive pool calling ``GET /stores/<store>/get`` on the key's owner in a
  3-instance ``serve()`` cluster; floor: ``GET /health`` on the same server; also
  urllib3, httpx and a bare ``http.client``, taking turns), and routed
  (``ServingClient.get`` on that cluster);
- a routed window ``fetch`` of one key over a 24-hour range (floor: the same
  ``fetch`` in process);
- the scatter-gather leaderboard ``top_k(window, 10, "sum_score")`` over the three
  instances against ``query.snapshot()`` + pandas ``nlargest`` (same answer);
- the whole latest state gathered from the instances into pandas (over REST:
  ``ServingClient.to_pandas()``, each owner's stores read in bulk and shipped as
  Arrow IPC, in parallel; in process: ``instance.table()`` and the row-shaped
  ``instance.all()``) against Spark's raw ``statestore`` read + ``toPandas()``.

    python -m bench.serving --keys 1000000
    python -m bench.serving --keys 20000 --lookups 2000      # a smoke run
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from bench.common import median, print_table, session, timed, verdict, write_result
from bench.results import Figure, Run
from bench.snapshot import build_checkpoint, raw_snapshot

TOPIC = "bench-serving-counts-changelog"
WINDOW_MS = 1_704_067_200_000  # BASE_TS (2024-01-01 00:00 UTC) in ms: the one window's start
WINDOW_ISO = "2024-01-01T00:00:00Z"
HOUR_MS = 3_600_000
TARGET_LOCAL_P99_US = 20.0
TARGET_REST_P99_MS = 2.0
TARGET_GATHER = 0.5


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def sample_keys(keys: int, n: int, seed: int) -> list[dict]:
    """``n`` random existing keys (players ``p<id>``, the one window's start in ms)."""
    import numpy as np

    ids = np.random.default_rng(seed).integers(0, keys, n)
    return [{"player": f"p{i}", "window_start": WINDOW_MS} for i in ids.tolist()]


def latencies(call: Callable[[object], object], args: Sequence, warmup: int,
              clock: Callable[[], int] = time.perf_counter_ns,
              found: Callable[[object], bool] | None = None) -> tuple[list[float], list]:
    """Seconds of each ``call(arg)`` (after ``warmup`` untimed calls) and the answers;
    ``clock`` = ``time.thread_time_ns`` counts only the CPU time of this thread.

    Given ``found``, each answer is checked with it as it comes and then dropped, as a
    service hands an answer on (the list returned holds the checks' results): keeping
    thousands of answers alive makes Python's cyclic garbage collector walk them during
    the lookups, a cost of the caller's list and not of the lookup.
    """
    for arg in args[:warmup]:
        call(arg)
    out, answers = [], []
    for arg in args:
        start = clock()
        answer = call(arg)
        out.append(clock() - start)
        answers.append(answer if found is None else found(answer))
    return [ns / 1e9 for ns in out], answers


def percentiles(seconds: list[float]) -> dict:
    import numpy as np

    values = np.asarray(seconds)
    return {"n": len(values), "p50_us": float(np.percentile(values, 50) * 1e6),
            "p90_us": float(np.percentile(values, 90) * 1e6),
            "p99_us": float(np.percentile(values, 99) * 1e6),
            "max_us": float(values.max() * 1e6), "mean_us": float(values.mean() * 1e6)}


def repeat(fn: Callable[[], object], repeats: int) -> tuple[list[float], object]:
    """One warm-up call, then ``repeats`` timed ones: (seconds each, last result)."""
    fn()
    runs, result = [], None
    for _ in range(repeats):
        seconds, result = timed(fn)
        runs.append(seconds)
    return runs, result


# --- point lookups -------------------------------------------------------------------------
def local_lookups(instance, keys: list[dict], warmup: int) -> dict:
    """``instance.get`` and, as its floor, the raw ``get_raw`` of the same keys' bytes."""
    codec = instance.codec
    raw_keys = []
    for key in keys:
        full = codec.key(key)
        raw_keys.append((instance.tail.store(codec.partition(full)), codec.store_key(full)))
    iso_keys = [{"player": k["player"], "window_start": WINDOW_ISO} for k in keys]
    figures = {}

    def has_row(answer) -> bool:
        return bool(answer.rows)

    for name, call, args, clock, check, keep in (
            ("raw_get_raw", lambda a: a[0].get_raw(a[1]), raw_keys, time.perf_counter_ns,
             lambda a: a is not None, False),
            ("instance_get", instance.get, keys, time.perf_counter_ns, has_row, False),
            ("instance_get_kept", instance.get, keys, time.perf_counter_ns, has_row, True),
            ("instance_get_cpu", instance.get, keys, time.thread_time_ns, has_row, False),
            ("instance_get_iso_key", instance.get, iso_keys, time.perf_counter_ns, has_row,
             False)):
        gc.collect()
        seconds, answers = latencies(call, args, warmup, clock, None if keep else check)
        found = sum(map(check, answers)) if keep else sum(answers)
        figures[name] = {**percentiles(seconds), "found": found}
        del answers
    figures.update(fast_path_turns(instance, keys))
    return figures


def fast_path_turns(instance, keys: list[dict], chunk: int = 100, passes: int = 5) -> dict:
    """``instance.get`` with its codec's one-pass key path (``KeyCodec._locate_plain``) on and
    off, taking turns ``chunk`` lookups each over ``passes`` passes of the keys, so a busy
    moment of the machine falls on both alike; each figure also carries the spread of its
    passes' p50 and p99 (``spread``), the run-to-run noise its gain is held against."""
    codec = instance.codec
    plain = codec._plain
    seconds: dict[str, list[list[float]]] = {"get_fast_path": [], "get_general_path": []}
    try:
        for _ in range(passes):
            for name in seconds:
                seconds[name].append([])
            for start in range(0, len(keys), chunk):
                for name, on in (("get_fast_path", True), ("get_general_path", False)):
                    codec._plain = plain and on
                    took, _ = latencies(instance.get, keys[start:start + chunk], 0,
                                        found=lambda a: bool(a.rows))
                    seconds[name][-1] += took
    finally:
        codec._plain = plain
    return {name: {**percentiles([s for one in runs for s in one]),
                   "spread": spread([percentiles(one) for one in runs])}
            for name, runs in seconds.items()}


def spread(parts: list[dict]) -> dict:
    """max − min over ``parts`` (percentiles of a run's passes) of p50 and p99, in µs.

    >>> spread([{"p50_us": 8.0, "p99_us": 12.0}, {"p50_us": 9.0, "p99_us": 15.0}])
    {'p50_us': 1.0, 'p99_us': 3.0}
    """
    return {k: max(p[k] for p in parts) - min(p[k] for p in parts) for k in ("p50_us", "p99_us")}


def rest_lookups(cluster, client, keys: list[dict], warmup: int, chunk: int = 100) -> dict:
    """``GET /stores/<store>/get`` on each key's owner through statekit's own keep-alive
    pool (``statekit.serve.transport``: the standard library's ``http.client``), its floor
    ``GET /health`` on the same owner, the same get with ``local=true``, from urllib3 (the
    pool statekit used before), from httpx and from a bare ``http.client`` connection, and
    ``ServingClient.get`` (routed in Python). The variants take turns, ``chunk`` lookups
    each, so that a busy moment of the machine falls on all of them alike."""
    import http.client
    import urllib.parse

    import httpx
    import urllib3

    from statekit.serve.transport import HttpPool

    owners = [cluster.urls[client.metadata_for_key(k).active] for k in keys]
    url = f"/stores/{client.store}/get"
    direct = [(f"{owner}{url}", {"key": json.dumps(k)}) for owner, k in zip(owners, keys,
                                                                             strict=True)]
    local = [(u, {**p, "local": "true"}) for u, p in direct]
    health = [(f"{owner}/health", None) for owner in owners]  # (url, params), as the gets
    conns = {o: http.client.HTTPConnection(*urllib.parse.urlsplit(o).netloc.split(":"),
                                           timeout=10.0) for o in set(owners)}
    stdlib = [(conns[o], f"{url}?{urllib.parse.urlencode(p)}") for o, (_, p) in zip(
        owners, direct, strict=True)]

    def stdlib_get(arg):
        conn, path = arg
        conn.request("GET", path)
        answer = conn.getresponse()
        return answer.status, answer.read()

    def httpx_get(arg):
        answer = http_client.get(arg[0], params=arg[1])
        return answer.status_code, answer.content

    def urllib3_get(arg):
        answer = manager.request("GET", arg[0], fields=arg[1])
        return answer.status, answer.data

    def pool_get(arg):
        answer = pool.get(*arg)
        return answer.status, answer.content

    def ok(answer) -> bool:
        return answer[0] == 200

    def hit(answer) -> bool:
        return answer[0] == 200 and bool(json.loads(answer[1])["rows"])

    pool = HttpPool(timeout=10.0)
    manager = urllib3.PoolManager(maxsize=32, retries=False, timeout=10.0)
    variants = (("rest_health", pool_get, health, ok),
                ("rest_get", pool_get, direct, hit),
                ("rest_get_local", pool_get, local, hit),
                ("rest_get_urllib3", urllib3_get, direct, hit),
                ("rest_get_httpx", httpx_get, direct, hit),
                ("rest_get_stdlib_client", stdlib_get, stdlib, hit),
                ("routed_get", client.get, keys, lambda a: bool(a.rows)))
    seconds: dict[str, list[float]] = {name: [] for name, *_ in variants}
    found = dict.fromkeys(seconds, 0)
    with httpx.Client(timeout=10.0) as http_client:
        for _, call, args, _ in variants:
            for arg in args[:warmup]:
                call(arg)
        for start in range(0, len(keys), chunk):
            for name, call, args, check in variants:
                took, checks = latencies(call, args[start:start + chunk], 0, found=check)
                seconds[name] += took
                found[name] += sum(checks)
    for conn in conns.values():
        conn.close()
    pool.close()
    manager.clear()
    return {name: {**percentiles(seconds[name]), "found": found[name],
                   "spread": spread(fifths(seconds[name]))} for name in seconds}


def fifths(seconds: list[float]) -> list[dict]:
    """Percentiles of each fifth of a variant's lookups (in the order taken: the variants
    took turns, so each fifth of one was measured beside the same fifth of the others)."""
    n = max(1, len(seconds) // 5)
    return [percentiles(seconds[i:i + n]) for i in range(0, n * 5, n) if seconds[i:i + n]]


def fetch_lookups(instance, client, keys: list[dict], warmup: int) -> dict:
    """A key's windows over 24 hours around the window (spread over the partitions)."""
    low, high = WINDOW_MS - 12 * HOUR_MS, WINDOW_MS + 12 * HOUR_MS
    groups = [{"player": k["player"]} for k in keys]
    figures = {}
    for name, call in (("instance_fetch", lambda g: instance.fetch(g, low, high)),
                       ("routed_fetch", lambda g: client.fetch(g, low, high))):
        seconds, answers = latencies(call, groups, warmup)
        figures[name] = {**percentiles(seconds), "found": sum(len(a.rows) for a in answers),
                         "partitions_read": median([len(a.partitions) for a in answers])}
    return figures


# --- leaderboard ---------------------------------------------------------------------------
def leaderboard(query, instance, client, repeats: int) -> dict:
    """Served ``top_k`` (scatter-gather, and in process) against snapshot + ``nlargest``."""
    def from_snapshot():
        frame = query.snapshot()
        window = frame[frame["window_start"] == frame["window_start"].max()]
        return window.nlargest(10, "sum_score")

    runs = {}
    runs["snapshot_nlargest"], expected = repeat(from_snapshot, repeats)
    runs["routed_top_k"], served = repeat(
        lambda: client.top_k(WINDOW_MS, 10, "sum_score"), repeats)
    runs["instance_top_k"], local = repeat(
        lambda: instance.top_k(WINDOW_MS, 10, "sum_score"), repeats)
    want = expected["sum_score"].tolist()
    return {"runs_s": runs, "median_s": {k: median(v) for k, v in runs.items()},
            "same_answer": [r["sum_score"] for r in served.rows] == want
            and [r["sum_score"] for r in local.rows] == want,
            "instances": sorted({p.instance for p in served.partitions})}


# --- the whole state -----------------------------------------------------------------------
def gather_figures(spark, query, client, instance, repeats: int) -> dict:
    """The latest state into pandas: from the three instances over REST (``client.table()``:
    each owner reads its stores in bulk and ships Arrow, in parallel), the same in process
    (``instance.table()``), the row-shaped ``instance.all()``, and Spark's raw read."""
    runs, rows = {}, {}
    for name, fn in (("statestore_to_pandas", lambda: raw_snapshot(spark, str(query.checkpoint))),
                     ("rest_gather_to_pandas", lambda: client.to_pandas()),
                     ("instance_table_to_pandas", lambda: instance.table().to_pandas()),
                     ("instance_all_to_pandas", lambda: instance.all().to_pandas())):
        runs[name], frame = repeat(fn, repeats)
        rows[name] = len(frame)
        del frame
        gc.collect()
    return {"runs_s": runs, "median_s": {k: median(v) for k, v in runs.items()}, "rows": rows}


# --- the run -------------------------------------------------------------------------------
@contextlib.contextmanager
def shipped_store(keys: int, topic: str, workdir: str | None, result: dict, prefix: str
                  ) -> Iterator[tuple]:
    """``bench.snapshot``'s ``keys``-key checkpoint, built by Spark and shipped to ``topic``
    on an embedded broker: yields (spark, work folder, query, broker); the build and ship
    times and the last batch shipped go to ``result``. The work folder (a temp one unless
    ``workdir`` is given) is removed after."""
    from statekit.changelog.writer import ChangelogWriter
    from statekit.kafka import EmbeddedBroker

    spark = session()
    work = Path(workdir or tempfile.mkdtemp(prefix=prefix))
    try:
        result["build_checkpoint_s"], query = timed(lambda: build_checkpoint(spark, work, keys))
        with EmbeddedBroker() as broker:
            # a round of 1,000,000 records may take more than 60 s on a busy machine
            writer = ChangelogWriter(query.reader, broker, topic, flush_timeout=600)
            result["ship_s"], result["shipped_batch"] = timed(writer.ship)
            writer.stop()
            yield spark, work, query, broker
    finally:
        if workdir is None:
            shutil.rmtree(work, ignore_errors=True)


def run(keys: int = 1_000_000, lookups: int = 5000, repeats: int = 3,
        workdir: str | None = None) -> dict:
    from statekit.serve import ServingInstance, serve

    started = time.perf_counter()
    run_ = Run("serving")
    measures_run = Run("serving_measures")  # issue 39 item 5's figures, a file of their own
    loads = {"start": load()}
    sample = sample_keys(keys, lookups, seed=7)
    warmup = min(500, lookups)
    result: dict = {"keys": keys, "lookups": lookups, "repeats": repeats}
    with shipped_store(keys, TOPIC, workdir, result, "statekit-bench-serving-") as (
            spark, work, query, broker):
        instance = ServingInstance("solo", broker, TOPIC, work / "solo")
        try:
            result["instance_restore_s"], _ = timed(
                lambda: instance.start().wait_ready(timeout=1800))
            first = instance.all(limit=1).rows[0]["window_start"]
            if not first.startswith(WINDOW_ISO[:-1]):
                raise RuntimeError(f"the store's window starts at {first}, not {WINDOW_ISO}")
            loads["lookups"] = load()
            gc.collect()
            result["point"] = local_lookups(instance, sample, warmup)
            t_cluster, cluster = timed(lambda: serve(
                broker, TOPIC, instances=3, standbys=1, workdir=work / "cluster",
                timeout=600).wait_ready(timeout=1800))
            result["cluster_restore_s"] = t_cluster
            with cluster:
                client = cluster.client(timeout=60.0)
                result["assignment"] = cluster.assignment.to_dict()
                loads["rest"] = load()
                rest_sample = sample[: max(1000, lookups // 2)]
                result["point"].update(rest_lookups(cluster, client, rest_sample,
                                                    min(200, warmup)))
                fetch_sample = sample[: max(500, lookups // 5)]
                result["fetch"] = fetch_lookups(instance, client, fetch_sample,
                                                min(100, warmup))
                loads["top_k"] = load()
                result["top_k"] = leaderboard(query, instance, client, repeats)
                loads["gather"] = load()
                result["gather"] = gather_figures(spark, query, client, instance, repeats)
                client.close()
        finally:
            instance.close()
    loads["end"] = load()
    result["load_average"] = loads
    result["wall_s"] = time.perf_counter() - started
    summarize(result)
    write_result(run_, figures_of(result), result)
    write_result(measures_run, measure_figures(result["point"]),
                 {"keys": keys, "lookups": lookups, "load_average": loads,
                  "point": {k: result["point"][k] for _, on, off, *_ in MEASURES
                            for k in (on, off)}})
    report(result)
    return result


def summarize(r: dict) -> None:
    point, top, gath = r["point"], r["top_k"]["median_s"], r["gather"]["median_s"]
    r["targets"] = {
        "instance_get_p99_us": {"value": point["instance_get"]["p99_us"],
                                "target": f"< {TARGET_LOCAL_P99_US:g} us",
                                "met": point["instance_get"]["p99_us"] < TARGET_LOCAL_P99_US},
        "rest_get_p99_ms": {"value": point["rest_get"]["p99_us"] / 1000,
                            "target": f"< {TARGET_REST_P99_MS:g} ms",
                            "met": point["rest_get"]["p99_us"] / 1000 < TARGET_REST_P99_MS},
        "gather_over_statestore": {
            "value": gath["rest_gather_to_pandas"] / gath["statestore_to_pandas"],
            "target": f"<= {TARGET_GATHER:g}",
            "met": gath["rest_gather_to_pandas"] / gath["statestore_to_pandas"]
            <= TARGET_GATHER},
    }
    r["ratios"] = {
        "top_k_snapshot_over_served": top["snapshot_nlargest"] / top["routed_top_k"],
        "top_k_snapshot_over_instance": top["snapshot_nlargest"] / top["instance_top_k"],
        "gather_instance_over_statestore": gath["instance_table_to_pandas"]
        / gath["statestore_to_pandas"],
        "gather_instance_all_over_statestore": gath["instance_all_to_pandas"]
        / gath["statestore_to_pandas"],
    }


def figures_of(r: dict) -> list[Figure]:
    """The results file's figures: p99 latencies against their floors, gather and top-k."""
    p, f = r["point"], r["fetch"]
    tk, gm = r["top_k"]["median_s"], r["gather"]["median_s"]
    raw, health = "store.get_raw p99 (floor)", "REST GET /health p99 (floor)"
    fetch, snap = "instance.fetch p99, in process (floor)", "snapshot() + nlargest(10)"
    statestore = "statestore + toPandas (baseline)"
    get, rest = p["instance_get"]["p99_us"], p["rest_get"]["p99_us"] / 1000
    return [
        Figure(raw, p["raw_get_raw"]["p99_us"], "µs"),
        Figure(f"instance.get p99, {r['keys']:,} keys", get, "µs", baseline=raw,
               ratio=get / p["raw_get_raw"]["p99_us"], target=f"value < {TARGET_LOCAL_P99_US:g}"),
        Figure("instance.get p50", p["instance_get"]["p50_us"], "µs"),
        Figure("instance.get p99, every answer kept", p["instance_get_kept"]["p99_us"], "µs"),
        Figure("instance.get p99, thread CPU time only", p["instance_get_cpu"]["p99_us"], "µs"),
        Figure("instance.get p99, ISO-text window start", p["instance_get_iso_key"]["p99_us"],
               "µs"),
        Figure(health, p["rest_health"]["p99_us"] / 1000, "ms"),
        Figure("REST GET .../get p99 on the owner", rest, "ms", baseline=health,
               ratio=p["rest_get"]["p99_us"] / p["rest_health"]["p99_us"],
               target=f"value < {TARGET_REST_P99_MS:g}"),
        Figure("REST GET .../get p50 on the owner", p["rest_get"]["p50_us"] / 1000, "ms"),
        *[Figure(f"REST GET .../get p99, {label}", p[key]["p99_us"] / 1000, "ms")
          for key, label in (("rest_get_local", "local=true"), ("rest_get_urllib3", "urllib3"),
                             ("rest_get_httpx", "httpx"),
                             ("rest_get_stdlib_client", "a bare http.client"))],
        Figure("routed ServingClient.get p99", p["routed_get"]["p99_us"] / 1000, "ms"),
        *measure_figures(p),
        Figure(fetch, f["instance_fetch"]["p99_us"] / 1000, "ms"),
        Figure("routed fetch p99, 24 h", f["routed_fetch"]["p99_us"] / 1000, "ms",
               baseline=fetch, ratio=f["routed_fetch"]["p99_us"] / f["instance_fetch"]["p99_us"]),
        Figure(snap, tk["snapshot_nlargest"], "s"),
        Figure("top_k(10) over 3 instances", tk["routed_top_k"], "s", baseline=snap,
               ratio=tk["routed_top_k"] / tk["snapshot_nlargest"]),
        Figure("instance.top_k(10) in process", tk["instance_top_k"], "s"),
        Figure(statestore, gm["statestore_to_pandas"], "s"),
        Figure("the whole state into pandas over REST", gm["rest_gather_to_pandas"], "s",
               baseline=statestore, ratio=r["targets"]["gather_over_statestore"]["value"],
               target=f"ratio <= {TARGET_GATHER:g}"),
        Figure("instance.table() in process", gm["instance_table_to_pandas"], "s",
               baseline=statestore, ratio=r["ratios"]["gather_instance_over_statestore"]),
        Figure("instance.all() (rows) in process", gm["instance_all_to_pandas"], "s",
               baseline=statestore, ratio=r["ratios"]["gather_instance_all_over_statestore"]),
    ]


#: issue 39 item 5: each speed measure of serving, on against off in the same run
MEASURES = (("the fast lookup path (KeyCodec._locate_plain), instance.get", "get_fast_path",
             "get_general_path", "µs", 1.0),
            ("statekit's own HTTP pool (serve.transport), REST get", "rest_get",
             "rest_get_urllib3", "ms", 1000.0))


def measure_figures(p: dict) -> list[Figure]:
    """Per measure: p50 and p99 with it on and off, the gain (off − on) and the spread of
    the on figures' passes (``spread``), for the "keep only what pays" table."""
    out = []
    for label, on, off, unit, scale in MEASURES:
        if on not in p or off not in p:
            continue
        for q in ("p50", "p99"):
            key = f"{q}_us"
            out += [Figure(f"{label} {q}, on", p[on][key] / scale, unit),
                    Figure(f"{label} {q}, off", p[off][key] / scale, unit),
                    Figure(f"{label} {q}, gain (off − on)", (p[off][key] - p[on][key]) / scale,
                           unit),
                    Figure(f"{label} {q}, spread of its passes (on / off)",
                           max(p[on]["spread"][key], p[off]["spread"][key]) / scale, unit)]
    return out


def _lat(f: dict, unit: str = "us") -> str:
    if unit == "ms":
        return f"p50 {f['p50_us'] / 1000:.2f} ms, p99 {f['p99_us'] / 1000:.2f} ms"
    return f"p50 {f['p50_us']:.1f} us, p99 {f['p99_us']:.1f} us"


def report(r: dict) -> None:
    p, t, g = r["point"], r["targets"], r["gather"]
    top, ratios = r["top_k"], r["ratios"]
    tk, gm = top["median_s"], g["median_s"]
    loads = r["load_average"]
    print_table(f"interactive queries on a {r['keys']:,}-key store "
                f"({r['lookups']:,} lookups; medians of {r['repeats']})", [
        ("load average (1, 5, 15 min)", f"start {loads['start']}, lookups "
                                        f"{loads.get('lookups')}, end {loads['end']}"),
        ("build checkpoint / ship changelog", f"{r['build_checkpoint_s']:.1f} s / "
                                              f"{r['ship_s']:.1f} s"),
        ("restore: 1 instance / 3-instance cluster", f"{r['instance_restore_s']:.1f} s / "
                                                     f"{r['cluster_restore_s']:.1f} s"),
        ("in process: instance.get", _lat(p["instance_get"]) + f"  (found "
                                                               f"{p['instance_get']['found']:,})"),
        ("  p99 target < 20 us", verdict(t["instance_get_p99_us"]["value"] / 20, "p99/20us < 1",
                                         t["instance_get_p99_us"]["met"])),
        ("  floor: store.get_raw(bytes)", _lat(p["raw_get_raw"])),
        ("  instance.get, thread CPU time only", _lat(p["instance_get_cpu"])),
        (f"  instance.get, all {r['lookups']:,} answers kept", _lat(p["instance_get_kept"])),
        ("  instance.get, ISO-text window_start", _lat(p["instance_get_iso_key"])),
        ("REST on loopback: GET .../get on owner", _lat(p["rest_get"], "ms")),
        ("  p99 target < 2 ms", verdict(t["rest_get_p99_ms"]["value"] / 2, "p99/2ms < 1",
                                        t["rest_get_p99_ms"]["met"])),
        ("  floor: GET /health, same server", _lat(p["rest_health"], "ms")),
        ("  GET .../get?local=true", _lat(p["rest_get_local"], "ms")),
        ("  GET .../get from urllib3", _lat(p["rest_get_urllib3"], "ms")),
        ("  GET .../get from httpx", _lat(p["rest_get_httpx"], "ms")),
        ("  GET .../get, a bare http.client", _lat(p["rest_get_stdlib_client"], "ms")),
        ("routed: ServingClient.get", _lat(p["routed_get"], "ms")),
        *[(f.name, f"{f.value:.3g} {f.unit}") for f in measure_figures(p)],
        ("routed fetch (24 h, 1 key)", _lat(r["fetch"]["routed_fetch"], "ms")
         + f", {r['fetch']['routed_fetch']['partitions_read']:g} partitions"),
        ("  floor: instance.fetch in process", _lat(r["fetch"]["instance_fetch"], "ms")),
        ("top_k(10, sum_score), 3 instances", f"{tk['routed_top_k']:.2f} s "
                                              f"(in process {tk['instance_top_k']:.2f} s)"),
        ("  snapshot() + nlargest", f"{tk['snapshot_nlargest']:.2f} s; ratio snapshot/served "
                                    f"{ratios['top_k_snapshot_over_served']:.2f}; same answer "
                                    f"{top['same_answer']}"),
        ("gather into pandas over REST", f"{gm['rest_gather_to_pandas']:.2f} s, "
                                         f"{g['rows']['rest_gather_to_pandas']:,} rows"),
        ("  baseline statestore + toPandas", f"{gm['statestore_to_pandas']:.2f} s, "
                                             f"{g['rows']['statestore_to_pandas']:,} rows"),
        ("  ratio REST gather / statestore", verdict(t["gather_over_statestore"]["value"],
                                                     "<= 0.5",
                                                     t["gather_over_statestore"]["met"])),
        ("  instance.table() in process", f"{gm['instance_table_to_pandas']:.2f} s, ratio "
                                          f"{ratios['gather_instance_over_statestore']:.2f}"),
        ("  instance.all() (rows) in process", f"{gm['instance_all_to_pandas']:.2f} s, ratio "
                                               f"{ratios['gather_instance_all_over_statestore']:.2f}"),
        ("wall time", f"{r['wall_s']:.0f} s"),
    ])


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m bench.serving", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keys", type=int, default=1_000_000, help="keys in the store")
    parser.add_argument("--lookups", type=int, default=5000,
                        help="timed point lookups in process (REST: half, fetch: a fifth)")
    parser.add_argument("--repeats", type=int, default=3,
                        help="timed top_k / gather / snapshot runs (median)")
    parser.add_argument("--workdir", help="keep input, checkpoint and stores here (default: temp)")
    args = parser.parse_args(argv)
    return run(args.keys, args.lookups, args.repeats, args.workdir)


if __name__ == "__main__":
    main()
