"""How ``replay`` produces a dataset into a topic: ``ReplayOptions``.

``replay`` (``statekit.kafka.dataset_replay``) takes one, or its fields as keyword
arguments (routed by that module's ``SHORTCUTS``), never both.

Example:
    >>> ReplayOptions(partitions=8, rate=500).to_dict()["rate"]
    500
    >>> ReplayOptions(rate=0)
    Traceback (most recent call last):
    ...
    statekit.errors.BadArgument: bad replay rate: 0; accepted: None (as fast as possible) or \
a positive number of records per second
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from statekit.errors import BadArgument
from statekit.options.base import Options
from statekit.validate import flag, non_negative_number, timeout_seconds, whole_number


@dataclass(frozen=True)
class ReplayOptions(Options):
    """How ``replay`` produces: the new topic's partitions, the pace, the producer's settings.

    Args:
        partitions: partition count of a topic ``replay`` creates (an existing topic keeps
            its own).
        rate: records per second to pace at; None for as fast as possible.
        create: create the topic when missing; when False a missing topic raises
            TopicNotFound.
        progress: show a tqdm progress bar.
        config: extra librdkafka producer settings (override statekit's and the
            connection's).
        topic_config: configs of a topic ``replay`` creates (``{"cleanup.policy":
            "compact"}`` for a reference table), over ``KEEP_HISTORY``
            (``retention.ms=-1``: the datasets' events carry their own, past, times, which a
            broker's time retention, counted from the record's timestamp, would delete at
            its next check).
        flush_timeout: seconds to wait for outstanding delivery reports at the end.
    """

    partitions: int = 4
    rate: float | None = None
    create: bool = True
    progress: bool = True
    config: Mapping[str, str] | None = None
    topic_config: Mapping[str, str] | None = None
    flush_timeout: float = 120.0

    def __post_init__(self):
        whole_number(self.partitions, "number of partitions", minimum=1)
        accepted = "None (as fast as possible) or a positive number of records per second"
        if self.rate is not None and non_negative_number(self.rate, "replay rate",
                                                         accepted=accepted) == 0:
            raise BadArgument("replay rate", self.rate, accepted)
        object.__setattr__(self, "create", flag(self.create, "create"))
        object.__setattr__(self, "progress", flag(self.progress, "progress"))
        for name in ("config", "topic_config"):
            settings = getattr(self, name)
            if settings is not None and not (isinstance(settings, Mapping) and all(
                    isinstance(k, str) for k in settings)):
                raise BadArgument(name, settings, "a mapping of setting names to values, or None")
        timeout_seconds(self.flush_timeout, "flush_timeout")
