"""Command line: ``python -m statekit doctor`` checks the set-up; ``demo`` runs the demo.

Example::

    $ python -m statekit doctor
    OK   java: Java 17 at /usr/bin/java (openjdk version "17.0.15" 2025-04-15)
    ...
    $ python -m statekit demo --out statekit-out
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="statekit", description="See inside a stream processor's state.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{doctor,demo}")
    sub.add_parser("doctor", help="check Java, Spark and the embedded broker; say how to fix")
    demo = sub.add_parser("demo", help="run the end-to-end demo pipeline")
    demo.add_argument("--out", default="statekit-out",
                      help="directory for the demo's output (default: statekit-out)")
    demo.add_argument("--bootstrap-servers", default=None,
                      help="Kafka bootstrap servers (default: start an embedded broker)")
    demo.add_argument("--master", default=None,
                      help="Spark master URL (default: local)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``statekit`` / ``python -m statekit``; returns the exit code."""
    args = build_parser().parse_args(argv)
    if args.command == "doctor":
        from statekit.doctor import main as doctor_main

        return doctor_main()
    from statekit.demo import main as demo_main

    result = demo_main(args)
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(main())
