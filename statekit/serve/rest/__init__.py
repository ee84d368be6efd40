"""The REST service of a serving instance: its stores over HTTP, any key from any instance.

Built on FastAPI (routing, validation and an OpenAPI schema from type hints)
served by uvicorn (a small, fast ASGI server): the well-kept Python stack for a
JSON API, and the schema lets the tests fuzz the service against itself
(``tests/serve/test_rest_fuzz.py``: every answer, error or not, is the one the schema
documents).

Like Kafka Streams' ``application.server``, every instance answers every query:
a key whose partition lives elsewhere is forwarded to its owner (or a standby),
and ``all`` / ``fetch_all`` / ``fetch_range`` / ``top_k`` are gathered from all
owners (``statekit.serve.client``). Requests a router sends with ``local=true``
are answered from this instance's own partitions only (``partitions`` narrows
them; a routed query reads every partition it needs).

Every error is JSON ``{"detail": {"error": ..., "message": ...}}`` naming the bad value and
what would be accepted: 400 for a bad key, time or parameter (a key is parsed within bounds:
``keys.MAX_KEY_CHARS``, ``keys.MAX_KEY_DEPTH``), 404 for an unknown store or path, 405 for a
method a path does not take, 408 for a request head or body not all sent within
``HEADER_TIMEOUT`` / ``BODY_TIMEOUT`` seconds (the connection closed), 409 when the store
has not reached the batch asked for within ``timeout`` (``min_batch``; the batch it has is
given), 413 for a result larger than ``limit`` rows or a body larger than ``MAX_BODY``, 414
for a URL longer than ``MAX_URL`` (the server's own refusals are JSON too:
``StatekitHttpProtocol``), 421 for a key asked with ``local=true`` of a partition this
instance does not hold (its owners named), 422 for a parameter or body of the wrong shape
(each problem listed in ``errors``; a JSON body nested deeper than ``MAX_BODY_DEPTH`` is
refused before it is parsed), 503 with ``Retry-After`` when no live instance holds a
partition (named, with its state). The OpenAPI schema states what the service takes
(``schema.tighten``). Served on 127.0.0.1 unless a non-loopback address is asked for
explicitly (``allow_remote=True``).

A wait for ``min_batch`` holds no thread: the query is asked without waiting, and
when a partition it needs is behind, the request awaits that partition's next
change (``ChangelogTail.wait_for_batch_async``; on another instance, its
``/position``) and asks again. Queries that read a store run on ``QUERY_THREADS``
threads of their own and an assignment that moves partitions on
``CONTROL_THREADS`` others; lookups of keys held here, ``/health``, ``/metadata``
and an assignment that moves nothing answer on the event loop.

A data listener saturated by queries answers every request, ``/health`` included,
only after a pass of its event loop over the requests in flight. So, as Kafka
separates controller traffic from the data plane (a control-plane listener,
KIP-291), an instance can also serve ``/health``, ``/metadata`` and
``POST /assignment`` on a control listener of its own (``create_control_app``: its
own port, thread and event loop); a cluster's instances do, and the cluster checks
health and sends assignments there, so failover is not queued behind lookups.

Modules: ``app`` (the app factories: routers, state, auth and error handlers wired),
``control_routes`` / ``store_routes`` / ``global_routes`` (the endpoints), ``models`` (the
request, query-parameter and response models), ``store_queries`` (a query answered here or
routed, its waits), ``fast_lookup`` (a plain lookup answered without the framework),
``schema`` (the OpenAPI schema tightened), ``http_errors``, ``middleware`` (the URL and body
limits), ``protocol`` (uvicorn's protocol and options), ``limits`` and ``server``. Names
resolve on first use.

Example:
    >>> app = create_app(instance, client)                               # doctest: +SKIP
    >>> server = Server(app, port=8123).start()                          # doctest: +SKIP
    >>> httpx.get(f"{server.url}/stores/board-counts/top_k",             # doctest: +SKIP
    ...           params={"window_start": "2026-01-05T11:00Z", "k": 5, "by": "sum_score"})
"""


from statekit._lazy import lazy_exports

_NAMES = {
    "create_app": "statekit.serve.rest.app",
    "create_control_app": "statekit.serve.rest.app",
    "Server": "statekit.serve.rest.server",
    "check_host": "statekit.serve.rest.server",
    "SERVER_OPTIONS": "statekit.serve.rest.protocol",
    "StatekitHttpProtocol": "statekit.serve.rest.protocol",
    "plain_lookup": "statekit.serve.rest.fast_lookup",
    "BODY_TIMEOUT": "statekit.serve.rest.limits",
    "CONTROL_THREADS": "statekit.serve.rest.limits",
    "DEFAULT_LIMIT": "statekit.serve.rest.limits",
    "HEADER_TIMEOUT": "statekit.serve.rest.limits",
    "MAX_BODY": "statekit.serve.rest.limits",
    "MAX_BODY_DEPTH": "statekit.serve.rest.limits",
    "MAX_ID": "statekit.serve.rest.limits",
    "MAX_REQUEST_LINE": "statekit.serve.rest.limits",
    "MAX_URL": "statekit.serve.rest.limits",
    "MAX_WAIT": "statekit.serve.rest.limits",
    "QUERY_THREADS": "statekit.serve.rest.limits",
    "ErrorModel": "statekit.serve.rest.models",
    "ResultModel": "statekit.serve.rest.models",
}
__getattr__, __dir__ = lazy_exports(__name__, _NAMES)
__all__ = sorted(_NAMES)
