"""The reference Kafka Streams application's less common settings, checked when made.

Example:
    >>> AppOptions(commit_interval="100 ms").commit_interval_ms
    100
    >>> AppOptions(streams_config=["acks"])
    Traceback (most recent call last):
    ...
    statekit.errors.BadArgument: bad streams_config: ['acks']; accepted: a dict of Kafka \
Streams setting names to values
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from statekit.durations import to_millis
from statekit.errors import BadArgument
from statekit.validate import kafka_name


@dataclass(frozen=True)
class AppOptions:
    """How ``statekit.kafka_streams.start`` runs the app, beyond instances and standbys.

    Attributes:
        application_id: ``application.id`` (default: a new ``statekit-streams-...``); the
            consumer group, and the prefix of its changelog and repartition topics.
        state_dir: where the instances keep their state directories (default: a temporary
            folder the handle removes when it closes).
        commit_interval: ``commit.interval.ms`` as a duration (Kafka Streams' default is
            30 s; 1 s here, so the store and changelog follow the input closely).
        session_timeout: the consumers' ``session.timeout.ms``: how soon a killed
            instance's tasks move to another.
        streams_config: any other Kafka Streams settings (name → value), e.g.
            ``{"windowstore.changelog.additional.retention.ms": ...}``; a value Kafka Streams
            refuses is named in its own words when the app starts.
    """

    application_id: str | None = None
    state_dir: str | Path | None = None
    commit_interval: str = "1 second"
    session_timeout: str = "10 seconds"
    streams_config: Mapping[str, object] | None = None

    def __post_init__(self):
        if self.application_id is not None:
            kafka_name(self.application_id, "application_id")
        to_millis(self.commit_interval, "commit_interval")
        to_millis(self.session_timeout, "session_timeout")
        if self.streams_config is not None and (
                not isinstance(self.streams_config, Mapping)
                or not all(isinstance(name, str) and name for name in self.streams_config)):
            raise BadArgument("streams_config", self.streams_config,
                              "a dict of Kafka Streams setting names to values")
        if self.state_dir is not None and not isinstance(self.state_dir, (str, Path)):
            raise BadArgument("state_dir", self.state_dir, "a folder path (str or Path)")

    @property
    def commit_interval_ms(self) -> int:
        return to_millis(self.commit_interval)

    @property
    def session_timeout_ms(self) -> int:
        return to_millis(self.session_timeout)

    def settings(self) -> dict[str, str]:
        """``streams_config`` as the app reads it (every value a string)."""
        return {name: str(value) for name, value in (self.streams_config or {}).items()}
