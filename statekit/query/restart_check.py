"""Will a changed query start on this checkpoint? Answered before anything runs.

Spark answers only by failing the restarted query's first batch: it compares the state each
stateful operator would keep with the schemas it wrote on the first run
(``statekit.spark_state.state_schema``) and the operator with the one its metadata names. Some
changes it accepts though they change what the state means, and some settings it silently keeps
from the checkpoint. ``check_restart`` predicts all three from the checkpoint's files and the
new ``QuerySpec``; ``start_query`` runs it first and refuses a restart Spark would fail.

What Spark 4 does, per change (each checked against real restarts in the tests):

- a key column added, removed or retyped, or no window instead of one: it fails
  (``STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE``);
- an aggregate added, removed or retyped (``sum`` → ``avg``; two aggregates of different types
  swapped): it fails (``STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE``);
- another kind of window (tumbling → session), a TTL added: it fails
  (``STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA``);
- a key column renamed (same type): it starts, and reads the old keys as the new column's;
- two aggregates of one type swapped, or an aggregated column changed for another of its type:
  it starts, and reads the old values as the new aggregates' (statekit names it from the spec
  it recorded at the last start);
- the window's size or slide: it starts; the old windows keep their bounds;
- ``spark.sql.shuffle.partitions``, the state store provider: kept from the checkpoint, the
  new value ignored.

Example:
    >>> check = check_restart(spec, "/tmp/ck", event_schema=games.schema)  # doctest: +SKIP
    >>> check.compatible, check.findings[["verdict", "what"]]             # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import (
    BooleanType,
    ByteType,
    DataType,
    DecimalType,
    DoubleType,
    IntegerType,
    LongType,
    ShortType,
    StructField,
    StructType,
    TimestampType,
)

from statekit.atomic import write_atomic
from statekit.errors import BadArgument, CheckpointError, IncompatibleRestart
from statekit.model.query_spec import QuerySpec
from statekit.spark_state.checkpoint import DEFAULT_STORE, Checkpoint
from statekit.spark_state.state_schema import (
    ColumnFamilySchema,
    same_shape,
    stored_state_schema,
    type_text,
)

FINDING_COLUMNS = ["verdict", "what", "stored", "new", "spark", "remedy"]
#: the verdicts, from worst: Spark fails the restart; Spark starts but the state's meaning
#: changes; Spark starts and ignores the new setting
REFUSED, MEANING_CHANGES, KEPT = "refused", "meaning changes", "kept from checkpoint"
NEW_CHECKPOINT = ("start on a new checkpoint (checkpoint=<a new folder>): the query then reads "
                  "its input again from starting_offsets and rebuilds its state")
_WINDOW = StructType([StructField("start", TimestampType()), StructField("end", TimestampType())])
_INTEGRAL = (ByteType, ShortType, IntegerType, LongType)
#: the stateful operator Spark plans for each kind of statekit query (its metadata's name)
OPERATORS = {"tumbling": "stateStoreSave", "hopping": "stateStoreSave",
             "running": "stateStoreSave", "session": "sessionWindowStateStoreSaveExec",
             "running with ttl": "transformWithStateInPandasExec"}
#: what each operator of ``OPERATORS`` computes, in the person's words
_KINDS = {"stateStoreSave": "an aggregation per time window, or running without a TTL",
          "sessionWindowStateStoreSaveExec": "an aggregation per session window",
          "transformWithStateInPandasExec": "a running aggregation with a TTL"}
_SHUFFLE, _PROVIDER = "spark.sql.shuffle.partitions", \
    "spark.sql.streaming.stateStore.providerClass"


@dataclass(frozen=True)
class PlannedState:
    """The state Spark will keep for a statekit query: its operator's name and the key and
    value schema of its store (a transformWithState variable's for a running aggregate with a
    TTL)."""

    operator: str
    family: str
    key: StructType
    value: StructType
    #: each value field in the person's words: the aggregate it belongs to
    #: (``avg(dep_delay): sum``), a key column, the session window
    value_labels: tuple[str, ...] = ()

    def value_text(self) -> str:
        """The value's fields as ``<label> <type>``."""
        if len(self.value_labels) != len(self.value.fields):
            return _names(self.value)
        return ", ".join(f"{label} {type_text(f.dataType)}"
                         for label, f in zip(self.value_labels, self.value.fields, strict=True))


