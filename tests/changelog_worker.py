"""Runs a statekit query with its changelog in a process of its own (for kill -9 drills).

Usage: python changelog_worker.py BOOTSTRAP TOPIC CHECKPOINT NAME (run|drain)
``run`` keeps processing until killed; ``drain`` processes what is there, ships, stops.
"""

from __future__ import annotations

import sys
import time

import statekit as sk


def main(bootstrap: str, topic: str, checkpoint: str, name: str, mode: str) -> None:
    spark = sk.spark_session("local[2]", app_name=f"worker-{name}", shuffle_partitions=3)
    query = sk.start_query(topic, spark=spark, bootstrap_servers=bootstrap,
                           checkpoint=checkpoint, name=name, max_offsets_per_trigger=250,
                           trigger="200 milliseconds")
    if mode == "drain":
        query.wait_until_drained()
        query.stop()
        print(f"drained through batch {query.last_batch}", flush=True)
        return
    while True:
        time.sleep(1)


if __name__ == "__main__":
    main(*sys.argv[1:6])
