"""The REST service's models: its answers, the body of ``POST /assignment``, and the query
parameters of each query route (FastAPI lists a query model's fields as query parameters,
each validated and documented as it is declared here).

Example:
    >>> FetchQuery(key='{"player": "p07"}', time_from="2026-01-05T10:00Z",
    ...            time_to="1767607200000").timeout
    0.0
    >>> [name for name in RangeQuery.model_fields][:3]
    ['key_from', 'key_to', 'limit']
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from statekit.serve.rest.limits import DEFAULT_LIMIT, MAX_ID, MAX_WAIT, PARTITIONS
from statekit.serve.results import MAX_LIMIT
from statekit.serve.routing.key_text import MAX_KEY_CHARS


# --- answers -----------------------------------------------------------------------------
class PartitionModel(BaseModel):
    partition: int
    instance: str
    role: str
    batch: int
    lag_batches: int
    seconds: float
    state: str


class ResultModel(BaseModel):
    """A query's answer: rows, and per partition who answered at which batch."""

    kind: str
    rows: list[dict[str, Any]]
    partitions: list[PartitionModel]
    missing: list[int]


class ErrorDetail(BaseModel):
    """What went wrong: the error's name, a message naming the bad value, and its facts."""

    model_config = ConfigDict(extra="allow")
    error: str
    message: str


class ErrorModel(BaseModel):
    detail: ErrorDetail


class HealthModel(BaseModel):
    status: str
    instance: str


# --- POST /assignment ----------------------------------------------------------------------
PartitionKey = Annotated[str, StringConstraints(pattern=r"^[0-9]{1,6}$")]
NO_OTHER_KEYS = {"additionalProperties": False}


class AssignmentData(BaseModel):
    """An assignment as ``Assignment.to_dict()`` writes it."""

    active: dict[PartitionKey, str] = Field(json_schema_extra=NO_OTHER_KEYS)
    standbys: dict[PartitionKey, list[str]] = Field(json_schema_extra=NO_OTHER_KEYS)
    instances: list[str] = Field(min_length=1)
    version: int = Field(ge=1, le=MAX_ID)
    lost: list[Annotated[int, Field(ge=0, le=999_999)]] = []


class AssignmentModel(BaseModel):
    assignment: AssignmentData
    urls: dict[str, str]


class AssignmentAnswer(BaseModel):
    instance: str
    version: int
    held: dict[str, str]


# --- query parameters ----------------------------------------------------------------------
KEY_DOC = 'the key as a JSON object, e.g. {"player": "p07", "window_start": "2026-01-05T10:00Z"}'
TIME_DOC = "milliseconds since the epoch or ISO-8601 text"

KeyText = Annotated[str, Field(max_length=MAX_KEY_CHARS, description=KEY_DOC)]
OptionalKeyText = Annotated[str | None, Field(max_length=MAX_KEY_CHARS, description=KEY_DOC)]
TimeText = Annotated[str, Field(max_length=64, description=TIME_DOC,
                                examples=["2026-01-05T10:00:00Z", "1767607200000"])]
MinBatch = Annotated[int | None, Field(
    ge=0, le=MAX_ID, description="answer only once the store reflects at least this batch")]
Wait = Annotated[float, Field(ge=0.0, le=MAX_WAIT, description=(
    "seconds to wait for min_batch (the wait holds no thread: any number may wait)"))]
Local = Annotated[bool, Field(description="answer from this instance's partitions only "
                                          "(routers)")]
Partitions = Annotated[str | None, Field(
    pattern=PARTITIONS, max_length=4096,
    description="comma-separated partitions to read (with local=true; a routed query reads "
                "every partition it needs)")]
Partial = Annotated[bool, Field(description="answer without partitions no live instance holds "
                                            "(listed in missing) instead of failing")]
Limit = Annotated[int, Field(ge=1, le=MAX_LIMIT, description="most rows in the answer")]