def planned_state(spec: QuerySpec, columns: StructType) -> PlannedState:
    """What ``aggregate(events, spec)`` keeps in its state, for events of ``columns``.

    Spark's aggregations keep each aggregate's buffer: ``count`` a bigint, ``sum`` a bigint
    of whole numbers (a double of fractions; a wider decimal and an ``isEmpty`` flag of
    decimals), ``avg`` a sum and a count, ``min`` and ``max`` the column's type.

    Example:
        >>> from pyspark.sql.types import StringType
        >>> from statekit.model.query_spec import tumbling
        >>> spec = QuerySpec(keys=["player"], window=tumbling("10 minutes"),
        ...                  aggregates=["count", "avg(score)"])
        >>> state = planned_state(spec, StructType([StructField("player", StringType()),
        ...                                          StructField("score", LongType()),
        ...                                          StructField("ts", TimestampType())]))
        >>> state.operator, type_text(state.key), type_text(state.value)
        ('stateStoreSave', 'struct<window:struct<start:timestamp,end:timestamp>,player:string>', \
'struct<count:bigint,sum:double,count:bigint>')
    """
    types = {f.name: f.dataType for f in columns.fields}
    keys = [StructField(k, types[k]) for k in spec.keys]
    if spec.kind == "running" and spec.ttl is not None:
        from statekit.spark_state.running_aggregate import STATE_NAME, buffer_fields

        by_text = {kind.simpleString(): kind for kind in [*types.values(), LongType(),
                                                          DoubleType()]}
        buffer = StructType([StructField(name, by_text[kind]) for name, kind in
                             buffer_fields(spec, {n: t.simpleString() for n, t in
                                                  types.items()})])
        return PlannedState(OPERATORS["running with ttl"], STATE_NAME, StructType(keys),
                            StructType([StructField("value", buffer),
                                        StructField("ttlExpirationMs", LongType())]))
    buffer, labels = [], []
    for agg in spec.aggregates:
        fields = _buffer(agg.function, types.get(agg.column))
        buffer += fields
        labels += [agg.text] if len(fields) == 1 else [f"{agg.text}: {f.name}" for f in fields]
    if spec.kind == "session":
        return PlannedState(OPERATORS["session"], DEFAULT_STORE,
                            StructType([*keys, StructField("sessionStartTime", TimestampType())]),
                            StructType([StructField("session_window", _WINDOW), *keys, *buffer]),
                            ("session_window", *spec.keys, *labels))
    window = [] if spec.kind == "running" else [StructField("window", _WINDOW)]
    return PlannedState(OPERATORS[spec.kind], DEFAULT_STORE, StructType([*window, *keys]),
                        StructType(buffer), tuple(labels))


def _buffer(function: str, column: DataType | None) -> list[StructField]:
    """The fields of one built-in aggregate's buffer (Spark's ``aggBufferAttributes``)."""
    if function == "count":
        return [StructField("count", LongType())]
    if isinstance(column, DecimalType):
        wide = DecimalType(min(38, column.precision + 10), column.scale)
        if function == "sum":
            return [StructField("sum", wide), StructField("isEmpty", BooleanType())]
        if function == "avg":
            return [StructField("sum", wide), StructField("count", LongType())]
    if function == "sum":
        return [StructField("sum", LongType() if isinstance(column, _INTEGRAL)
                            else DoubleType())]
    if function == "avg":
        return [StructField("sum", DoubleType()), StructField("count", LongType())]
    return [StructField(function, column)]


@dataclass
class RestartCheck:
    """What Spark will do when the query restarts on ``checkpoint``.

    ``compatible``: Spark will start it (no finding ``refused``). ``findings``: one row per
    change Spark refuses, accepts with another meaning, or ignores (``FINDING_COLUMNS``: the
    verdict, what changed, its stored and new form, what Spark says or does, what to do).
    """

    checkpoint: str
    findings: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(
        columns=FINDING_COLUMNS))

    @property
    def refused(self) -> pd.DataFrame:
        """The findings Spark fails the restart for."""
        return self.findings[self.findings["verdict"] == REFUSED]

    @property
    def compatible(self) -> bool:
        return self.refused.empty

    def require(self) -> RestartCheck:
        """This check, or IncompatibleRestart with its findings when Spark would fail."""
        if not self.compatible:
            raise IncompatibleRestart(self)
        return self

    def __str__(self) -> str:
        head = (f"the query {'can' if self.compatible else 'cannot'} restart on "
                f"{self.checkpoint!r}")
        lines = [f"- {r.verdict}: {r.what} (stored: {r.stored}; new: {r.new}); Spark: {r.spark}."
                 f" To do: {r.remedy}" for r in self.findings.itertuples()]
        return "\n".join([head + (":" if lines else ""), *lines])

    def _repr_html_(self) -> str:
        return f"<p>{str(self).splitlines()[0]}</p>" + self.findings.to_html(index=False)


