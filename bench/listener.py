"""What a progress report costs a listener: PySpark's conversion against statekit's JSON read.

Every batch, Spark's listener bus hands each registered listener the batch's progress report.
PySpark's ``StreamingQueryListener`` first turns the JVM object into Python objects field by
field (``StreamingQueryProgress.fromJObject``: a Py4J call per field and map entry);
``statekit.spark.listener.ReportListener`` reads the same report as Spark's JSON
(``progress().json()``) and parses it in Python. This benchmark runs a statekit query (the
game events, 1-minute windows, RocksDB state, a Kafka source on the embedded broker) until
drained, then times both readings of each of its reports (alternating, ``--repeats`` rounds
after a warm-up round), and counts the Py4J calls each makes.

Figures: the median milliseconds and Py4J calls a report, each way; ratio = statekit /
PySpark. The driver spends this for every batch and every listener, on the listener bus's
one thread: a listener slower than the trigger falls behind.

    python -m bench.listener --batch 500 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from bench.common import median, print_table, session, write_result
from bench.results import Figure, Run


class _Calls:
    """Counts the Py4J commands this process sends (each is one round trip to the JVM)."""

    def __init__(self):
        from py4j.clientserver import ClientServerConnection

        self.count, self._cls = 0, ClientServerConnection
        self._send = ClientServerConnection.send_command
        counter = self

        def counted(connection, command):
            counter.count += 1
            return counter._send(connection, command)

        ClientServerConnection.send_command = counted

    def close(self) -> None:
        self._cls.send_command = self._send


def _pyspark(jprogress) -> str:
    from pyspark.sql.streaming.listener import StreamingQueryProgress

    return StreamingQueryProgress.fromJObject(jprogress).json


def _statekit(jprogress) -> str:
    text = jprogress.json()
    json.loads(text)
    return text


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m bench.listener", description=__doc__)
    parser.add_argument("--batch", type=int, default=500, help="records a micro-batch")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    started = Run("listener")
    import statekit as sk
    from statekit.datasets import GAME_EVENT_SCHEMA, GAME_SPEC, game_events
    from statekit.kafka import EmbeddedBroker
    from statekit.kafka.dataset_replay import replay

    spark = session()
    work = Path(tempfile.mkdtemp(prefix="statekit-bench-listener-"))
    with EmbeddedBroker() as broker:
        replay(game_events(), broker.bootstrap_servers, "games", partitions=4, progress=False)
        query = sk.start_query("games", GAME_SPEC, spark=spark, kafka=broker,
                               event_schema=GAME_EVENT_SCHEMA, checkpoint=str(work / "ck"),
                               max_offsets_per_trigger=args.batch, trigger="100 milliseconds")
        query.wait_until_drained()
        reports = list(query.query._jsq.recentProgress())  # the JVM's report objects
        calls = _Calls()
        try:
            timings: dict[str, list[float]] = {"pyspark": [], "statekit": []}
            counts: dict[str, list[int]] = {"pyspark": [], "statekit": []}
            for round_ in range(args.repeats + 1):           # round 0 warms up
                for jprogress in reports:
                    for way, read in (("pyspark", _pyspark), ("statekit", _statekit)):
                        before, start = calls.count, time.perf_counter()
                        text = read(jprogress)
                        if round_:
                            timings[way].append((time.perf_counter() - start) * 1000)
                            counts[way].append(calls.count - before)
                        assert json.loads(text)["batchId"] >= 0
            same = all(json.loads(_pyspark(p)) == json.loads(_statekit(p)) for p in reports)
        finally:
            calls.close()
            query.stop()
    ms = {way: median(values) for way, values in timings.items()}
    n = {way: median(values) for way, values in counts.items()}
    details = {"batch": args.batch, "repeats": args.repeats, "reports": len(reports),
               "same_json": same, "ms": timings, "calls": counts}
    base = "PySpark's conversion, a report (median)"
    write_result(started, [
        Figure(base, ms["pyspark"], "ms"),
        Figure("statekit's JSON read, a report (median)", ms["statekit"], "ms",
               baseline=base, ratio=ms["statekit"] / ms["pyspark"]),
        Figure("Py4J calls a report, PySpark's conversion", int(n["pyspark"]), "calls"),
        Figure("Py4J calls a report, statekit's JSON read", int(n["statekit"]), "calls"),
        Figure("reports read the same both ways", int(same), "yes=1"),
    ], details)
    print_table(f"a progress report read by a listener: {len(reports)} reports of a statekit "
                f"query, median of {args.repeats} rounds", [
                    ("PySpark's conversion", f"{ms['pyspark']:.1f} ms, {n['pyspark']:.0f} calls"),
                    ("statekit's JSON read", f"{ms['statekit']:.1f} ms, "
                                             f"{n['statekit']:.0f} calls"),
                    ("ratio", f"{ms['statekit'] / ms['pyspark']:.3f}"),
                    ("same report both ways", str(same)),
                ])
    return details


if __name__ == "__main__":
    main()
