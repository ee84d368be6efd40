"""Every pytest run in this repository runs the workshop's solution cells (``%%solution``).

A learner's kernel skips them (a button shows them on demand); the notebooks run
by nbmake here start their kernels with ``STATEKIT_SOLUTIONS=1``, so each solution
runs and its ``.require()`` fails the notebook if its check does not accept it.
"""

import os

os.environ.setdefault("STATEKIT_SOLUTIONS", "1")
