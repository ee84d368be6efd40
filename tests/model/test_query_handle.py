"""Every query handle holds to ``QueryHandle``, signature by signature, and ``choose_part``
picks the part a handle reads (the handles' behaviour with real queries is tested beside each:
tests/query/test_query.py, tests/live/test_live.py, tests/processor/test_processor.py,
tests/kafka_streams/test_app.py)."""

from __future__ import annotations

import inspect

import pytest

from statekit.errors import BadArgument
from statekit.kafka_streams.app import KafkaStreamsApp
from statekit.live.handle import AttachedQuery
from statekit.model.query_handle import (
    _HANDLE_MEMBERS,
    PartReader,
    QueryHandle,
    choose_part,
    is_query_handle,
)
from statekit.processor.query import ProcessorQuery
from statekit.query.stateful import StatefulQuery

HANDLES = [StatefulQuery, ProcessorQuery, AttachedQuery, KafkaStreamsApp]
#: every member the protocol names (its own methods and properties, not object's)
MEMBERS = sorted(name for name in vars(QueryHandle)
                 if not name.startswith("_") or name in ("__enter__", "__exit__"))


def _shape(member) -> list[tuple[str, object, object]]:
    """A callable's parameters: name, kind and default (annotations aside)."""
    return [(p.name, p.kind, p.default) for p in inspect.signature(member).parameters.values()]


def test_the_protocol_names_every_verb_of_the_issue():
    assert set(MEMBERS) >= {"parts", "state", "snapshot", "changes", "changelog_topics",
                            "read_changelog", "progress", "describe", "wait_for_batches",
                            "close", "name", "is_active", "last_batch"}


@pytest.mark.parametrize("handle", HANDLES, ids=lambda c: c.__name__)
@pytest.mark.parametrize("member", MEMBERS)
def test_every_handle_has_the_protocols_signature(handle, member):
    want = inspect.getattr_static(QueryHandle, member)
    got = inspect.getattr_static(handle, member, None)
    assert got is not None, f"{handle.__name__} has no {member}"
    if isinstance(want, property):
        assert isinstance(got, property), f"{handle.__name__}.{member} is not a property"
        return
    have, want_shape = _shape(getattr(handle, member)), _shape(getattr(QueryHandle, member))
    extra = have[len(want_shape):]
    # the protocol's parameters first, the same; a handle's own extras only keyword-only
    # with a default (an attached query's names=), so every call the protocol allows works
    assert have[:len(want_shape)] == want_shape and all(
        kind is inspect.Parameter.KEYWORD_ONLY and default is not inspect.Parameter.empty
        for _, kind, default in extra), (
        f"{handle.__name__}.{member}{inspect.signature(getattr(handle, member))} is not "
        f"QueryHandle.{member}{inspect.signature(getattr(QueryHandle, member))}")


@pytest.mark.parametrize("handle", HANDLES, ids=lambda c: c.__name__)
def test_no_handle_overrides_another_handles_signatures(handle):
    """ProcessorQuery no longer subclasses StatefulQuery: no ``type: ignore[override]``."""
    assert not issubclass(handle, tuple(h for h in HANDLES if h is not handle))


def test_a_handle_with_one_part_needs_no_part_name():
    assert choose_part(None, ["aggregate"], "query 'board'") == "aggregate"
    assert choose_part("0/default", ["0/default", "1/default"], "q") == "0/default"
    assert choose_part("default", ["0/default"], "q") == "default"  # the handle resolves it


@pytest.mark.parametrize("part, parts, named", [
    (None, ["0/left", "0/right"], "0/left, 0/right"),   # several: name one
    (None, [], "none yet"),                             # nothing committed yet
    (3, ["aggregate"], "aggregate"),                    # a batch where a part goes
    (["0/left"], ["0/left"], "0/left"),                 # a list is no name
])
def test_choose_part_refuses_by_naming_the_parts(part, parts, named):
    with pytest.raises(BadArgument, match="part") as err:
        choose_part(part, parts, "query 'q'")
    assert named in str(err.value)


def test_a_part_reader_is_what_every_handles_state_returns():
    from statekit.inspect.part_views import StateView
    from statekit.spark_state.state_reader import StateReader

    for reader in (StateView, StateReader):
        for verb in ("snapshot", "changes", "schema"):
            assert callable(getattr(reader, verb)), (reader, verb)
    assert {"snapshot", "changes", "schema"} <= set(vars(PartReader))


def test_is_query_handle_judges_the_class_without_asking_spark():
    """``isinstance(x, QueryHandle)`` evaluates every property (``is_active`` asks Spark,
    ``last_batch`` reads files); ``is_query_handle`` only looks at the class."""
    asked = []

    class Handle:
        def __getattr__(self, name):
            raise AssertionError(name)

    for name in _HANDLE_MEMBERS:
        setattr(Handle, name, property(lambda self, n=name: asked.append(n)))
    assert is_query_handle(Handle())
    assert asked == []
    for handle in HANDLES:
        assert is_query_handle(object.__new__(handle))
    partial = type("Partial", (), {n: None for n in _HANDLE_MEMBERS if n != "changes"})
    assert not is_query_handle(partial())
    assert not is_query_handle("ck/path") and not is_query_handle(None)
