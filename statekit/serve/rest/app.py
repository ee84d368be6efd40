"""The app factories of a serving instance: ``create_app`` (the data listener: queries,
health, metadata, assignments) and ``create_control_app`` (the control listener's own).

Each wires the routers (``control_routes``, ``store_routes``, ``global_routes``), the
limits and JSON errors (``middleware``, ``http_errors``), the token check (``auth.install``),
the strict schema (``schema.tighten``) and the plain lookup's own paths (``fast_lookup``).

Example:
    >>> app = create_app(instance, client)                               # doctest: +SKIP
    >>> sorted(app.openapi()["paths"])[:2]                               # doctest: +SKIP
    ['/assignment', '/health']
"""

from __future__ import annotations

from collections.abc import Callable

from anyio import CapacityLimiter
from fastapi import Depends, FastAPI
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from statekit.serve.auth import install
from statekit.serve.client import ServingClient
from statekit.serve.instance import ServingInstance
from statekit.serve.rest.control_routes import control_router
from statekit.serve.rest.fast_lookup import AnswerNow, FastLookup
from statekit.serve.rest.global_routes import global_router
from statekit.serve.rest.http_errors import http_error, server_error, validation_error
from statekit.serve.rest.limits import CONTROL_THREADS
from statekit.serve.rest.middleware import BodyLimit, limit_url
from statekit.serve.rest.models import ErrorModel
from statekit.serve.rest.schema import tighten
from statekit.serve.rest.store_queries import StoreQueries
from statekit.serve.rest.store_routes import store_router
from statekit.serve.routing.assignment import Assignment


def _bare_app(title: str, description: str, fast_lookup: dict | None = None) -> FastAPI:
    """A FastAPI app with the service's limits and JSON errors (no routes yet);
    ``fast_lookup``: the options of the plain lookup's own path (``FastLookup``), inside
    the body limit."""
    app = FastAPI(title=title, version="1", description=description,
                  dependencies=[Depends(limit_url)])
    if fast_lookup is not None:
        app.add_middleware(FastLookup, **fast_lookup)
    app.add_middleware(BodyLimit)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(Exception, server_error)
    return app


def create_control_app(instance: ServingInstance, client: ServingClient | None = None,
                       on_assignment: Callable[[Assignment], None] | None = None,
                       control_url: str | None = None) -> FastAPI:
    """The control listener's app of ``instance``: ``/health``, ``/metadata`` and
    ``POST /assignment`` only, answered on a port (and an event loop) of their own, so
    they are not queued behind the queries in flight on the data listener.

    Example:
        >>> control = Server(create_control_app(instance, client)).start()  # doctest: +SKIP
        >>> httpx.get(f"{control.url}/health").json()                      # doctest: +SKIP
        {'status': 'ok', 'instance': 'i0'}
    """
    client = client or ServingClient({instance.name: ""}, local=instance)
    app = _bare_app(f"statekit serving instance {instance.name}: control listener",
                    "Health, metadata and assignments of a serving instance, on a "
                    "listener of their own (the queries are on the data listener).")
    install(app, ErrorModel)
    app.include_router(control_router(instance, client, on_assignment,
                                      CapacityLimiter(CONTROL_THREADS), control_url))
    return app


def create_app(instance: ServingInstance, client: ServingClient | None = None,
               on_assignment: Callable[[Assignment], None] | None = None,
               control_url: str | None = None) -> FastAPI:
    """The FastAPI app of ``instance``; ``client`` routes what it does not hold itself.
    ``control_url``: the instance's control listener (``create_control_app``), shown in
    ``/metadata``."""
    client = client or ServingClient({instance.name: ""}, local=instance)
    queries = StoreQueries(instance, client)
    app = _bare_app(f"statekit serving instance {instance.name}",
                    "Interactive queries over the state of a Spark streaming "
                    "aggregation, kept current from its Kafka changelog.",
                    {"path": f"/stores/{queries.store}/get", "lookup": queries.lookup})

    def openapi() -> dict:
        """The schema FastAPI makes from the routes, made as strict as the service."""
        if app.openapi_schema is None:
            app.openapi_schema = tighten(FastAPI.openapi(app), instance)
        return app.openapi_schema

    app.openapi = openapi
    # the token check (armed by the Server that binds the app): it documents the security
    # schemes on top of the strict schema above
    install(app, ErrorModel)
    # threads of their own: /metadata and POST /assignment never wait behind queries, nor
    # queries behind those (a wait holds no thread at all: see StoreQueries.answer)
    app.include_router(control_router(instance, client, on_assignment,
                                      CapacityLimiter(CONTROL_THREADS), control_url))
    app.state.answer_now = AnswerNow(queries, app.state)
    app.include_router(store_router(queries))
    app.include_router(global_router(instance))
    return app
