"""Command line: ``doctor`` checks the set-up, ``demo`` runs the demo, ``serve`` serves a store.

Example::

    $ python -m statekit doctor
    OK   java: Java 17 at /usr/bin/java (openjdk version "17.0.15" 2025-04-15)
    ...
    $ python -m statekit demo --out statekit-out
    $ python -m statekit serve --bootstrap-servers 127.0.0.1:9092 \
          --topic leaderboard-counts-changelog --instances 3 --standbys 1 \
          --global players=player-profiles:player:plain
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="statekit", description="See inside a stream processor's state.")
    sub = parser.add_subparsers(dest="command", required=True,
                                metavar="{doctor,demo,serve}")
    sub.add_parser("doctor", help="check Java, Spark and the embedded broker; say how to fix")
    demo = sub.add_parser("demo", help="run the end-to-end demo pipeline")
    demo.add_argument("--out", default="statekit-out",
                      help="directory for the demo's output (default: statekit-out)")
    demo.add_argument("--bootstrap-servers", default=None,
                      help="Kafka bootstrap servers (default: start an embedded broker)")
    demo.add_argument("--master", default=None,
                      help="Spark master URL (default: local)")
    serve = sub.add_parser("serve", help="serve a store by key from instances on this machine "
                                         "until Ctrl-C")
    serve.add_argument("--bootstrap-servers", required=True, help="the Kafka cluster")
    serve.add_argument("--topic", required=True, help="the store's changelog topic")
    serve.add_argument("--instances", type=int, default=3)
    serve.add_argument("--standbys", type=int, default=None,
                       help="standbys per partition (default: 1, none with one instance)")
    serve.add_argument("--global", dest="globals", action="append", default=[],
                       metavar="NAME=TOPIC:KEY_COLUMNS[:plain]",
                       help="a global store every instance holds (KEY_COLUMNS comma separated;"
                            " 'plain': the record keys are plain text)")
    serve.add_argument("--workdir", default=None, help="where the stores live (default: temp)")
    return parser


def global_table(text: str):
    """``players=player-profiles:player:plain`` as a GlobalTable."""
    from statekit.errors import BadArgument
    from statekit.options.serve import GlobalTable

    name, _, rest = text.partition("=")
    parts = rest.split(":")
    if not name or len(parts) not in (2, 3) or (len(parts) == 3 and parts[2] != "plain"):
        raise BadArgument("--global", text, "NAME=TOPIC:KEY_COLUMNS[:plain], e.g. "
                                            "players=player-profiles:player:plain")
    return GlobalTable(name, parts[0], tuple(parts[1].split(",")), len(parts) == 3)


def run_serve(args: argparse.Namespace) -> int:
    """Serve until interrupted, printing the assignment and where each instance listens."""
    import time

    from statekit.options.serve import ServeOptions
    from statekit.serve.cluster import serve

    tables = [global_table(text) for text in args.globals]
    with serve(args.bootstrap_servers, args.topic, instances=args.instances,
               standbys=args.standbys, workdir=args.workdir,
               options=ServeOptions(global_tables=tables)) as cluster:
        cluster.wait_ready()
        print(cluster.assignment.to_frame().to_string(index=False), flush=True)
        for name, url in cluster.urls.items():
            print(f"{name}: {url}/docs", flush=True)
        try:
            while True:
                time.sleep(1)
        except KeyboardInterrupt:
            print("stopping", flush=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``statekit`` / ``python -m statekit``; returns the exit code."""
    args = build_parser().parse_args(argv)
    if args.command == "doctor":
        from statekit.doctor import main as doctor_main

        return doctor_main()
    if args.command == "serve":
        return run_serve(args)
    from statekit.demo import main as demo_main

    result = demo_main(args)
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(main())
