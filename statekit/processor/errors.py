"""The error a processor raises where it breaks a declaration, inside Spark's Python worker.

Spark fails the query with it and commits nothing of that batch, so the checkpoint and
the state stay as the last committed batch left them; ``ProcessorQuery`` raises it again
in the driver with the same message.
"""

from __future__ import annotations

from statekit.errors import StatekitError


class ProcessorError(StatekitError):
    """A processor did something its declarations do not allow: rows that do not fit the
    declared output, a store key or value of the wrong shape, a window or session behind
    its store's retention. The message names the value and what is accepted."""
