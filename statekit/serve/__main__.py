"""``python -m statekit.serve instance -``: one serving instance's process, its config's
JSON on standard input (``statekit.serve.process``)."""

import json
import sys

from statekit.serve.process import run_instance


def main(argv: list[str]) -> None:
    if argv != ["instance", "-"]:
        raise SystemExit("usage: python -m statekit.serve instance -  (the config's JSON on "
                         "standard input)")
    run_instance(json.loads(sys.stdin.read()))


if __name__ == "__main__":
    main(sys.argv[1:])
