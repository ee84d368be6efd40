"""The changelog record headers: one class owns their format, and it refuses what is not it."""

from __future__ import annotations

import pytest

from statekit.errors import ChangelogError
from statekit.model.changelog_record import HEADERS, RecordHeaders

pytestmark = pytest.mark.timeout(30)


def test_headers_round_trip_as_ascii_decimal_text():
    head = RecordHeaders(batch=12, seq=3, count=40, prev=9)
    raw = head.encode()
    assert [name for name, _ in raw] == list(HEADERS)
    assert dict(raw)["statekit.count"] == b"40"
    assert RecordHeaders.parse(raw) == head


def test_right_headers_written_differently_are_read():
    """Another order, other applications' headers around them, a compacted copy's count 0."""
    raw = [("traceparent", b"00-ab"), ("statekit.prev", b"-1"), ("statekit.count", b"0"),
           ("statekit.seq", b"7"), ("statekit.batch", b"4"), ("statekit.format", b"1")]
    assert RecordHeaders.parse(raw) == RecordHeaders(4, 7, 0, -1)
    assert RecordHeaders.parse(RecordHeaders(0, 0, 1, -1).encode()).prev == -1


@pytest.mark.parametrize("raw", [None, [], [("traceparent", b"00-ab")],
                                 [("statekit.batch", b"4")]])
def test_a_record_without_the_format_header_is_not_statekits(raw):
    assert RecordHeaders.parse(raw) is None


@pytest.mark.parametrize(("raw", "message"), [
    ([("statekit.format", b"2")], r"offset 7 has statekit.format 2; this statekit reads format 1"),
    ([("statekit.format", b"01")], r"statekit.format 01"),
    ([("statekit.format", b"1"), ("statekit.seq", b"0"), ("statekit.count", b"1"),
      ("statekit.prev", b"-1")], r"header statekit.batch is missing"),
    ([("statekit.format", b"1"), ("statekit.batch", b"4"), ("statekit.seq", b"zero"),
      ("statekit.count", b"1"), ("statekit.prev", b"-1")], r"header statekit.seq is 'zero'"),
    ([("statekit.format", b"1"), ("statekit.batch", b"4"), ("statekit.seq", b"0"),
      ("statekit.count", b"\xff"), ("statekit.prev", b"-1")], r"header statekit.count is '\ufffd'"),
    ([("statekit.format", b"1"), ("statekit.batch", b"-2"), ("statekit.seq", b"0"),
      ("statekit.count", b"1"), ("statekit.prev", b"-1")], r"inconsistent"),
    ([("statekit.format", b"1"), ("statekit.batch", b"4"), ("statekit.seq", b"2"),
      ("statekit.count", b"2"), ("statekit.prev", b"-1")], r"inconsistent.*0 <= seq < count"),
    ([("statekit.format", b"1"), ("statekit.batch", b"4"), ("statekit.seq", b"0"),
      ("statekit.count", b"1"), ("statekit.prev", b"4")], r"inconsistent.*-1 <= prev < batch"),
])
def test_bad_headers_are_refused_with_the_value_named(raw, message):
    with pytest.raises(ChangelogError, match=message):
        RecordHeaders.parse(raw, where="offset 7")
