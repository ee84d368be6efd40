"""How a query reads its input and how it runs: ``SourceOptions`` and ``RunOptions``.

``start_query`` and ``start_processor`` take these two objects (and a ``QuerySpec`` or a
processor for what to compute); a worker process receives them as JSON (``to_dict`` /
``from_dict``). Values are checked when an object is built, so a bad one fails before
Spark starts, naming the field and what it accepts.

Example:
    >>> source = SourceOptions(kafka="127.0.0.1:9092", max_offsets_per_trigger=500)
    >>> run = RunOptions(name="board", trigger="1 second", sink="memory")
    >>> SourceOptions.from_dict(source.to_dict()) == source
    True
    >>> run.trigger_kwargs()
    {'processingTime': '1000 milliseconds'}
    >>> RunOptions(sink="parquet")
    Traceback (most recent call last):
    ...
    statekit.errors.BadArgument: bad sink: 'parquet'; accepted: noop, memory, console
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from statekit.durations import spark_interval
from statekit.errors import BadArgument
from statekit.model.connection import KafkaConnection, connect
from statekit.options.base import Options, codec
from statekit.validate import flag, optional_whole_number

SINKS = ("noop", "memory", "console")
OUTPUT_MODES = ("update", "append")
TRIGGER_ACCEPTED = "a micro-batch interval such as '1 second', or 'available-now'"


def _encode_schema(schema: Any) -> Any:
    """An event schema as JSON-ready data: DDL text as it is, a StructType as its JSON."""
    return schema if isinstance(schema, str) else {"struct": schema.jsonValue()}


def _decode_schema(data: Any) -> Any:
    if isinstance(data, Mapping) and "struct" in data:
        from pyspark.sql.types import StructType

        return StructType.fromJson(data["struct"])
    return data


@dataclass(frozen=True)
class SourceOptions(Options):
    """Where a query reads and how much: the cluster, the events' schema, the offsets.

    Args:
        kafka: the Kafka cluster (a ``KafkaConnection``, ``"host:port"`` or an
            ``EmbeddedBroker``); required when the source is a topic or a changelog is kept.
        event_schema: the JSON events' schema (Spark DDL or a StructType); None: the
            query's default (``QuerySpec.default_event_schema()``).
        required_fields: fields besides the group keys and the event time an event cannot
            do without (missing or null: malformed).
        starting_offsets: ``earliest`` (default), ``latest`` or JSON like
            ``{"topic": {"0": 42}}``.
        ending_offsets: JSON like ``{"topic": {"0": 500}}``: read up to there, then wait
            (statekit's Kafka source only).
        max_offsets_per_trigger: at most this many records a batch (None: no limit).
        fail_on_data_loss: fail when offsets were deleted before they were read.
    """

    kafka: KafkaConnection | None = field(
        default=None, metadata=codec(KafkaConnection.to_dict, KafkaConnection.from_dict))
    event_schema: Any = field(default=None, metadata=codec(_encode_schema, _decode_schema))
    required_fields: tuple[str, ...] = ()
    starting_offsets: str = "earliest"
    ending_offsets: str | None = None
    max_offsets_per_trigger: int | None = None
    fail_on_data_loss: bool = True

    def __post_init__(self):
        if self.kafka is not None:
            object.__setattr__(self, "kafka", connect(self.kafka))
        schema = self.event_schema
        if schema is not None and not isinstance(schema, str) and not hasattr(schema,
                                                                                "fieldNames"):
            raise BadArgument("event_schema", schema, "Spark DDL text or a StructType")
        required = self.required_fields
        if isinstance(required, str):
            required = [required]
        if not isinstance(required, Sequence) or not all(isinstance(f, str) for f in required):
            raise BadArgument("required_fields", required, "a list of field names")
        object.__setattr__(self, "required_fields", tuple(required))
        offsets = self.starting_offsets
        if not isinstance(offsets, str) or not (
                offsets in ("earliest", "latest") or offsets.startswith("{")):
            raise BadArgument("starting_offsets", offsets,
                              'earliest, latest, or JSON like {"topic": {"0": 42}}')
        if self.ending_offsets is not None and not (
                isinstance(self.ending_offsets, str) and self.ending_offsets.startswith("{")):
            raise BadArgument("ending_offsets", self.ending_offsets,
                              'None, or JSON like {"topic": {"0": 500}}')
        object.__setattr__(self, "max_offsets_per_trigger", optional_whole_number(
            self.max_offsets_per_trigger, "max_offsets_per_trigger", minimum=1,
            accepted="a positive whole number of records, or None for no limit"))
        object.__setattr__(self, "fail_on_data_loss",
                           flag(self.fail_on_data_loss, "fail_on_data_loss"))


def _trigger_kwargs(trigger: object) -> dict:
    """``DataStreamWriter.trigger``'s keyword arguments for a trigger such as "1 second"."""
    if trigger == "available-now":
        return {"availableNow": True}
    if not isinstance(trigger, str):
        raise BadArgument("trigger", trigger, TRIGGER_ACCEPTED)
    return {"processingTime": spark_interval(trigger, "trigger interval")}


@dataclass(frozen=True)
class RunOptions(Options):
    """How a query runs: its name, checkpoint, trigger, sink and changelog.

    Args:
        name: the query's name (None: the starter's default, ``statekit`` for
            ``start_query``, ``processor`` for ``start_processor``).
        checkpoint: the checkpoint directory (a new temp dir when None); the same one
            again resumes exactly where the query stopped.
        trigger: a micro-batch interval such as "1 second", or "available-now".
        sink: where result rows go: noop (default), memory (a table named ``name``), console.
        output_mode: ``update`` or ``append``; None: the query's default (``append`` for
            sessions and processors, else ``update``).
        changelog: ship every committed state change to the topic
            ``<name>-<store_name>-changelog``; None: on when a Kafka cluster is given
            (``start_query`` only).
        store_name: the store's name in its changelog topic.
        changelog_topic_config: topic settings of a changelog topic statekit creates, over
            its own (``statekit.changelog.naming``: the policy, a windowed store's
            retention, and ``QUICK_CLEANING``, the laptop's cleaner pace): a real
            cluster's pace, e.g. ``{"segment.ms": "3600000", "delete.retention.ms":
            "86400000"}``.
    """

    name: str | None = None
    checkpoint: str | None = None
    trigger: str = "500 milliseconds"
    sink: str = "noop"
    output_mode: str | None = None
    changelog: bool | None = None
    store_name: str = "aggregate"
    changelog_topic_config: Mapping[str, object] | None = None

    def __post_init__(self):
        if self.name is not None and (not isinstance(self.name, str) or not self.name):
            raise BadArgument("query name", self.name, "a non-empty name, or None")
        if self.checkpoint is not None:
            if not isinstance(self.checkpoint, (str, os.PathLike)):
                raise BadArgument("checkpoint", self.checkpoint, "a folder path, or None")
            object.__setattr__(self, "checkpoint", os.fspath(self.checkpoint))
        _trigger_kwargs(self.trigger)
        if self.sink not in SINKS:
            raise BadArgument("sink", self.sink, SINKS)
        if self.output_mode is not None and self.output_mode not in OUTPUT_MODES:
            raise BadArgument("output mode", self.output_mode, OUTPUT_MODES)
        if self.changelog is not None and not isinstance(self.changelog, bool):
            raise BadArgument("changelog", self.changelog, "True, False or None")
        if not isinstance(self.store_name, str) or not self.store_name:
            raise BadArgument("store_name", self.store_name, "a non-empty store name")
        settings = self.changelog_topic_config
        if settings is not None and not (isinstance(settings, Mapping) and all(
                isinstance(k, str) and k and isinstance(v, (str, int, float)) and
                not isinstance(v, bool) for k, v in settings.items())):
            raise BadArgument("changelog_topic_config", settings,
                              "a mapping of Kafka topic setting names to values (strings or "
                              "numbers), or None")

    def trigger_kwargs(self) -> dict:
        """``DataStreamWriter.trigger``'s keyword arguments for ``trigger``."""
        return _trigger_kwargs(self.trigger)
