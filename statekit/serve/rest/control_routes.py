"""The control routes of a serving instance: ``/health``, ``/metadata`` and
``POST /assignment``, on the data listener's app and on the control listener's own.

``/health`` and ``/metadata`` answer on the event loop; an assignment that moves partitions
runs on the ``control`` threads (one that moves nothing answers at once).

Example:
    >>> app.include_router(control_router(instance, client, None,          # doctest: +SKIP
    ...                                   CapacityLimiter(CONTROL_THREADS), None))
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from anyio import CapacityLimiter, to_thread
from fastapi import APIRouter
from fastapi.responses import JSONResponse

from statekit.errors import BadArgument
from statekit.serve.client import ServingClient
from statekit.serve.instance import ServingInstance
from statekit.serve.rest.http_errors import as_http_error, error_responses
from statekit.serve.rest.models import AssignmentAnswer, AssignmentModel, HealthModel
from statekit.serve.routing.assignment import Assignment


def control_router(instance: ServingInstance, client: ServingClient,
                   on_assignment: Callable[[Assignment], None] | None,
                   control: CapacityLimiter, control_url: str | None) -> APIRouter:
    """``/health``, ``/metadata`` and ``POST /assignment`` of ``instance`` (for the data
    listener's app, or the control listener's)."""
    router = APIRouter()

    @router.get("/health", responses=error_responses(414))
    async def health() -> HealthModel:  # on the event loop: nothing here waits
        return HealthModel(status="ok", instance=instance.name)

    @router.get("/metadata", response_model=dict[str, Any], responses=error_responses(414))
    async def metadata() -> JSONResponse:  # on the event loop: statuses are read lock-free
        """This instance (its process id and start time), the assignment, and every held
        partition's state and batch."""
        # plain JSON values: written as they are, not walked again by the framework's encoder
        known = {**instance.metadata(), "urls": client.urls}
        if control_url is not None:
            known["control_url"] = control_url
        return JSONResponse(known)

    @router.post("/assignment", responses=error_responses(400, 413, 414, 422))
    async def set_assignment(body: AssignmentModel) -> AssignmentAnswer:
        """Take a new assignment (sent by the cluster after an instance died)."""
        try:
            assignment = Assignment.from_dict(body.assignment.model_dump())
            _check_assignment(assignment, body.urls, instance)
        except BadArgument as exc:
            raise as_http_error(exc) from None

        def take() -> AssignmentAnswer:
            instance.set_assignment(assignment)
            client.set_assignment(assignment, body.urls)
            if on_assignment is not None:
                on_assignment(assignment)
            return AssignmentAnswer(instance=instance.name, version=assignment.version,
                                    held={str(p): r for p, r in instance.roles.items()})

        if set(assignment.held_by(instance.name)) == set(instance.roles) and \
                on_assignment is None:
            return take()  # no partition comes or goes: nothing to restore or close
        return await to_thread.run_sync(take, limiter=control)

    return router


def _check_assignment(assignment: Assignment, urls: dict[str, str],
                      instance: ServingInstance) -> None:
    """BadArgument unless ``assignment`` places each partition of the store once, names only
    its own instances, names ``instance``, and ``urls`` says where the others listen."""
    n = instance.schema.partitions
    placed = sorted([*assignment.active, *assignment.lost])
    if placed != list(range(n)):
        raise BadArgument("assignment partitions (active and lost)", placed,
                          f"each of 0..{n - 1} once")
    if instance.name not in assignment.instances:
        raise BadArgument("assignment instances", list(assignment.instances),
                          f"a list naming this instance, {instance.name!r}")
    if len(set(assignment.instances)) != len(assignment.instances):
        raise BadArgument("assignment instances", list(assignment.instances),
                          "distinct instance names")
    for p, replicas in assignment.standbys.items():
        if p not in assignment.active:
            raise BadArgument("assignment standbys partition", p,
                              f"an active partition ({sorted(assignment.active)})")
        if assignment.active[p] in replicas or len(set(replicas)) != len(replicas):
            raise BadArgument(f"assignment standbys of partition {p}", list(replicas),
                              f"distinct instances other than its active one "
                              f"({assignment.active[p]!r})")
    named = set(assignment.active.values()) | {i for r in assignment.standbys.values()
                                               for i in r}
    unknown = sorted(named - set(assignment.instances))
    if unknown:
        raise BadArgument("assignment owner", unknown[0],
                          f"one of its instances {list(assignment.instances)}")
    unplaced = [i for i in assignment.instances if i != instance.name and i not in urls]
    if unplaced:
        raise BadArgument("urls", urls, f"a URL for each other instance (none for "
                                        f"{unplaced[0]!r})")
