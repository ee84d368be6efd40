"""Cold start: a fresh Python process and session → the Kafka-fed query's first batch done.

A notebook user meets the cold case: the first query of a fresh kernel. Each run here is a
new Python process (``python -m bench.coldstart --child ...``), so the interpreter, the JVM,
Spark's Python workers and every import are really cold. The child builds statekit's session,
waits ``--pause`` seconds (the user reading the next cell; the same wait in every variant),
then starts the throughput benchmark's Kafka query (``start_query(topic, ...)``, batches of
``--batch``, no changelog) and times it until ``--records`` rows are in. Then, in the same
process, it runs the same query again on a fresh checkpoint: the **warm** figures, the
baseline of that run.

Variants (each a fresh process, alternated over ``--repeats`` rounds):

- ``zip``: ``spark_session(cached_worker_imports=False, class_archive=False)``: Spark's own
  layout, its Python processes import PySpark from ``pyspark.zip`` (what statekit did first);
- ``no_archive``: ``spark_session(class_archive=False)``: PySpark imported from site-packages
  by Spark's Python processes (see ``statekit.spark.session``), no class-data archive;
- ``default``: ``spark_session()``: the same, with the JVM class-data archive when one is
  built (``make jvm-classes``; ``archive_mapped`` in each run says whether it was) and the
  driver JVM's C1 compiler alone (``jit="quick"``);
- ``full_jit``: ``spark_session(jit="full")``: the default but with the JVM's own JIT tiers
  (C1, then C2), what statekit started before;
- ``no_early_workers``: ``spark_session(early_workers=False)``: the default but Spark's
  Python planner and read workers started by the first query, not in the background
  (``statekit.spark.early_workers``);
- ``connect_warm_server``: no JVM in the fresh process: it connects to a Spark Connect server
  (``statekit.spark.connect``) that the parent started before the runs and warmed with one
  discarded run, as a workshop's server would be; ``spark_session`` is then the Connect
  session's set-up.

(A ``warm_up`` variant measured ``spark_session(warm_up=True)``, a background warm-up
query; it gave nothing when the query starts at once and was removed from statekit.)

With ``--pause 0`` the query starts right after the session, as in a fresh notebook whose
person runs the cells straight through: ``process start → first batch done`` is then the
time to the first window result (issue 21's target: 6 s).

Figures per run: seconds from ``start_query`` to the first trigger and to the end of the
first batch with data, that batch's duration (progress ``triggerExecution``), records/s to
all rows, and the same for the warm run; ratio = cold / warm (1.0 = no cold penalty).

    python -m bench.coldstart --records 200000 --batch 50000 --repeats 3 --pause 20
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from bench.common import median, print_table, write_result
from bench.results import Figure, Run

VARIANTS = {"zip": {"cached_worker_imports": False, "class_archive": False},
            "no_archive": {"class_archive": False}, "default": {}, "full_jit": {"jit": "full"},
            "no_early_workers": {"early_workers": False},
            "connect_warm_server": {}}
CONNECT = "connect_warm_server"
FIRST_RESULT_TARGET_S = 6.0
TOPIC = "bench-coldstart"


# --- the child: one fresh process ------------------------------------------------------
def _batch_end(progress: dict) -> float:
    """Wall-clock end of a progress report's batch (its trigger start + its duration)."""
    start = datetime.fromisoformat(progress["timestamp"].replace("Z", "+00:00")).timestamp()
    return start + progress["durationMs"]["triggerExecution"] / 1000


def _stop(spark, query) -> None:
    from bench.throughput import _stop_quietly
    from statekit.spark.connect import is_connect

    if is_connect(spark):   # no SparkContext to quiet on a Connect client
        query.close()
    else:
        _stop_quietly(spark, query)


