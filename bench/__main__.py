"""Run every benchmark: ``python -m bench [--keys N] [--records N] [--only snapshot|serving]``."""

from __future__ import annotations

import argparse

from bench import (
    attach,
    broker,
    changelog,
    curves,
    diff,
    inspect,
    kafka_streams,
    peer,
    processor,
    restore,
    serving,
    serving_load,
    snapshot,
    source,
    tail,
    throughput,
    tuning,
)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--keys", type=int, default=1_000_000,
                        help="snapshot, serving: keys in the store")
    parser.add_argument("--inspect-rows", type=int, default=1_000_000,
                        help="inspect: state rows in the checkpoint")
    parser.add_argument("--records", type=int, default=200_000, help="throughput: events")
    parser.add_argument("--changelog-records", type=int, default=1_000_000,
                        help="changelog: records in the topic")
    parser.add_argument("--batch", type=int, default=50_000, help="throughput: batch size")
    parser.add_argument("--repeats", type=int, help="timed repetitions (each's own default)")
    parser.add_argument("--only", choices=["snapshot", "throughput", "changelog", "restore",
                                           "serving", "serving_load", "tuning", "inspect",
                                           "processor", "curves", "peer", "source", "tail",
                                           "attach", "broker", "diff", "kafka_streams"],
                        help="run just one (curves, peer: only when asked for)")
    args = parser.parse_args(argv)
    repeats = [] if args.repeats is None else ["--repeats", str(args.repeats)]
    if args.only in (None, "broker"):
        broker.main(repeats)  # its own sizes: see bench/broker.py
    if args.only in (None, "snapshot"):
        snapshot.main(["--keys", str(args.keys), *repeats])
    if args.only in (None, "diff"):
        diff.main(["--keys", str(args.keys), *repeats])
    if args.only in (None, "throughput"):
        throughput.main(["--records", str(args.records), "--batch", str(args.batch), *repeats])
    if args.only in (None, "source"):
        source.main(["--records", str(args.records), *repeats])
    if args.only in (None, "tail"):
        tail.main([])  # its own sizes: see bench/tail.py
    if args.only in (None, "changelog"):
        changelog.main(["--records", str(args.changelog_records), *repeats])
    if args.only in (None, "restore"):
        restore.main(["--records", str(args.changelog_records), *repeats])
    if args.only in (None, "serving"):
        serving.main(["--keys", str(args.keys), *repeats])
    if args.only in (None, "serving_load"):
        serving_load.main([])  # its own sizes: see bench/serving_load.py
    if args.only in (None, "tuning"):
        tuning.main(repeats)   # its own sizes: see bench/tuning.py
    if args.only in (None, "inspect"):
        inspect.main(["--rows", str(args.inspect_rows), *repeats])
    if args.only in (None, "processor"):
        processor.main(repeats)  # its own sizes: see bench/processor.py
    if args.only in (None, "attach"):
        attach.main(repeats)  # its own sizes: see bench/attach.py
    if args.only in (None, "kafka_streams"):
        kafka_streams.main(["--records", str(args.changelog_records)])  # 1M by default
    if args.only == "curves":  # long (10k, 100k, 1M keys): only when asked for
        curves.main([])        # `python -m bench.curves --ten-million` adds 10M
    if args.only == "peer":    # opt-in: needs .venv-peer (make peer-venv: quixstreams)
        if peer.quix_installed():
            peer.main(["--records", str(args.records), "--batch", str(args.batch)])
        else:
            print("skipped peer: no interpreter with Quix Streams (make peer-venv builds "
                  ".venv-peer; --quix-python names another)")


if __name__ == "__main__":
    main()
