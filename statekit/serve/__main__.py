"""``python -m statekit.serve instance CONFIG_JSON``: one serving instance's process."""

import json
import sys

from statekit.serve.process import run_instance


def main(argv: list[str]) -> None:
    if len(argv) != 2 or argv[0] != "instance":
        raise SystemExit("usage: python -m statekit.serve instance CONFIG_JSON")
    run_instance(json.loads(argv[1]))


if __name__ == "__main__":
    main(sys.argv[1:])
