"""Spark's reader failures as statekit errors that name the file at fault.

The checks and the translation live in ``statekit.spark_state.integrity`` (one owner for the
query API, the readers and ``describe()``); this module keeps their names for ``inspect``.

Example:
    >>> spark_reason(RuntimeError("An error occurred while calling o1.load.\\n"
    ...     ": java.lang.IllegalStateException: [STDS_FAILED_TO_READ_STATE_SCHEMA] Failed."))
    '[STDS_FAILED_TO_READ_STATE_SCHEMA] Failed.'
"""

from __future__ import annotations

from statekit.spark_state.read_errors import reading, spark_reason

__all__ = ["reading", "spark_reason"]
