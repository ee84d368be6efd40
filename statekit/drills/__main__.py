"""``python -m statekit.drills (query|store) CONFIG_JSON``: a drill's worker process."""

import sys

from statekit.drills.worker import main

if __name__ == "__main__":
    main(sys.argv[1:])
