"""Serving as a hostile user tries it (issue 40, item 5): every error is statekit's own, names
the bad value and what is accepted, and never shows a secret.

Real broker, real instances behind real uvicorn servers on loopback (``helpers.serving``);
a cluster's arguments are checked as ``ServingCluster`` is built, before any process starts.
"""

from __future__ import annotations

import httpx
import pytest
from helpers.handlog import HandLog
from helpers.serving import served

import statekit as sk
from statekit.serve.auth import ServingSecurity
from statekit.serve.client import ServingClient
from statekit.serve.cluster import ServingCluster
from statekit.serve.options import ServeOptions
from statekit.serve.rest import Server, create_app

SECRET = "s3cret-token-nobody-may-see"


@pytest.fixture()
def log(broker, topic_name):
    """A hand-written changelog of 2 partitions at batch 0."""
    written = HandLog(broker, f"{topic_name}-changelog", partitions=2)
    written.ship()
    yield written
    written.close()


def detail(response: httpx.Response, status: int) -> dict:
    assert response.status_code == status, (response.status_code, response.text)
    return response.json()["detail"]


def built(broker, topic: str, **arguments) -> ServingCluster:
    """A cluster built (its arguments checked), never started; its temp folder removed."""
    cluster = ServingCluster(broker, topic, **arguments)
    cluster.stop()
    return cluster


# --- 1. a secret is never shown -----------------------------------------------------------
@pytest.mark.parametrize("given", [{"token": SECRET}, {"token": SECRET, "cafile": None}, SECRET],
                         ids=["dict", "dict-of-two", "bare-token"])
def test_a_security_that_is_not_a_serving_security_is_refused_without_its_secret(
        broker, topic_name, given):
    for build in (lambda: built(broker, topic_name, security=given),
                  lambda: ServeOptions(security=given)):
        with pytest.raises(sk.BadArgument) as caught:
            build()
        said = str(caught.value)
        assert SECRET not in said and "s3cret" not in said and SECRET not in repr(
            caught.value.value), said
        assert said.startswith("bad security: '<a "), said
        assert said.endswith("accepted: a ServingSecurity(token, certfile, keyfile, cafile) "
                             "or None, e.g. ServingSecurity(token=...)"), said
        if isinstance(given, dict):
            assert "token" in said, said  # the keys are named, the values not
    # the right input, given as options or as the keyword, is taken (and still hidden)
    security = ServingSecurity(token=SECRET)
    for cluster in (built(broker, topic_name, security=security),
                    built(broker, topic_name, options=ServeOptions(security=security))):
        assert cluster.security.token == SECRET and SECRET not in repr(cluster.options)


# --- 2. a host that is no address of this machine ----------------------------------------------
@pytest.mark.parametrize("host", ["my laptop", "no-such-host.invalid", "203.0.113.7"])
def test_a_host_this_machine_cannot_listen_on_is_named_with_what_is_accepted(broker,
                                                                             topic_name, host):
    with pytest.raises(sk.BadArgument) as caught:
        built(broker, topic_name, host=host, allow_remote=True)
    said = str(caught.value)
    assert said.startswith(f"bad host: {host!r}; accepted: an IPv4 address of this machine "
                           f"or a name that resolves to one, e.g. 127.0.0.1, or 0.0.0.0 for "
                           f"every interface ("), said
    with pytest.raises(sk.BadArgument, match=f"bad host: {host!r}"):
        Server(create_app, host, allow_remote=True)  # checked before the app is looked at


def test_the_hosts_a_machine_listens_on_are_taken_however_written(broker, topic_name):
    for host, remote in (("0.0.0.0", True), ("localhost", False), ("127.0.0.1", False)):
        assert built(broker, topic_name, host=host, allow_remote=remote).host == host


# --- 6. standbys that do not fit ----------------------------------------------------------------
@pytest.mark.parametrize("standbys", [5, 2, -1, 1.5, "1"])
def test_standbys_beyond_the_other_instances_are_refused_like_negative_ones(broker,
                                                                            topic_name,
                                                                            standbys):
    with pytest.raises(sk.BadArgument) as caught:
        built(broker, topic_name, instances=2, standbys=standbys)
    assert str(caught.value) == (f"bad standbys: {standbys!r}; accepted: a number of "
                                 f"standbys from 0 to 1 (each on another of the 2 instances)")


def test_standbys_that_fit_are_kept_and_the_default_fits_any_instance_count(broker,
                                                                            topic_name):
    assert built(broker, topic_name, instances=3, standbys=2).standby_count == 2
    assert built(broker, topic_name, instances=2, standbys=0).standby_count == 0
    assert built(broker, topic_name, instances=2).standby_count == 1
    assert built(broker, topic_name, instances=1).standby_count == 0


# --- 7. a client of no instance ------------------------------------------------------------
@pytest.mark.parametrize("urls", [{}, [], "http://127.0.0.1:8123", {"": "http://x:1"},
                                  {"i0": 8123}])
def test_a_client_of_no_instance_is_refused_up_front(urls):
    with pytest.raises(sk.BadArgument) as caught:
        ServingClient(urls)
    assert str(caught.value) == (f"bad urls: {urls!r}; accepted: a dict of one or more "
                                 f"instance names to their base URLs, e.g. "
                                 f"{{'i0': 'http://127.0.0.1:8123'}} (ServingCluster.urls)")


# --- 3. a forwarded error is the owner's own ----------------------------------------------
def test_a_bad_by_on_an_instance_holding_nothing_says_what_the_owner_says(log, broker,
                                                                          tmp_path):
    with served(log, broker, tmp_path, ("i0", "i1", "i2")) as running:
        (i0, url0), (i2, url2) = running["i0"], running["i2"]
        assert not i2.roles and i0.roles  # 2 partitions: i2 holds none, forwards it all
        ask = {"window_start": "2026-01-05T10:00Z", "k": 3, "by": "nope"}
        store = i0.tail.store_name
        own = detail(httpx.get(f"{url0}/stores/{store}/top_k",
                               params={**ask, "local": "true"}), 400)
        assert own == {"error": "BadArgument",
                       "message": "bad top_k by: 'nope'; accepted: count"}
        for url in (url2, url0):  # forwarded (all of it, or in part): the same words
            assert detail(httpx.get(f"{url}/stores/{store}/top_k", params=ask), 400) == own
        with ServingClient({n: u for n, (_, u) in running.items()}) as client:  # Python too
            with pytest.raises(sk.BadArgument) as caught:
                client.top_k("2026-01-05T10:00Z", 3, "nope")
            assert str(caught.value) == own["message"]
            # a right name, and a client of one instance, answer from every partition
            rows = client.top_k("2026-01-05T10:00Z", 3, "count").rows
            assert len(rows) == 2 and all(row["count"] == 1 for row in rows)
        answer = httpx.get(f"{url2}/stores/{store}/top_k", params={**ask, "by": "count"})
        assert answer.status_code == 200 and len(answer.json()["rows"]) == 2
