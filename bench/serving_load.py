"""Serving under load: 200 lookups and 50 long waits in flight, and control answered meanwhile.

One serving instance (a process of ``serve()``, REST on loopback) holds every partition
of an N-key store, built and shipped as ``bench.serving`` does (Spark checkpoint,
``ChangelogWriter``). A load process keeps ``--lookups`` point lookups in flight
(``GET .../get`` of random existing keys, each sent again as soon as it is answered) and
``--waits`` long waits (``GET .../get?min_batch=<a batch never shipped>&timeout=<wait>``:
each answers 409 once its wait is up, and is sent again). Meanwhile this process times the
probes one after another on a connection of its own: ``GET /health``, ``GET /metadata``,
``POST /assignment`` (the instance's own assignment: nothing moves) and a routed
``GET .../all`` of the whole store. The same probes on the idle instance are the baseline.

Target (issue 17): each probe's p99 under 100 ms while the load runs. Before it, every
wait held one of the 40 threads of the framework's pool that every plain endpoint used:
50 waits made ``/metadata``, ``POST /assignment`` and ``/all`` wait for a wait to end.

    python -m bench.serving_load                     # 2,000 keys, 30 s of load
    python -m bench.serving_load --keys 2000 --seconds 60 --wait 10
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import re
import time
from dataclasses import dataclass

from bench.common import print_table, write_result
from bench.results import Figure, Run
from bench.serving import load, percentiles, sample_keys, shipped_store

TOPIC = "bench-serving-load-counts-changelog"
TARGET_P99_MS = 100.0
PROBES = ("health", "metadata", "assignment", "all")
#: the same control requests on the instance's control listener (its own port and loop)
CONTROL_PROBES = ("control health", "control metadata", "control assignment")


# --- the load (its own process: its event loop and GIL are not the probes') ----------------
@dataclass(frozen=True)
class LoadPlan:
    """The load: ``lookups`` gets of ``keys`` of ``store`` in flight, and ``waits`` gets
    parked up to ``wait`` s for batch ``missing_batch`` (not shipped), for ``seconds``."""

    store: str
    keys: list[dict]
    missing_batch: int
    lookups: int
    waits: int
    wait: float
    seconds: float


def _load(url: str, plan: LoadPlan, out) -> None:
    import asyncio

    asyncio.run(_load_async(url, plan, out))


async def _load_async(url: str, plan: LoadPlan, out) -> None:
    """The load on plain asyncio streams, one keep-alive connection per request in flight
    and the requests written beforehand: a generator far cheaper per request than the
    server it loads (httpx's async client spent more CPU per request than the server)."""
    import asyncio
    import random
    from urllib.parse import urlencode, urlsplit

    store, keys, missing_batch = plan.store, plan.keys, plan.missing_batch
    lookups, waits, wait, seconds = plan.lookups, plan.waits, plan.wait, plan.seconds
    where = urlsplit(url)
    texts = [json.dumps(key) for key in keys]

    def request(params: dict) -> bytes:
        return (f"GET /stores/{store}/get?{urlencode(params)} HTTP/1.1\r\n"
                f"Host: {where.netloc}\r\n\r\n").encode()

    gets = [request({"key": text}) for text in texts]
    parked = [request({"key": text, "min_batch": missing_batch, "timeout": wait})
              for text in texts]
    connections = [await asyncio.open_connection(where.hostname, where.port)
                   for _ in range(lookups + waits)]
    latencies, statuses, waited = [], {}, {}
    out.put("started")
    end = time.monotonic() + seconds

    async def lookup(n: int) -> None:
        reader, writer = connections[n]
        rng = random.Random(n)
        while time.monotonic() < end:
            started = time.perf_counter()
            status = await _exchange(reader, writer, rng.choice(gets))
            latencies.append(time.perf_counter() - started)
            statuses[status] = statuses.get(status, 0) + 1

    async def long_wait(n: int) -> None:
        reader, writer = connections[lookups + n]
        while time.monotonic() < end:
            status = await _exchange(reader, writer, parked[n % len(parked)])
            waited[status] = waited.get(status, 0) + 1

    await asyncio.gather(*(lookup(n) for n in range(lookups)),
                         *(long_wait(n) for n in range(waits)))
    for _, writer in connections:
        writer.close()
    out.put({"lookups": len(latencies), "lookups_per_s": len(latencies) / seconds,
             "lookup_latency": percentiles(latencies) if latencies else {},
             "lookup_statuses": statuses, "wait_statuses": waited})


async def _exchange(reader, writer, request: bytes) -> int:
    """Send one request on a kept-alive connection and read its whole answer: its status."""
    writer.write(request)
    head = await reader.readuntil(b"\r\n\r\n")
    length = re.search(rb"(?i)\r\ncontent-length: *([0-9]+)", head)
    await reader.readexactly(int(length.group(1)) if length else 0)
    return int(head[9:12])


# --- the probes ------------------------------------------------------------------------------
def probe(pool, url: str, store: str, assignment: dict, urls: dict, seconds: float,
          rows: int, control: str) -> dict:
    """Time each probe in turn for ``seconds``: p50 / p99 / max per probe (ms); the control
    requests both on the data listener ``url`` and on the control listener ``control``."""
    body = {"assignment": assignment, "urls": urls}
    calls = {
        "health": lambda: pool.get(f"{url}/health"),
        "metadata": lambda: pool.get(f"{url}/metadata"),
        "assignment": lambda: pool.post_json(f"{url}/assignment", body),
        "all": lambda: pool.get(f"{url}/stores/{store}/all"),
        "control health": lambda: pool.get(f"{control}/health"),
        "control metadata": lambda: pool.get(f"{control}/metadata"),
        "control assignment": lambda: pool.post_json(f"{control}/assignment", body),
    }
    times: dict[str, list[float]] = {name: [] for name in calls}
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for name, call in calls.items():
            started = time.perf_counter()
            reply = call()
            times[name].append(time.perf_counter() - started)
            if reply.status != 200:
                raise RuntimeError(f"{name} answered {reply.status}: {reply.text[:300]}")
            if name == "all" and len(reply.json()["rows"]) != rows:
                raise RuntimeError(f"/all answered {len(reply.json()['rows'])} rows, not {rows}")
        time.sleep(0.01)
    return {name: _ms(percentiles(values)) for name, values in times.items()}


def _ms(figures: dict) -> dict:
    return {"n": figures["n"], **{k.replace("_us", "_ms"): round(v / 1000, 3)
                                  for k, v in figures.items() if k.endswith("_us")}}


def under_load(pool, url: str, assignment: dict, urls: dict, rows: int, plan: LoadPlan,
               control: str) -> tuple[dict, dict]:
    """The probes' figures while a load process keeps ``plan.lookups`` and ``plan.waits``
    in flight, and the load's own figures."""
    store, seconds, wait = plan.store, plan.seconds, plan.wait
    context = multiprocessing.get_context("spawn")
    out = context.Queue()
    loader = context.Process(target=_load, args=(url, plan, out), daemon=True)
    loader.start()
    try:
        if out.get(timeout=300) != "started":
            raise RuntimeError("the load process did not start")
        settle = min(2.0, seconds / 10)  # every wait parked before the probes start
        time.sleep(settle)
        figures = probe(pool, url, store, assignment, urls, seconds - 2 * settle, rows,
                        control)
        return figures, out.get(timeout=seconds + wait + 300)
    finally:
        loader.join(timeout=60)
        if loader.is_alive():
            loader.kill()


# --- the run -----------------------------------------------------------------------------------
def run(keys: int = 2000, lookups: int = 200, waits: int = 50, wait: float = 10.0,
        seconds: float = 30.0, idle_seconds: float = 10.0, workdir: str | None = None) -> dict:
    from statekit.serve import serve
    from statekit.serve.transport import HttpPool

    started = time.perf_counter()
    run_ = Run("serving_load")
    loads = {"start": load()}
    result: dict = {"keys": keys, "lookups_in_flight": lookups, "waits_in_flight": waits,
                    "wait_s": wait, "load_s": seconds}
    with shipped_store(keys, TOPIC, workdir, result, "statekit-bench-serving-load-") as (
            _, work, _, broker):
        last = result["shipped_batch"]
        with serve(broker, TOPIC, instances=1, standbys=0, workdir=work / "serving",
                   timeout=600) as cluster:
            cluster.wait_ready(timeout=600)
            name = cluster.names[0]
            url, store = cluster.urls[name], cluster.client().store
            control = cluster.control_urls[name]
            assignment = cluster.assignment.to_dict()
            pool = HttpPool(timeout=120.0)
            probe(pool, url, store, assignment, cluster.urls, 2.0, keys, control)  # warm-up
            loads["idle"] = load()
            result["idle"] = probe(pool, url, store, assignment, cluster.urls,
                                   idle_seconds, keys, control)
            sample = sample_keys(keys, 5000, seed=11)
            for phase, parked in (("lookups", 0), ("loaded", waits)):
                loads[phase] = load()
                result[phase], result[f"{phase}_load"] = under_load(
                    pool, url, assignment, cluster.urls, keys,
                    LoadPlan(store, sample, last + 1, lookups, parked, wait, seconds), control)
            pool.close()
    loads["end"] = load()
    result["load_average"] = loads
    result["met"] = all(result["loaded"][name]["p99_ms"] < TARGET_P99_MS for name in PROBES)
    result["control_met"] = all(result["loaded"][name]["p99_ms"] < TARGET_P99_MS
                                for name in CONTROL_PROBES)
    result["wall_s"] = time.perf_counter() - started
    write_result(run_, figures_of(result), result)
    report(result)
    return result


def figures_of(r: dict) -> list[Figure]:
    """The results file's figures: each probe's p99 with the waits against the lookups alone."""
    out = []
    for name in (*PROBES, *CONTROL_PROBES):
        alone, loaded = r["lookups"][name]["p99_ms"], r["loaded"][name]["p99_ms"]
        base = f"{name} p99, {r['lookups_in_flight']} lookups in flight"
        out += [Figure(base, alone, "ms"),
                Figure(f"{name} p99, + {r['waits_in_flight']} waits", loaded, "ms",
                       baseline=base, ratio=loaded / alone, target=f"value < {TARGET_P99_MS:g}")]
    for phase, label in (("lookups", "alone"), ("loaded", "with the waits")):
        out.append(Figure(f"lookups served, {label}", r[f"{phase}_load"]["lookups_per_s"],
                          "lookups/s"))
    return out


def report(r: dict) -> None:
    rows = [("store, load", f"{r['keys']:,} keys; {r['lookups_in_flight']} lookups, then "
                            f"the same and {r['waits_in_flight']} waits of {r['wait_s']:.0f} s, "
                            f"in flight for {r['load_s']:.0f} s each")]
    for name in (*PROBES, *CONTROL_PROBES):
        idle, alone, loaded = r["idle"][name], r["lookups"][name], r["loaded"][name]
        rows.append((f"{name} (ms): idle / lookups / +waits",
                     f"p50 {idle['p50_ms']:.1f} / {alone['p50_ms']:.1f} / "
                     f"{loaded['p50_ms']:.1f}, p99 {idle['p99_ms']:.1f} / {alone['p99_ms']:.1f} "
                     f"/ {loaded['p99_ms']:.1f} (n {loaded['n']}); +waits / lookups p99 "
                     f"{loaded['p99_ms'] / alone['p99_ms']:.2f}"))
    for phase in ("lookups", "loaded"):
        load_ = r[f"{phase}_load"]
        latency = load_["lookup_latency"]
        rows.append((f"lookups ({'with waits' if phase == 'loaded' else 'alone'})",
                     f"{load_['lookups']:,} ({load_['lookups_per_s']:,.0f}/s), p50 "
                     f"{latency['p50_us'] / 1000:.1f} ms, p99 {latency['p99_us'] / 1000:.1f} ms;"
                     f" statuses {load_['lookup_statuses']}, waits {load_['wait_statuses']}"))
    rows.append(("target", f"every probe's p99 < {TARGET_P99_MS:.0f} ms loaded: "
                           f"{'met' if r['met'] else 'NOT met'} on the data listener; "
                           f"control requests on the control listener: "
                           f"{'met' if r['control_met'] else 'NOT met'}"))
    rows.append(("load average", json.dumps(r["load_average"])))
    print_table("serving under load (one instance)", rows)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m bench.serving_load", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keys", type=int, default=2000, help="keys in the store (/all "
                                                               "returns them all)")
    parser.add_argument("--lookups", type=int, default=200, help="lookups in flight")
    parser.add_argument("--waits", type=int, default=50, help="long waits in flight")
    parser.add_argument("--wait", type=float, default=10.0, help="seconds each wait waits")
    parser.add_argument("--seconds", type=float, default=30.0, help="seconds of load")
    parser.add_argument("--idle-seconds", type=float, default=10.0,
                        help="seconds of probes on the idle instance first")
    parser.add_argument("--workdir", help="keep the work files here")
    args = parser.parse_args(argv)
    return run(args.keys, args.lookups, args.waits, args.wait, args.seconds, args.idle_seconds,
               args.workdir)


if __name__ == "__main__":
    main()
