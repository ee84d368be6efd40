"""Shared real parts: one SparkSession and one embedded broker per test session."""

from __future__ import annotations

import itertools
import warnings

import pytest

from statekit.kafka import EmbeddedBroker
from statekit.spark.session import spark_session

_names = itertools.count()

#: Seconds one whole notebook may take under nbmake (a notebook is one test item; the default
#: ``timeout`` in pyproject.toml is per test). ``--nbmake-timeout`` (Makefile) bounds each cell.
NOTEBOOK_TIMEOUT = 1200


def pytest_collection_modifyitems(items):
    """Notebooks (``--nbmake notebooks``) are slow tests with a timeout of their own."""
    for item in items:
        if item.path.suffix == ".ipynb":
            item.add_marker(pytest.mark.slow)
            if item.get_closest_marker("timeout") is None:
                item.add_marker(pytest.mark.timeout(NOTEBOOK_TIMEOUT))


class _NotebooksRunOnce:
    """A notebook that tests/project/test_browser.py runs top to bottom in JupyterLab is not run a
    second time by nbmake: the browser run executes every cell in a real kernel, the same
    way (solutions hidden), fails on any cell that raised, then uses its widgets. Only where
    Chromium runs, so that without it nbmake still runs every notebook."""

    @pytest.hookimpl(trylast=True)  # after -k and -m chose the items
    def pytest_collection_modifyitems(self, config, items):
        in_browser = {item.callspec.params.get("stem") for item in items
                      if item.path.name == "test_browser.py" and hasattr(item, "callspec")}
        twice = [item for item in items
                 if item.path.suffix == ".ipynb" and item.path.stem in in_browser]
        if not twice:
            return
        from helpers.chromium import chromium

        if chromium() is None:
            return
        config.hook.pytest_deselected(items=twice)
        items[:] = [item for item in items if item not in twice]


def pytest_configure(config):
    from helpers.suite_times import CpuMeter, SuiteTimes

    config.pluginmanager.register(_NotebooksRunOnce(), "statekit-notebooks-run-once")
    config.pluginmanager.register(CpuMeter(), "statekit-cpu-meter")  # where tests run
    if hasattr(config, "workerinput"):  # a pytest-xdist worker: files longest first
        from helpers.file_order import LongestFilesFirst, read_seconds

        config.pluginmanager.register(LongestFilesFirst(read_seconds()),
                                      "statekit-longest-files-first")
    else:  # pytest-xdist's workers report to the controller
        config.pluginmanager.register(SuiteTimes(), "statekit-suite-times")


@pytest.fixture(scope="module", autouse=True)
def no_query_outlives_its_module():
    """A streaming query left running after its module triggers on, taxing every later test
    (a drained one at a 100 ms trigger takes about a third of a core): stop it, and warn
    with its name so the test that left it can be mended."""
    yield
    from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession()
    if session is None:
        return
    left = [q for q in session.streams.active]
    for query in left:
        query.stop()
    if left:
        warnings.warn(f"streaming queries still running after the module, now stopped: "
                      f"{', '.join(str(q.name or q.id) for q in left)}", stacklevel=1)


@pytest.fixture(scope="session", autouse=True)
def changelogs_read_whole():
    """Changelog topics made in this process keep every record until a test lets the broker's
    log cleaner go: the tests compare a changelog with Spark's change feed record for record,
    and Apache Kafka's cleaner would otherwise compact it within seconds
    (``QUICK_CLEANING``). The cleaner has tests of its own
    (``tests/changelog/test_broker_compaction.py``, which sets ``min.compaction.lag.ms=0``);
    a worker process gets the same setting through its ``RunOptions``."""
    from statekit.changelog import naming

    quick = dict(naming.QUICK_CLEANING)
    naming.QUICK_CLEANING.update(naming.HOLD_COMPACTION)
    yield
    naming.QUICK_CLEANING.clear()
    naming.QUICK_CLEANING.update(quick)


def s3a_connector_fetched() -> bool:
    """True when Hadoop's S3A connector is on this machine (``make s3a-jars``): the shared
    session then carries it, for tests/spark_state/test_object_store.py's s3a:// checkpoint
    (a running JVM cannot load it later)."""
    from statekit.spark.s3a_jars import S3A_JARS

    return not S3A_JARS.problems(S3A_JARS.folder())


@pytest.fixture(scope="session")
def spark():
    session = spark_session("local[2]", app_name="statekit-tests", shuffle_partitions=3,
                            s3a=s3a_connector_fetched())
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


@pytest.fixture()
def hand_log(broker, topic_name):
    """A hand-written changelog of 2 partitions at batch 0 (``helpers.handlog.HandLog``)."""
    from helpers.handlog import HandLog

    written = HandLog(broker, f"{topic_name}-changelog", partitions=2)
    written.ship()
    yield written
    written.close()


@pytest.fixture(scope="session")
def games(broker) -> str:
    """The 5,000 game events in a 4-partition topic."""
    from statekit.datasets import game_events
    from statekit.kafka.dataset_replay import replay

    replay(game_events(), broker.bootstrap_servers, "games-changelog", partitions=4,
           progress=False)
    return "games-changelog"


@pytest.fixture(scope="session")
def logged(spark, broker, games, tmp_path_factory):
    """A drained query (500 records a batch) that shipped its changelog, and that changelog."""
    import statekit as sk
    from statekit.datasets import GAME_EVENT_SCHEMA, GAME_SPEC

    query = sk.start_query(games, GAME_SPEC, spark=spark, kafka=broker,
                           event_schema=GAME_EVENT_SCHEMA,
                           checkpoint=str(tmp_path_factory.mktemp("ck") / "logged"),
                           name="board", store_name="counts", max_offsets_per_trigger=500,
                           trigger="100 milliseconds")
    query.wait_until_drained()
    log = query.read_changelog()
    # Stopped once drained: a drained query still triggers every 100 ms (about a third of a
    # core on this machine), a tax on every later test; what the tests read (snapshots,
    # progress, the changelog) outlives the stop.
    query.close()
    yield query, log
