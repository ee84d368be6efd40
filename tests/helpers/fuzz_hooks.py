"""Schemathesis hooks for fuzzing a serving instance (``tests/serve/test_rest_fuzz.py``).

Loaded by ``schemathesis run`` (the config's ``hooks``); the instance is named by the
environment: ``STATEKIT_FUZZ_URL`` (where it listens) and ``STATEKIT_FUZZ_INSTANCE``.
They change no check. They do what a schema cannot:

- a range's two ends in order: OpenAPI has no rule across two parameters, and the service
  answers an inverted range with a 400 naming both ends (each operation's description says
  so), so a request that fits the schema gets its ends swapped when they are inverted;
- waits short: a ``min_batch`` the store has not reached waits ``timeout`` seconds (up to 30)
  before its 409; the fuzzer's waits are cut to 0.1 s;
- ``POST /assignment`` reconfigures the instance: it is sent only bodies that do not name
  this instance, which it must all refuse (the test checks its assignment is unchanged).
"""

from __future__ import annotations

import functools
import json
import os

import httpx
import schemathesis

from statekit.model.query_spec import QuerySpec
from statekit.model.store_schema import StoreSchema
from statekit.serve.routing.key_codec import KeyCodec
from statekit.serve.routing.key_times import time_ms

URL = os.environ.get("STATEKIT_FUZZ_URL", "")
INSTANCE = os.environ.get("STATEKIT_FUZZ_INSTANCE", "i0")
#: the two ends of each range a query takes: (first, last, how they compare)
RANGES = (("time_from", "time_to", "time"), ("key_from", "key_to", "key"))


@functools.cache
def codec() -> KeyCodec:
    meta = httpx.get(f"{URL}/metadata").json()
    schema = StoreSchema(QuerySpec.from_dict(meta["spec"]), meta["key_types"],
                         meta["partitions"])
    return KeyCodec(schema.spec, schema.key_types, schema.partitions)


def _position(value: object, kind: str) -> int | bytes:
    """Where an end of a range lies: a time in ms, a key as the store's bytes."""
    if kind == "time":
        return time_ms(int(value) if str(value).isdigit() else value, "time")
    key = json.loads(value) if isinstance(value, str) else value
    return codec().store_key(codec().key(key))


@schemathesis.hook
def filter_body(context, body) -> bool:
    return json.dumps(INSTANCE) not in json.dumps(body, default=str)


@schemathesis.hook
def before_call(context, case, kwargs) -> None:
    query = case.query
    if not query:
        return
    try:
        if 0.1 < float(query.get("timeout", 0)) <= 30:
            query["timeout"] = 0.1
    except (TypeError, ValueError):
        pass
    if case.meta is None or not case.meta.generation.mode.is_positive:
        return
    for first, last, kind in RANGES:
        if query.get(first) is None or query.get(last) is None:
            continue
        try:
            inverted = _position(query[first], kind) > _position(query[last], kind)
        except Exception:  # noqa: BLE001 - not comparable: left as generated
            continue
        if inverted:
            query[first], query[last] = query[last], query[first]
