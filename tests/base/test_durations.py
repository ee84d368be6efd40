"""Durations as text (``statekit.durations``): parsed to milliseconds, each bad one named."""

from __future__ import annotations

import pytest

from statekit.durations import spark_interval, to_millis
from statekit.errors import BadArgument


@pytest.mark.parametrize(("text", "ms"), [
    ("500 ms", 500), ("1 second", 1000), ("10 seconds", 10_000), ("2 minutes", 120_000),
    ("1 min", 60_000), ("3 hours", 10_800_000), ("1 day", 86_400_000), (" 5 s ", 5000),
    ("10 MINUTES", 600_000), ("10minutes", 600_000),
])
def test_to_millis(text, ms):
    assert to_millis(text) == ms


@pytest.mark.parametrize("text", ["10 minuets", "soon", "0 seconds", "-5 seconds",
                                  "1.5 minutes", "", "minutes", 10, None])
def test_bad_duration_is_named_with_what_is_accepted(text):
    with pytest.raises(BadArgument) as info:
        to_millis(text, "watermark delay")
    message = str(info.value)
    assert message.startswith(f"bad watermark delay: {text!r}")
    assert "ms, seconds, minutes, hours, days" in message


def test_spark_interval_is_in_milliseconds():
    assert spark_interval("2 minutes") == "120000 milliseconds"
