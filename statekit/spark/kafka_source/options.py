"""The Kafka source's options: the cluster and its client settings, the topics, the flags,
the schema of the values (offset options: ``offsets``).

Spark hands a reader its options with their keys lower-cased.

Example:
    >>> client_settings({"kafka.bootstrap.servers": "b:9092", "kafka.fetch.max.bytes": "1"})
    ('b:9092', {'fetch.max.bytes': '1'})
    >>> subscribed_topics({"subscribe": "games, scores"})
    ['games', 'scores']
    >>> bool_option({"failondataloss": "maybe"}, "failOnDataLoss", True)
    Traceback (most recent call last):
    ...
    statekit.errors.BadArgument: bad option failOnDataLoss: 'maybe'; accepted: true, false
"""

from __future__ import annotations

import json

from pyspark.sql.types import StructType

from statekit.errors import BadArgument


def client_settings(options: dict[str, str]) -> tuple[str, dict[str, str]]:
    """The option ``kafka.bootstrap.servers``, and the other ``kafka.*`` settings (prefix
    dropped) for librdkafka."""
    servers = options.get("kafka.bootstrap.servers")
    if not servers:
        raise BadArgument("option kafka.bootstrap.servers", servers, "a 'host:port[,host:port]'")
    extra = {k[len("kafka."):]: v for k, v in options.items()
             if k.startswith("kafka.") and k != "kafka.bootstrap.servers"}
    return servers, extra


def subscribed_topics(options: dict[str, str]) -> list[str]:
    """The topics of option ``subscribe`` (comma separated)."""
    topics = [t.strip() for t in options.get("subscribe", "").split(",") if t.strip()]
    if not topics:
        raise BadArgument("option subscribe", options.get("subscribe"),
                          "one or more topic names, comma separated")
    return topics


def value_schema_option(options) -> str | StructType | None:
    """Option valueSchema: None, a DDL string, or a StructType given as JSON."""
    raw = {k.lower(): v for k, v in options.items()}.get("valueschema")
    if raw is None or not str(raw).strip():
        return None
    raw = str(raw).strip()
    if not raw.startswith("{"):
        return raw
    try:
        struct = StructType.fromJson(json.loads(raw))
    except (ValueError, KeyError, TypeError, AttributeError):
        raise BadArgument("option valueSchema", raw,
                          "Spark DDL like 'player string, ts timestamp', or "
                          "StructType.json()") from None
    return struct


def bool_option(options: dict[str, str], name: str, default: bool) -> bool:
    """Option ``name`` (``true`` or ``false``, any case), ``default`` when not given."""
    raw = options.get(name.lower())
    if raw is None:
        return default
    if str(raw).lower() not in ("true", "false"):
        raise BadArgument(f"option {name}", raw, "true, false")
    return str(raw).lower() == "true"
