"""Serving as a hostile user tries it (issue 40, item 5): every error is statekit's own, names
the bad value and what is accepted, and never shows a secret.

Real broker; a cluster's arguments are checked as ``ServingCluster`` is built, before any
process starts.
"""

from __future__ import annotations

import pytest

import statekit as sk
from statekit.serve.auth import ServingSecurity
from statekit.serve.client import ServingClient
from statekit.serve.cluster import ServingCluster
from statekit.serve.options import ServeOptions
from statekit.serve.rest import Server, create_app

SECRET = "s3cret-token-nobody-may-see"


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
