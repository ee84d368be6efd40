"""A ``QuerySpec`` as the reference Kafka Streams application reads it, and what of a spec it
cannot express.

The Java side (``jvm/.../Spec.java``) takes the spec with every duration already in
milliseconds, so durations are read in one place (``statekit.durations``); the watermark
delay becomes the windows' grace period, the closest Kafka Streams idea: a record later than
the grace (behind the task's stream time) is dropped, as Spark drops one behind the watermark.

Example:
    >>> from statekit.model.query_spec import QuerySpec, tumbling
    >>> app_spec(QuerySpec(keys=["player"], window=tumbling("10 minutes"),
    ...                    aggregates=["count", "max(score)"]))["window"]
    {'kind': 'tumbling', 'size_ms': 600000, 'slide_ms': 600000}
    >>> app_spec(QuerySpec(keys=["player"], window=None, ttl="1 hour"))
    Traceback (most recent call last):
    ...
    statekit.errors.BadArgument: bad ttl of a spec for the Kafka Streams app: '1 hour'; \
accepted: None (a Kafka Streams aggregate keeps each key until a tombstone; the app has no \
time-to-live)
"""

from __future__ import annotations

from collections.abc import Mapping

from statekit.durations import to_millis
from statekit.errors import BadArgument
from statekit.model.query_spec import QuerySpec


def as_query_spec(spec: QuerySpec | Mapping) -> QuerySpec:
    """``spec``, or the QuerySpec its ``to_dict`` form describes."""
    if isinstance(spec, QuerySpec):
        return spec
    if isinstance(spec, Mapping):
        return QuerySpec.from_dict(spec)
    raise BadArgument("spec", spec, "a QuerySpec (statekit.QuerySpec) or its to_dict() form")


def app_spec(spec: QuerySpec | Mapping) -> dict:
    """The JSON the Java application reads; a BadArgument naming the part of ``spec`` it
    cannot express."""
    spec = as_query_spec(spec)
    if spec.ttl is not None:
        raise BadArgument("ttl of a spec for the Kafka Streams app", spec.ttl,
                          "None (a Kafka Streams aggregate keeps each key until a tombstone; "
                          "the app has no time-to-live)")
    window = None
    if spec.window is not None:
        size = to_millis(spec.window.size)
        window = {"kind": spec.window.kind, "size_ms": size,
                  "slide_ms": to_millis(spec.window.slide) if spec.window.slide else size}
    return {"keys": list(spec.keys), "event_time": spec.event_time, "window": window,
            "grace_ms": to_millis(spec.watermark),
            "max_event_time_ahead_ms": spec.max_event_time_ahead_ms,
            "aggregates": [{"function": a.function, "column": a.column}
                           for a in spec.aggregates]}
