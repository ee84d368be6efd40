"""Which handle ships a query's changelogs, in this process: one at a time, since two
writers of one topic fence each other (``claim_shipping``, ``unclaim_shipping``).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from statekit.errors import (
    AlreadyAttached,
)
from statekit.live.locate import (
    describe_query,
)

if TYPE_CHECKING:
    from statekit.live.handle import AttachedQuery


#: the handle shipping changelogs for each query id, in this process (one at a time: two
#: writers of one topic fence each other)
_SHIPPING: dict[str, AttachedQuery] = {}
_SHIPPING_LOCK = threading.Lock()


def claim_shipping(query, handle: AttachedQuery | None = None) -> None:
    """Make ``handle`` the one that ships ``query``'s changelogs (None: only check that it
    could). AlreadyAttached names the handle that ships them already while its query runs;
    one left attached to a query that stopped since (and was started again: the same id)
    is detached first."""
    with _SHIPPING_LOCK:
        other = _SHIPPING.get(str(query.id))
        if other is None or other is handle or other._detached:
            if handle is not None:
                _SHIPPING[handle.id] = handle
            return
    if other.is_active:
        topics = ", ".join(sorted(other.changelog_topics().values())) or "(starting)"
        raise AlreadyAttached(
            f"{describe_query(query)} is already attached with kafka= by another handle, "
            f"which ships its parts to the changelog topics {topics}: a second one would "
            f"fence the first's writers. Use that handle (it is this error's .handle), or "
            f"call its close() first and attach again", other)
    other.close()
    claim_shipping(query, handle)


def unclaim_shipping(handle: AttachedQuery) -> None:
    """``handle`` ships its query's changelogs no more."""
    with _SHIPPING_LOCK:
        if _SHIPPING.get(handle.id) is handle:
            del _SHIPPING[handle.id]
