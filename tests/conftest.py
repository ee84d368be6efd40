"""Shared real parts: one SparkSession and one embedded broker per test session."""

from __future__ import annotations

import itertools

import pytest

from statekit.kafka import EmbeddedBroker
from statekit.spark.session import spark_session

_names = itertools.count()


@pytest.fixture(scope="session")
def spark():
    session = spark_session("local[2]", app_name="statekit-tests", shuffle_partitions=3)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def broker():
    with EmbeddedBroker() as running:
        yield running


@pytest.fixture()
def topic_name(request) -> str:
    """A topic name unique within the test session."""
    base = "".join(c if c.isalnum() else "-" for c in request.node.name)[:40]
    return f"t-{base}-{next(_names)}"