def check_restart(new: QuerySpec | DataFrame, checkpoint: str | os.PathLike | Checkpoint, *,
                  event_schema: str | StructType | None = None,
                  spark: SparkSession | None = None, output_mode: str | None = None,
                  timeout: float = 300.0) -> RestartCheck:
    """What Spark will do when ``new`` starts on ``checkpoint``, answered before it starts.

    A ``QuerySpec`` is compared with the checkpoint's files (no Spark job): the state it
    would keep against the stored schemas, and the spec statekit recorded at the last start
    for the changes Spark accepts silently. A streaming DataFrame (a person's own query, a
    processor's: ``statekit.check_restart`` takes a ``Processor`` too) is rehearsed: started
    on a scratch copy of the checkpoint, re-running its last committed batch into the noop
    sink (``restart_rehearsal``), so the verdict is Spark's own; the checkpoint is not written.

    Args:
        new: the query about to start: a ``QuerySpec`` or a streaming DataFrame.
        checkpoint: where it would restart; a folder without state is a fresh start (no
            findings).
        event_schema: a spec's events' schema (Spark DDL or a StructType), as given to
            ``start_query``; None: ``spec.default_event_schema()``.
        spark: the session a spec would run in (its shuffle partitions and state store
            provider are compared with the checkpoint's); None: the active one. A DataFrame
            runs in its own.
        output_mode: a DataFrame's output mode (``append``, Spark's default, ``update``,
            ``complete``).
        timeout: seconds a DataFrame's rehearsal batch may take.

    Example:
        >>> check = check_restart(QuerySpec(["team"], tumbling("1 minute")),  # doctest: +SKIP
        ...                       q.checkpoint)
        >>> check.compatible                                              # doctest: +SKIP
        True
    """
    from statekit.query.parsing import event_struct
    from statekit.spark.session import spark_session

    if isinstance(new, DataFrame):
        from statekit.query.restart_rehearsal import rehearse_restart

        if event_schema is not None:
            raise BadArgument("event_schema", event_schema,
                              "None for a DataFrame (it has its own columns)")
        return rehearse_restart(new, checkpoint, output_mode=output_mode or "append",
                                timeout=timeout)
    if not isinstance(new, QuerySpec):
        raise BadArgument("new", new, "a QuerySpec or a streaming DataFrame (the query about "
                          "to start), or a Processor (statekit.check_restart)")
    if output_mode is not None:
        raise BadArgument("output_mode", output_mode,
                          "None for a QuerySpec (its kind decides: start_query's rule)")
    checkpoint = Checkpoint(checkpoint)
    spark = spark or spark_session()
    columns = event_struct(event_schema if event_schema is not None
                           else new.default_event_schema())
    return compare(new, columns, checkpoint, session_settings(spark))


def session_settings(spark: SparkSession) -> dict[str, str]:
    """The settings of ``spark`` a restart takes from the checkpoint instead."""
    return {key: spark.conf.get(key) for key in (_SHUFFLE, _PROVIDER)}


def compare(spec: QuerySpec, columns: StructType, checkpoint: Checkpoint,
            conf: dict[str, str]) -> RestartCheck:
    """``check_restart`` once the new side is known: events of ``columns``, session ``conf``."""
    check = RestartCheck(str(checkpoint.path))
    batches = checkpoint.committed_batches()
    if not batches or 0 not in checkpoint.operator_ids():
        return check
    rows: list[dict] = []
    planned = planned_state(spec, columns)
    stored_operator = _stored_operator(checkpoint)
    if stored_operator is not None and stored_operator != planned.operator:
        rows.append(_row(REFUSED, "the stateful operator",
                         f"{stored_operator} ({_KINDS.get(stored_operator, 'another')})",
                         f"{planned.operator} ({_KINDS[planned.operator]})",
                         "STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA",
                         f"{NEW_CHECKPOINT}; or keep the old kind of query "
                         f"({_KINDS.get(stored_operator, stored_operator)})"))
    else:
        families = {f.name: f for f in stored_state_schema(checkpoint)}
        if planned.family in families:
            rows += _schema_rows(families[planned.family], planned, spec,
                                 _recorded(checkpoint))
    rows += conf_rows(checkpoint, batches[-1], conf)
    if rows:
        check.findings = pd.DataFrame(rows, columns=FINDING_COLUMNS)
    return check


def _row(verdict: str, what: str, stored: str, new: str, spark: str, remedy: str) -> dict:
    return dict(zip(FINDING_COLUMNS, (verdict, what, stored, new, spark, remedy), strict=True))


def _stored_operator(checkpoint: Checkpoint) -> str | None:
    files = checkpoint.operator_metadata_files(0)
    if not files:
        return None
    _, meta = checkpoint.operator_metadata(files[-1])
    return (meta.get("operatorInfo") or {}).get("operatorName")


def _names(struct: StructType) -> str:
    return ", ".join(f"{f.name} {type_text(f.dataType)}" for f in struct.fields)


