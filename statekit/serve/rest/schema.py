"""The OpenAPI schema of a serving instance made as strict as the service (``tighten``).

Example:
    >>> partitions_schema(4)["schema"]["items"]
    {'type': 'integer', 'minimum': 0, 'maximum': 3}
"""

from __future__ import annotations

from statekit.serve.instance import ServingInstance
from statekit.serve.routing.key_times import time_schema


def partitions_schema(count: int) -> dict:
    """The OpenAPI parameter of ``store_queries.asked_partitions``: a comma-separated list of
    distinct partitions (OpenAPI's form style, not exploded)."""
    return {"style": "form", "explode": False, "schema": {
        "type": "array", "items": {"type": "integer", "minimum": 0, "maximum": count - 1},
        "minItems": 1, "maxItems": count, "uniqueItems": True}}


#: Query parameters that are times (``time_schema``), and the ranges a query takes (the one
#: rule an OpenAPI schema cannot state: each range's first end may not come after its last)
TIMES = ("time_from", "time_to", "earliest_end", "latest_start")
_TIME_RANGE = ("time_from", "time_to", "")
RANGES = {"window": {"fetch": _TIME_RANGE, "fetch_all": _TIME_RANGE, "fetch_range": _TIME_RANGE},
          "key-value": {"range": ("key_from", "key_to", " in the store's key byte order")}}


def tighten(schema: dict, instance: ServingInstance) -> dict:
    """``schema`` (FastAPI's OpenAPI) made as strict as the service: keys as JSON objects of
    the store's key columns and types, times and window starts as the grammar and grid the
    service checks, partitions within the store's range, and only the parameters and paths
    this store's kind takes. What no schema can say — a range's ends in order (``RANGES``) —
    each operation's description states, and the service answers 400 naming both ends."""
    codec, store = instance.codec, instance.tail.store_name
    for path, operations in schema["paths"].items():
        kind = path.rsplit("/", 1)[-1]
        for operation in operations.values():
            kept = []
            for param in operation.get("parameters", []):
                name = param["name"]
                if name == "enrich" and not instance.globals:
                    continue  # no global store to enrich with: the parameter is refused
                if name == "window_start" and kind == "top_k":
                    if instance.kind == "key-value":
                        continue  # a running aggregate has no windows
                    param.update(required=True, schema=codec.window_start_schema())
                elif name in ("key", "key_from", "key_to") and path.startswith("/stores/"):
                    param.pop("schema", None)
                    window = kind == "get" and instance.kind != "key-value"
                    param["content"] = {"application/json": {
                        "schema": codec.json_schema(window=window)}}
                elif name in TIMES:
                    param["schema"] = time_schema()
                elif name == "partitions":
                    param.update(partitions_schema(instance.schema.partitions))
                kept.append(param)
            if "parameters" in operation:
                operation["parameters"] = kept
            ends = RANGES.get(instance.kind, {}).get(kind)
            if ends is not None and path.startswith("/stores/"):
                first, last, order = ends
                operation["description"] = (f"{operation.get('description', '')}\n\n{first} "
                                            f"no later than {last}{order}, else 400 naming "
                                            f"both.")
    schema["info"]["description"] += f" This instance serves {store!r}, a {instance.kind} store."
    return schema