def _timed_query(spark, bootstrap: str, records: int, batch: int, work: Path, name: str
                 ) -> dict:
    """start_query(topic) until ``records`` rows are in: when its first batch started and ended."""
    import statekit as sk
    from bench.throughput import _query_args

    start = time.time()
    query = sk.start_query(TOPIC, max_offsets_per_trigger=batch,
                           **_query_args(spark, work, name, bootstrap, changelog=False))
    try:
        while sum(p.numInputRows for p in query.query.recentProgress) < records:
            if not query.is_active:
                raise RuntimeError(f"query {name!r} stopped: {query.query.exception()}")
            time.sleep(0.02)
        end = time.time()
        reports = [{"numInputRows": p.numInputRows, "timestamp": p.timestamp,   # classic or
                    "durationMs": dict(p.durationMs)}                      # Connect alike
                   for p in query.query.recentProgress]
    finally:
        _stop(spark, query)
    first = next(p for p in reports if p["numInputRows"] > 0)
    trigger = datetime.fromisoformat(first["timestamp"].replace("Z", "+00:00")).timestamp()
    return {"to_first_trigger_s": trigger - start, "to_first_batch_s": _batch_end(first) - start,
            "first_batch_s": first["durationMs"]["triggerExecution"] / 1000,
            "first_batch_ms": first["durationMs"], "seconds": end - start,
            "records_per_s": records / (end - start)}


def child(bootstrap: str, records: int, batch: int, pause: float, variant: str,
          born: float, connect_url: str | None = None) -> dict:
    """Run in a fresh process: session, pause, the cold query, the warm query."""
    entered = time.time()
    import statekit as sk

    imported = time.time()
    if variant == CONNECT:
        from statekit.spark.connect import connect_session

        spark = connect_session(connect_url)
        spark.conf.set("spark.sql.shuffle.partitions", "4")
    else:
        spark = sk.spark_session("local[2]", app_name="statekit-bench-coldstart",
                                 shuffle_partitions=4, **VARIANTS[variant])
    ready = time.time()
    mapped = variant != CONNECT and _archive_mapped()
    time.sleep(pause)
    work = Path(tempfile.mkdtemp(prefix="statekit-bench-coldstart-"))
    cold = _timed_query(spark, bootstrap, records, batch, work, "cold")
    warm = _timed_query(spark, bootstrap, records, batch, work, "warm")
    return {"variant": variant, "interpreter_s": entered - born, "import_s": imported - entered,
            "session_s": ready - imported, "pause_s": pause, "cold": cold, "warm": warm,
            "process_to_first_batch_s": (ready - born) + pause + cold["to_first_batch_s"],
            "archive_mapped": mapped}


def _archive_mapped() -> bool:
    """Whether this process's driver JVM maps a class-data archive of statekit's cache."""
    from pyspark import SparkContext

    from statekit.spark.class_archive import ClassArchive
    from statekit.spark.worker_home import worker_spark_home

    proc = getattr(SparkContext._gateway, "proc", None)
    archive = ClassArchive.for_this_machine(worker_spark_home())
    return proc is not None and archive.mapped_by(proc.pid)


# --- the parent ---------------------------------------------------------------------------
def _spawn(bootstrap: str, records: int, batch: int, pause: float, variant: str,
           connect_url: str | None = None) -> dict:
    born = time.time()
    out = subprocess.run(
        [sys.executable, "-m", "bench.coldstart", "--child", variant, "--bootstrap", bootstrap,
         "--records", str(records), "--batch", str(batch), "--pause", str(pause),
         "--born", repr(born)] + (["--connect-url", connect_url] if connect_url else []),
        capture_output=True, text=True, cwd=Path(__file__).resolve().parent.parent,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
    if out.returncode != 0 or not lines:
        raise RuntimeError(f"cold-start child ({variant}) failed:\n{out.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULT "):])


