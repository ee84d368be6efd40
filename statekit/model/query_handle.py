"""The verbs every statekit query handle answers, whichever way the query came to be.

``start_query`` gives a ``StatefulQuery``, ``start_processor`` a ``ProcessorQuery`` and
``attach`` an ``AttachedQuery``; each is a ``QueryHandle``: the same names and arguments
for its parts (``parts()``: a part is one store of one stateful operator), a part's reader
(``state``), its snapshot and change feed, its changelog topics and their records, the
query's progress, a description, waiting for batches, and ``close()``. A handle whose query
has one part needs no part argument; one with several names them in the error.

Spark keeps one state store per stateful operator and partition, and statekit calls each
store an operator keeps (an aggregation has one, a stream-stream join four, a processor
one per state variable) a part; Kafka Streams' closest word is a state store.

Example:
    >>> import statekit as sk
    >>> handle = sk.start_query("games", keys=["player"], kafka=broker)  # doctest: +SKIP
    >>> is_query_handle(handle)                                          # doctest: +SKIP
    True
    >>> choose_part(None, ["aggregate"], "query 'board'")
    'aggregate'
    >>> first_batch(None, None, last_batch=7), first_batch(None, 3, last_batch=7)
    (7, 3)
    >>> choose_part(None, ["0/left", "0/right"], "query 'joined'")
    Traceback (most recent call last):
    ...
    statekit.errors.BadArgument: bad part: None; accepted: one of the parts of query \
'joined': 0/left, 0/right
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from statekit.errors import BadArgument

if TYPE_CHECKING:
    import pandas as pd


@runtime_checkable
class PartReader(Protocol):
    """The reader of one part (``handle.state(part)``): its snapshots, change feed and
    columns, batch by batch."""

    def snapshot(self, batch: int | None = None, sort: bool = False) -> pd.DataFrame:
        """The part's entries after ``batch`` (the last committed when None)."""

    def changes(self, from_batch: int, to_batch: int | None = None) -> pd.DataFrame:
        """Every put and delete of batches ``from_batch..to_batch``."""

    def schema(self) -> pd.DataFrame:
        """The part's columns: ``column``, ``type`` and where each comes from."""


@runtime_checkable
class QueryHandle(Protocol):
    """What every query handle answers (``StatefulQuery``, ``ProcessorQuery``,
    ``AttachedQuery``); ``docs/guide/handles.md`` shows them side by side."""

    @property
    def name(self) -> str:
        """The query's name."""

    @property
    def is_active(self) -> bool:
        """Whether the query runs."""

    @property
    def last_batch(self) -> int:
        """The last committed batch (-1 before the first)."""

    def parts(self) -> list[str]:
        """The names of the query's parts, as ``snapshot`` and the others take them."""

    def state(self, part: str | None = None) -> PartReader:
        """The reader of ``part``."""

    def snapshot(self, part: str | None = None, batch: int | None = None,
                 sort: bool = False) -> pd.DataFrame:
        """``part``'s entries after ``batch`` (the last committed when None)."""

    def changes(self, part: str | None = None, from_batch: int | None = None,
                to_batch: int | None = None) -> pd.DataFrame:
        """Every put and delete ``part`` saw in batches ``from_batch..to_batch`` (the last
        batch's when both are None)."""

    def changelog_topics(self) -> dict[str, str]:
        """Part → the changelog topic it is shipped to (empty when none is)."""

    def read_changelog(self, part: str | None = None, from_batch: int | None = None,
                       to_batch: int | None = None, *, progress: bool | None = None) -> Any:
        """``part``'s changelog records shipped so far (a ``Changelog``)."""

    def progress(self) -> pd.DataFrame:
        """One row per batch: rows in, state rows, durations, watermark."""

    def describe(self, **options: Any) -> Any:
        """What the checkpoint holds and what looks wrong (a ``Description``)."""

    def wait_for_batches(self, n: int, timeout: float = 120.0) -> int:
        """Block until ``n`` more batches have committed; the last batch's id."""

    def close(self) -> None:
        """End the handle: a query statekit started stops, an attached one runs on."""

    def __enter__(self) -> Any: ...

    def __exit__(self, *exc: object) -> None: ...


def is_query_handle(value: object) -> bool:
    """Whether ``value`` answers every verb of ``QueryHandle``, judged by its class: unlike
    ``isinstance(value, QueryHandle)`` it evaluates no property (``is_active`` asks Spark,
    ``last_batch`` reads the checkpoint).

    Example:
        >>> is_query_handle("a path"), is_query_handle(object())
        (False, False)
    """
    kind = type(value)
    return all(hasattr(kind, name) for name in _HANDLE_MEMBERS)


def choose_part(part: str | None, parts: Sequence[str], what: str) -> str:
    """``part``, or the only part when ``part`` is None; a BadArgument naming ``what``'s
    parts when it has several (or none). A name is returned as given: each handle resolves
    its own names (an attached query's ``"default"`` for ``"0/default"``)."""
    if part is not None:
        if not isinstance(part, str):
            raise BadArgument("part", part, f"a part name of {what}: "
                                            f"{', '.join(parts) or 'none yet'}")
        return part
    if len(parts) == 1:
        return parts[0]
    raise BadArgument("part", None, f"one of the parts of {what}: "
                                    f"{', '.join(parts) or 'none yet'}")


def first_batch(from_batch: int | None, to_batch: int | None, last_batch: int) -> int:
    """The first batch ``changes(part, from_batch, to_batch)`` reads: ``from_batch`` as
    given; when None, ``to_batch`` (that one batch), else ``last_batch`` (what the last
    committed batch changed)."""
    if from_batch is not None:
        return from_batch
    return last_batch if to_batch is None else to_batch


#: the members every handle has (``QueryHandle``'s own, without ``object``'s)
_HANDLE_MEMBERS = tuple(sorted(n for n in vars(QueryHandle)
                               if not n.startswith("_") or n in ("__enter__", "__exit__")))