def _schema_rows(stored: ColumnFamilySchema, planned: PlannedState, spec: QuerySpec,
                 recorded: tuple[QuerySpec, StructType] | None) -> list[dict]:
    rows = []
    old_spec = recorded[0] if recorded else None
    if not same_shape(stored.key, planned.key):
        rows.append(_row(REFUSED, "the state's key", _names(stored.key), _names(planned.key),
                         "STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE",
                         f"{NEW_CHECKPOINT}; or keep the old key columns"
                         + (f" ({', '.join(old_spec.keys)})" if old_spec else "")))
    else:
        pairs = zip(stored.key.fields, planned.key.fields, strict=True)
        renamed = [(a.name, b.name) for a, b in pairs
                   if a.name != b.name and a.name not in ("window", "sessionStartTime")]
        if renamed:
            listed = ", ".join(f"{old} → {new}" for old, new in renamed)
            rows.append(_row(MEANING_CHANGES, f"a key column renamed ({listed})",
                             _names(stored.key), _names(planned.key), "accepts (same types)",
                             "if the new column holds other values than the old one, "
                             f"{NEW_CHECKPOINT}; if only its name changed, nothing"))
    if not same_shape(stored.value, planned.value):
        old = ", ".join(a.text for a in old_spec.aggregates) if old_spec else \
            _names(stored.value)
        before = planned_state(*recorded) if recorded else None
        stored_text = before.value_text() if before is not None and \
            same_shape(before.value, stored.value) else _names(stored.value)
        rows.append(_row(REFUSED, "the state's value (the aggregates' buffers)",
                         stored_text, planned.value_text(),
                         "STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE",
                         f"{NEW_CHECKPOINT}; or keep the old aggregates ({old}) and compute the "
                         f"new ones in a second query"))
    elif old_spec is not None:
        pairs = zip(old_spec.aggregates, spec.aggregates, strict=False)
        changed = [(a.text, b.text) for a, b in pairs
                   if a.text != b.text]
        if changed:
            listed = ", ".join(f"{old} → {new}" for old, new in changed)
            rows.append(_row(MEANING_CHANGES, f"aggregates changed for others of the same "
                             f"type ({listed})",
                             ", ".join(a.text for a in old_spec.aggregates),
                             ", ".join(a.text for a in spec.aggregates),
                             "accepts (same types): the stored values are read as the new "
                             "aggregates'", NEW_CHECKPOINT))
    if old_spec is not None and old_spec.window is not None and spec.window is not None \
            and old_spec.window != spec.window and not any(r["verdict"] == REFUSED
                                                           for r in rows):
        rows.append(_row(MEANING_CHANGES, "the window", _window_text(old_spec),
                         _window_text(spec), "accepts: the stored windows keep their old "
                         "bounds until the watermark passes them; new events go to the new "
                         "windows", f"if results must not mix the two, {NEW_CHECKPOINT}"))
    return rows


def _window_text(spec: QuerySpec) -> str:
    return ", ".join(f"{k} {v}" for k, v in spec.window.to_dict().items())


def conf_rows(checkpoint: Checkpoint, last_batch: int, conf: dict[str, str]) -> list[dict]:
    stored = checkpoint.offset_metadata(last_batch).get("conf") or {}
    rows = []
    for key, what in ((_SHUFFLE, "state partitions (spark.sql.shuffle.partitions)"),
                      (_PROVIDER, "the state store provider")):
        old, new = stored.get(key), conf.get(key)
        if old is not None and new is not None and old != new:
            rows.append(_row(KEPT, what, old, new, f"keeps {old} from the checkpoint",
                             f"to use {new}, {NEW_CHECKPOINT}"))
    return rows


def _recorded(checkpoint: Checkpoint) -> tuple[QuerySpec, StructType] | None:
    """The spec and input columns ``record_query`` wrote at the last start (None: not
    started by statekit, or by one that did not record it)."""
    try:
        data = json.loads(checkpoint.query_spec_path.read_text("utf-8"))
        return QuerySpec.from_dict(data["spec"]), StructType.fromJson(data["columns"])
    except (OSError, ValueError, KeyError, TypeError, BadArgument):
        return None


def record_query(checkpoint: Checkpoint, spec: QuerySpec, columns: StructType) -> None:
    """Keep ``spec`` and its input's ``columns`` beside the checkpoint for the next
    ``check_restart``."""
    write_atomic(checkpoint.query_spec_path,
                 json.dumps({"spec": spec.to_dict(), "columns": columns.jsonValue()}))


def require_restartable(spec: QuerySpec, columns: StructType, checkpoint: Checkpoint,
                        conf: dict[str, str]) -> RestartCheck | None:
    """``compare``, raising IncompatibleRestart with its findings when Spark would fail; None
    when a file it reads is damaged (left to what reads it next: Spark names it at start)."""
    try:
        check = compare(spec, columns, checkpoint, conf)
    except CheckpointError:
        return None
    return check.require()
