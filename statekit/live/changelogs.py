"""A changelog topic per part of an attached query: names, ledgers, and the writers.

Spark writes no Kafka changelog for any operator; statekit ships one, as it does for its
own queries (``statekit.changelog.writer``): after each committed batch, the part's
change feed goes to its topic, exactly once per batch (the writer's transactions and
ledger). Each part with a change feed gets a topic of its own, named as Kafka Streams
names a store's changelog: ``<app>-op<operator_id>-<part name>-changelog`` (characters
Kafka does not accept become ``_``), where ``app`` is the query's name (or
``query-<first 8 of its id>``).

The ledgers live in a folder statekit owns, never in the person's checkpoint:
``$XDG_STATE_HOME/statekit/attached/<query id>`` (``~/.local/state/...`` without it), or
the folder given.

Example:
    >>> part_topic("own", 2, "default")
    'own-op2-default-changelog'
    >>> part_topic("own job", 0, "$procTimers")
    'own_job-op0-_procTimers-changelog'
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from statekit.changelog import naming

_NOT_KAFKA = re.compile(r"[^a-zA-Z0-9._-]")


def kafka_safe(text: str) -> str:
    """``text`` with every character a Kafka topic name refuses replaced by ``_``."""
    return _NOT_KAFKA.sub("_", text)


def app_name(query_name: str | None, query_id: str) -> str:
    """The application part of an attached query's topic names."""
    return kafka_safe(query_name) if query_name else f"query-{str(query_id)[:8]}"


def part_topic(app: str, operator_id: int, name: str) -> str:
    """The changelog topic of part ``name`` of operator ``operator_id``."""
    return naming.changelog_topic(kafka_safe(app), f"op{int(operator_id)}-{kafka_safe(name)}")


def ledger_folder(query_id: str, folder: str | os.PathLike | None = None) -> Path:
    """Where the ledgers of an attached query's changelogs live (outside its checkpoint)."""
    if folder is not None:
        return Path(folder)
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local",
                                                            "state")
    return Path(base) / "statekit" / "attached" / str(query_id)