def run(records: int = 200_000, batch: int = 50_000, repeats: int = 3, pause: float = 20.0,
        variants: list[str] | None = None) -> dict:
    import statekit as sk
    from bench.throughput import produce

    started = Run("coldstart")
    variants = variants or list(VARIANTS)
    runs: dict[str, list[dict]] = {v: [] for v in variants}
    with sk.EmbeddedBroker() as broker, contextlib.ExitStack() as stack:
        produce_s = produce(broker.bootstrap_servers, TOPIC, records)
        url = None
        if CONNECT in variants:   # started, and warmed by a discarded run, before any run
            from statekit.spark.connect import connect_server

            url = stack.enter_context(connect_server()).url
            _spawn(broker.bootstrap_servers, records, batch, pause, CONNECT, url)
        for i in range(repeats):
            order = variants if i % 2 == 0 else list(reversed(variants))
            for variant in order:
                runs[variant].append(_spawn(broker.bootstrap_servers, records, batch, pause,
                                            variant, url if variant == CONNECT else None))
    summary = {v: _summary(items) for v, items in runs.items()}
    result = {"records": records, "batch": batch, "repeats": repeats, "pause_s": pause,
              "produce_s": produce_s, "summary": summary, "runs": runs}
    write_result(started, figures_of(summary, runs), result)
    report(result)
    return result


def figures_of(summary: dict, runs: dict[str, list[dict]]) -> list[Figure]:
    """The results file's figures: per variant, start_query → first batch done, cold against
    the same query warm in the same process, and the session's seconds."""
    out = []
    for variant, s in summary.items():
        warm = f"{variant}: start_query → first batch done, warm"
        out += [Figure(f"{variant}: fresh processes", len(runs[variant]), "runs"),
                Figure(f"{variant}: spark_session", s["session_s"], "s"),
                Figure(warm, s["warm_to_first_batch_s"], "s"),
                Figure(f"{variant}: start_query → first batch done, cold",
                       s["cold_to_first_batch_s"], "s", baseline=warm,
                       ratio=s["ratio_to_first_batch"]),
                Figure(f"{variant}: start_query → first trigger, cold",
                       s["cold_to_first_trigger_s"], "s"),
                Figure(f"{variant}: first batch, cold", s["cold_first_batch_s"], "s"),
                Figure(f"{variant}: first batch, warm", s["warm_first_batch_s"], "s"),
                Figure(f"{variant}: records/s to all records, cold", s["cold_records_per_s"],
                       "records/s"),
                Figure(f"{variant}: process start → first batch done (pause included)",
                       s["process_to_first_batch_s"], "s",
                       target=(f"value <= {FIRST_RESULT_TARGET_S}"
                               if pause_of(runs[variant]) == 0 else None)),
                Figure(f"{variant}: runs with the class-data archive mapped",
                       sum(bool(r.get("archive_mapped")) for r in runs[variant]), "runs")]
    return out


def pause_of(items: list[dict]) -> float:
    """The pause of these runs (the same in every run of a benchmark)."""
    return items[0]["pause_s"] if items else 0.0


def _summary(items: list[dict]) -> dict:
    def med(path: list[str]) -> float:
        values = []
        for item in items:
            value = item
            for key in path:
                value = value[key]
            values.append(value)
        return median(values)

    out = {"session_s": med(["session_s"]),
           "process_to_first_batch_s": med(["process_to_first_batch_s"])}
    for phase in ("cold", "warm"):
        for key in ("to_first_trigger_s", "to_first_batch_s", "first_batch_s", "seconds",
                    "records_per_s"):
            out[f"{phase}_{key}"] = med([phase, key])
    out["ratio_to_first_batch"] = out["cold_to_first_batch_s"] / out["warm_to_first_batch_s"]
    out["ratio_records_per_s"] = out["cold_records_per_s"] / out["warm_records_per_s"]
    return out


