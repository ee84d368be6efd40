"""The route of the global stores an instance holds, ``/global/{name}/get``: every instance
holds all of a global store, so it answers here (in the schema only when one is held).

Example:
    >>> app.include_router(global_router(instance))                    # doctest: +SKIP
"""

from __future__ import annotations

import json

from fastapi import APIRouter, Path, Query
from fastapi.responses import JSONResponse

from statekit.serve.instance import ServingInstance
from statekit.serve.rest.http_errors import QUERY_ERRORS, bad_argument_as_400, fail
from statekit.serve.rest.models import ResultModel
from statekit.serve.routing.key_text import MAX_KEY_CHARS, check_key_text


def global_router(instance: ServingInstance) -> APIRouter:
    """``GET /global/{name}/get`` of the global stores ``instance`` holds."""
    router = APIRouter()
    globals_held = sorted(instance.globals)

    @router.get("/global/{name}/get", response_model=ResultModel, responses=QUERY_ERRORS,
                include_in_schema=bool(globals_held))
    async def global_get(name: str = Path(description="a global store held here",
                                          json_schema_extra={"enum": globals_held or
                                                             ["(none)"]}),
                         key: str = Query(..., max_length=MAX_KEY_CHARS, description=(
                             "the key: a JSON object of the global store's key columns, or "
                             "the plain key (p07)"))):
        """One row of a global store: every instance holds all of it, so it answers here."""
        if name not in instance.globals:
            raise fail(404, "UnknownStore", f"no global store {name!r} here; global stores: "
                                            f"{', '.join(globals_held) or '(none)'}")
        bad_argument_as_400(check_key_text, key)  # bounded: never too deep for json.loads
        try:
            value = json.loads(key)
        except ValueError:
            value = key  # a plain key
        if not isinstance(value, dict | str):
            value = key
        return JSONResponse(bad_argument_as_400(instance.global_get, name, value).to_dict())

    return router