class LookupQuery(BaseModel):
    """``GET /stores/{name}/get``: one state row by its full key."""

    key: KeyText
    min_batch: MinBatch = None
    timeout: Wait = 0.0
    local: Local = False


class FetchQuery(BaseModel):
    """``GET /stores/{name}/fetch``: a key's windows starting in [time_from, time_to]."""

    key: KeyText
    time_from: TimeText
    time_to: TimeText
    min_batch: MinBatch = None
    timeout: Wait = 0.0
    partitions: Partitions = None
    local: Local = False


class FindSessionsQuery(BaseModel):
    """``GET /stores/{name}/find_sessions``: a key's sessions within the given ends."""

    key: KeyText
    earliest_end: TimeText
    latest_start: TimeText
    min_batch: MinBatch = None
    timeout: Wait = 0.0
    partitions: Partitions = None
    local: Local = False


class AllQuery(BaseModel):
    """``GET /stores/{name}/all``: every state row."""

    limit: Limit = DEFAULT_LIMIT
    min_batch: MinBatch = None
    timeout: Wait = 0.0
    partitions: Partitions = None
    local: Local = False
    partial: Partial = False


class FetchAllQuery(BaseModel):
    """``GET /stores/{name}/fetch_all``: every window starting in [time_from, time_to]."""

    time_from: TimeText
    time_to: TimeText
    limit: Limit = DEFAULT_LIMIT
    min_batch: MinBatch = None
    timeout: Wait = 0.0
    partitions: Partitions = None
    local: Local = False
    partial: Partial = False


class FetchRangeQuery(BaseModel):
    """``GET /stores/{name}/fetch_range``: windows of a range of keys, in a range of time."""

    time_from: TimeText
    time_to: TimeText
    key_from: OptionalKeyText = None
    key_to: OptionalKeyText = None
    limit: Limit = DEFAULT_LIMIT
    min_batch: MinBatch = None
    timeout: Wait = 0.0
    partitions: Partitions = None
    local: Local = False
    partial: Partial = False


class RangeQuery(BaseModel):
    """``GET /stores/{name}/range``: a range of keys of a key-value store."""

    key_from: OptionalKeyText = None
    key_to: OptionalKeyText = None
    limit: Limit = DEFAULT_LIMIT
    min_batch: MinBatch = None
    timeout: Wait = 0.0
    partitions: Partitions = None
    local: Local = False
    partial: Partial = False


class WholeStoreQuery(BaseModel):
    """``GET /stores/{name}/table`` and ``/position``: every partition, once at min_batch."""

    min_batch: MinBatch = None
    timeout: Wait = 0.0
    partitions: Partitions = None
    local: Local = False
    partial: Partial = False


class CountQuery(BaseModel):
    """``GET /stores/{name}/approximate_num_entries``: no wait, no rows."""

    partitions: Partitions = None
    local: Local = False
    partial: Partial = False


def top_k_query(values: list[str], globals_held: list[str]) -> type[BaseModel]:
    """The query model of ``GET /stores/{name}/top_k`` of a store whose value columns are
    ``values``, on an instance holding the global stores ``globals_held`` (each listed in
    the schema)."""

    class TopKQuery(BaseModel):
        window_start: str | None = Field(None, max_length=64, description=(
            "the window (milliseconds since the epoch or ISO-8601 text); left out for a "
            "running aggregate, which has no windows"), examples=["2026-01-05T10:00:00Z"])
        k: int = Field(10, ge=1, le=MAX_LIMIT)
        by: str = Field(max_length=256, json_schema_extra={"enum": values},
                        description=f"the value column to rank by ({', '.join(values)})")
        min_batch: MinBatch = None
        timeout: Wait = 0.0
        partitions: Partitions = None
        local: Local = False
        partial: Partial = False
        enrich: str | None = Field(None, max_length=256, json_schema_extra={
            "enum": globals_held or ["(none)"]}, description=(
            "a global store whose entries' columns are added to each row"))

    return TopKQuery