def report(r: dict) -> None:
    rows = []
    for variant, s in r["summary"].items():
        rows.append((f"{variant}: cold query",
                     f"first trigger {s['cold_to_first_trigger_s']:.1f} s, first batch done "
                     f"{s['cold_to_first_batch_s']:.1f} s (batch {s['cold_first_batch_s']:.1f} s), "
                     f"{s['cold_records_per_s']:,.0f} rec/s overall"))
        rows.append((f"{variant}: same query warm",
                     f"first trigger {s['warm_to_first_trigger_s']:.1f} s, first batch done "
                     f"{s['warm_to_first_batch_s']:.1f} s (batch {s['warm_first_batch_s']:.1f} s), "
                     f"{s['warm_records_per_s']:,.0f} rec/s overall"))
        rows.append((f"{variant}: cold / warm",
                     f"to first batch {s['ratio_to_first_batch']:.2f}x; session "
                     f"{s['session_s']:.1f} s; process start → first batch "
                     f"{s['process_to_first_batch_s']:.1f} s (incl. {r['pause_s']:.0f} s pause)"))
    print_table(f"cold start, {r['records']:,} records, batches of {r['batch']:,} "
                f"(median of {r['repeats']}, each run a fresh process)", rows)
    for line in unmapped_warnings(r["runs"]):
        print(line)


#: the variants whose driver JVM should map the class-data archive
ARCHIVE_VARIANTS = ("default", "full_jit", "no_early_workers")


def unmapped_warnings(runs: dict[str, list[dict]]) -> list[str]:
    """A line per variant that should have mapped the class-data archive and did not in
    some run: its figures then describe a JVM without it (the archive of this venv missing).

    Example:
        >>> unmapped_warnings({"default": [{"archive_mapped": True}, {"archive_mapped": False}],
        ...                    "no_archive": [{"archive_mapped": False}]})  # doctest: +ELLIPSIS
        ['warning: default: the class-data archive was not mapped in 1 of 2 runs (...']
    """
    out = []
    for variant, items in runs.items():
        missed = sum(not item.get("archive_mapped") for item in items)
        if variant in ARCHIVE_VARIANTS and missed:
            out.append(f"warning: {variant}: the class-data archive was not mapped in {missed} "
                       f"of {len(items)} runs (build it for this venv: `make jvm-classes`); "
                       "those figures are of a JVM without it")
    return out


def main(argv: list[str] | None = None) -> dict | None:
    from bench import first_rows

    parser = argparse.ArgumentParser(prog="python -m bench.coldstart", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--measure", choices=["first_rows", "first_batch"], default="first_rows",
                        help="first_rows: the README example to its first non-empty snapshot "
                             "against a bare PySpark process (bench.first_rows); first_batch: "
                             "session, pause, the Kafka query's first batch")
    parser.add_argument("--records", type=int, default=200_000, help="events to process")
    parser.add_argument("--batch", type=int, default=50_000, help="records per micro-batch")
    parser.add_argument("--repeats", type=int, help="fresh processes per variant (first_rows: "
                                                    "5, first_batch: 3)")
    parser.add_argument("--pause", type=float, default=20.0,
                        help="seconds between the session and start_query (reading a cell)")
    parser.add_argument("--variants", help=f"comma-separated; first_rows: of "
                        f"{', '.join(first_rows.VARIANTS)}; first_batch: of {', '.join(VARIANTS)}")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--first-rows-child", help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap", help=argparse.SUPPRESS)
    parser.add_argument("--born", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--connect-url", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child or args.first_rows_child:
        result = (first_rows.child(args.first_rows_child, args.born) if args.first_rows_child
                  else child(args.bootstrap, args.records, args.batch, args.pause, args.child,
                             args.born, args.connect_url))
        print("RESULT " + json.dumps(result, default=str), flush=True)
        return None
    accepted = first_rows.VARIANTS if args.measure == "first_rows" else tuple(VARIANTS)
    variants = [v.strip() for v in (args.variants or ",".join(accepted)).split(",") if v.strip()]
    unknown = [v for v in variants if v not in accepted]
    if unknown:
        parser.error(f"unknown variant {unknown[0]!r}; accepted: {', '.join(accepted)}")
    if args.measure == "first_rows":
        return first_rows.run(args.repeats or 5, variants)
    return run(args.records, args.batch, args.repeats or 3, args.pause, variants)


if __name__ == "__main__":
    main()
