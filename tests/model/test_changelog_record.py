"""The changelog record codec's JSON (``statekit.model.changelog_record``): read as
``json.loads`` reads it, errors included."""

from __future__ import annotations

import pytest


def test_decode_json_reads_compact_and_any_other_json_as_json_loads_does():
    import json

    from statekit.model.changelog_record import decode_json, encode_json

    row = {"player": 'p"07\\é', "count": 3, "score": 1.5, "none": None, "ok": True}
    data = encode_json(row, list(row))
    assert decode_json(data) == row == json.loads(data)
    for other in (b' {"a": 1} ', b'{"a":\n[1, 2]}', b"7", b'"text"', '{"a":1}'):
        assert decode_json(other) == json.loads(other)
    assert decode_json(None) is None
    for bad in (b'{"a":', b'{"a":1} trailing', b"\xff{}", b""):
        with pytest.raises(ValueError) as raised:
            decode_json(bad)
        with pytest.raises(ValueError) as expected:
            json.loads(bad)
        assert str(raised.value) == str(expected.value)
