"""The REST service fuzzed against its own OpenAPI schema, and each bad input named over HTTP.

One serving instance holds every partition of the logged query's changelog (real
broker, real Spark query, real rocksdict stores) behind the real uvicorn server
on a loopback port. Schemathesis reads the app's own ``/openapi.json`` and sends
every endpoint requests that fit the schema and requests that break it: no answer
may be a server error, and every answer — errors included — must be one the schema
documents (status, content type, body). ``POST /assignment`` reconfigures the
instance, so it is fuzzed only with bodies that do not name this instance (none
can be taken: each must be refused with a 4xx), and the instance's assignment is
checked unchanged after every request.

Then each kind of bad input, sent on purpose: its status, and a message naming the
value.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir
from schemathesis.config import SchemathesisConfig

from statekit.serve.instance import ServingInstance
from statekit.serve.rest import MAX_BODY, MAX_URL, MAX_WAIT, Server, create_app

# Hypothesis caches what it mines from the source (constants) under ./.hypothesis: not in the
# work tree
set_hypothesis_home_dir(Path(tempfile.gettempdir()) / "statekit-hypothesis")

EXAMPLES = 30  # fuzzed requests per endpoint (fitting and breaking the schema), besides
#               schemathesis' explicit examples and its deterministic coverage cases
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
#: answers a request that fits the schema may get: the schema cannot say "a JSON object of
#: the key columns" or "a time", so those come back 400 with the value named
FITTING = ["2xx", "400", "404", "409", "413", "414"]
#: answers a request that breaks the schema may get (schemathesis' defaults, with 413/414
#: for the over-long ones, and no 5xx)
BREAKING = ["400", "404", "405", "409", "413", "414", "415", "422"]


@pytest.fixture(scope="module")
def service(logged, broker, tmp_path_factory):
    """One instance holding every partition, caught up with the query, served over HTTP."""
    query, _ = logged
    instance = ServingInstance("i0", broker, query.changelog_topic,
                               tmp_path_factory.mktemp("fuzzed")).start()
    server = None
    try:
        instance.wait_ready(timeout=120)
        for p in range(instance.schema.partitions):
            instance.tail.wait_for_batch(p, query.last_batch, timeout=60)
        server = Server(create_app(instance)).start()
        yield query, instance, server
    finally:
        if server is not None:
            server.stop()
        instance.close()


@pytest.fixture(scope="module")
def api(service):
    """The service's own OpenAPI schema, as schemathesis fuzzes it."""
    _, _, server = service
    config = SchemathesisConfig.from_dict({
        "checks": {"positive_data_acceptance": {"expected-statuses": FITTING},
                   "negative_data_rejection": {"expected-statuses": BREAKING}},
    })
    return schemathesis.openapi.from_url(f"{server.url}/openapi.json", config=config)


schema = schemathesis.pytest.from_fixture("api")


@pytest.fixture(autouse=True)
def _node_id_for_schemathesis(request):
    """Schemathesis' lazy schemas rename ``request.node._nodeid``, which pytest 9 no longer
    has (its ``nodeid`` is read-only): give it one to rename."""
    if not hasattr(request.node, "_nodeid"):
        request.node._nodeid = request.node.nodeid


def short_waits(case) -> None:
    """A min_batch beyond the store's batch waits ``timeout`` seconds for it: the fuzzer's
    waits are cut to 0.1 s (seconds of waiting per example would only make the run long)."""
    try:
        if 0.1 < float(case.query["timeout"]) <= MAX_WAIT:
            case.query["timeout"] = 0.1
    except (KeyError, TypeError, ValueError):
        pass


@schema.parametrize()
@FUZZ
def test_every_endpoint_answers_as_its_schema_says_and_never_fails(case, service):
    _, instance, _ = service
    before = instance.assignment
    if case.method == "POST":  # a body that does not name this instance cannot be taken
        assume(json.dumps(instance.name) not in json.dumps(case.body, default=str))
    short_waits(case)
    response = case.call_and_validate()
    if case.method == "POST":
        assert 400 <= response.status_code < 500, response.text
    assert response.status_code < 500, response.text
    assert instance.assignment is before


# --- keys and times the schema cannot describe, fuzzed ------------------------------------------
JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() |
                    st.text(max_size=8) | st.sampled_from(["\ud800", "p07\udfff", "2026"]),
                    lambda inner: st.lists(inner, max_size=3) |
                    st.dictionaries(st.text(max_size=4), inner, max_size=3), max_leaves=6)
TEXT_TIMES = st.sampled_from(["2026-01-05T10:00:00Z", "3000-01-01", "9999-12-31T23:50Z",
                              "0001-01-01", "--5", "²", "now", "soon", ""]) | st.text(max_size=12)


@pytest.fixture(scope="module")
def known(service):
    """The players and window starts (ms) the store holds, for keys that find rows."""
    query, _, _ = service
    snapshot = query.snapshot()
    starts = sorted({int(t.value // 1_000_000) for t in snapshot["window_start"]})
    return sorted(set(snapshot["player"])), starts


@given(data=st.data(), kind=st.sampled_from(["get", "fetch", "fetch_range"]))
@settings(max_examples=80, deadline=None, derandomize=True, database=None)
def test_any_json_key_and_time_gets_its_rows_or_a_400_naming_the_value(service, known, data,
                                                                      kind):
    _, instance, server = service
    players, starts = known
    times = st.sampled_from(starts) | st.integers(-2**64, 2**64) | TEXT_TIMES
    player = data.draw(st.sampled_from(players) | JSON, "player")
    start = data.draw(times | JSON, "window_start")
    time_from, time_to = data.draw(times, "time_from"), data.draw(times, "time_to")
    key = json.dumps({"player": player, "window_start": start})
    params = {"get": {"key": key},
              "fetch": {"key": key, "time_from": str(time_from), "time_to": str(time_to)},
              "fetch_range": {"key_from": key, "key_to": key, "time_from": str(time_from),
                              "time_to": str(time_to), "limit": 5}}[kind]
    response = httpx.get(f"{server.url}/stores/{instance.tail.store_name}/{kind}",
                         params=params)
    assert response.status_code in (200, 400, 413), response.text
    if response.status_code == 400:
        said = response.json()["detail"]
        assert said["error"] == "BadArgument" and said["message"].startswith("bad "), said
    elif response.status_code == 413:
        assert "more than 5 rows" in response.json()["detail"]["message"]
    else:
        assert all(row["player"] == player for row in response.json()["rows"])


# --- each bad input on purpose -------------------------------------------------------------------
def detail(response: httpx.Response, status: int) -> dict:
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"] == "application/json"
    return response.json()["detail"]


@pytest.fixture(scope="module")
def row(service):
    """One state row that exists: a player and the start of a window it played in."""
    query, _, _ = service
    first = query.snapshot().iloc[0]
    return {"player": first["player"],
            "window_start": int(first["window_start"].value // 1_000_000)}


def test_bad_query_inputs_are_refused_naming_the_value(service, row):
    query, instance, server = service
    url = f"{server.url}/stores/{instance.tail.store_name}"
    key = json.dumps(row)
    cases = [
        (f"{server.url}/stores/nope/get", {"key": key}, 404, "no store 'nope' here"),
        (f"{url}/get", {"key": "{not json"}, 400, "bad key: '{not json'"),
        (f"{url}/get", {"key": '{"window_start": 0}'}, 400, "missing ['player']"),
        (f"{url}/get", {"key": '{"player": 5, "window_start": 0}'}, 400,
         "bad key player: 5; accepted: a string value"),
        (f"{url}/get", {"key": json.dumps({**row, "window_start": 1})}, 400,
         "bad window_start: 1; accepted: the start of a 10 minutes window"),
        (f"{url}/get", {"key": json.dumps({**row, "window_start": "9999-12-31T23:50Z"})}, 400,
         "bad window_start: '9999-12-31T23:50Z'; accepted: the start of a window that ends by "
         "9999-12-31T23:59:59.999Z"),
        (f"{url}/fetch", {"key": '{"player": "p01"}', "time_from": "soon", "time_to": "0"},
         400, "bad time_from: 'soon'"),
        (f"{url}/fetch", {"key": '{"player": "p01"}', "time_from": "--5", "time_to": "0"},
         400, "bad time_from: '--5'"),
        (f"{url}/fetch", {"key": '{"player": "p01"}', "time_from": "5", "time_to": "0"}, 400,
         "bad time_from: 5; accepted: a time no later than time_to=0"),
        (f"{url}/top_k", {"window_start": "0", "k": 3, "by": "score"}, 400,
         "bad top_k by: 'score'"),
        (f"{url}/all", {"partitions": "0,7", "local": "true"}, 400,
         "bad partition: 7; accepted: 0..2"),
        (f"{url}/find_sessions", {"key": '{"player": "p01"}', "earliest_end": "0",
                                  "latest_start": "1"}, 400, "bad query: 'find_sessions'"),
        (f"{url}/all", {"limit": 2}, 413, "the answer to all has more than 2 rows"),
        (f"{url}/top_k", {"window_start": "0", "k": 0, "by": "count"}, 422,
         "bad k: '0'; accepted: Input should be greater than or equal to 1"),
        (f"{url}/fetch_all", {"time_from": "0"}, 422, "missing query parameter 'time_to'"),
        (f"{url}/all", {"partitions": "0;1"}, 422, "bad partitions: '0;1'"),
    ]
    for target, params, status, text in cases:
        message = detail(httpx.get(target, params=params), status)["message"]
        assert text in message, (target, params, message)


def test_a_batch_not_reached_is_409_with_the_batch_the_store_has(service, row):
    query, instance, server = service
    response = httpx.get(f"{server.url}/stores/{instance.tail.store_name}/get",
                         params={"key": json.dumps(row), "min_batch": query.last_batch + 100})
    said = detail(response, 409)
    assert said["error"] == "PositionNotReached" and said["current"] == query.last_batch
    assert said["wanted"] == query.last_batch + 100
    assert f"reflects batch {query.last_batch}" in said["message"]
    reached = httpx.get(f"{server.url}/stores/{instance.tail.store_name}/get",
                        params={"key": json.dumps(row), "min_batch": query.last_batch})
    assert reached.status_code == 200 and reached.json()["rows"][0]["player"] == row["player"]


def test_an_over_long_url_is_414_and_a_too_large_body_413(service):
    _, instance, server = service
    path = f"/stores/{instance.tail.store_name}/get"
    said = detail(httpx.get(f"{server.url}{path}", params={"key": "x" * MAX_URL}), 414)
    assert said["error"] == "URITooLong"
    assert said["message"] == (f"bad URL: {len(path) + len('?key=') + MAX_URL} bytes long; "
                               f"accepted: at most {MAX_URL} bytes (path and query)")
    body = json.dumps({"assignment": {}, "urls": {"i9": "x" * MAX_BODY}}).encode()
    said = detail(httpx.post(f"{server.url}/assignment", content=body,
                             headers={"content-type": "application/json"}), 413)
    assert f"content-length '{len(body)}'" in said["message"]

    def chunks():  # no content-length: the body is counted as it arrives
        for _ in range(3):
            yield b"x" * (MAX_BODY // 2)

    said = detail(httpx.post(f"{server.url}/assignment", content=chunks(),
                             headers={"content-type": "application/json"}), 413)
    assert "sent in chunks" in said["message"] and str(MAX_BODY) in said["message"]
    small = detail(httpx.post(f"{server.url}/assignment", content=iter([b"{", b"}"]),
                              headers={"content-type": "application/json"}), 422)
    assert "missing body parameter 'assignment'" in small["message"]  # a small one is read


def test_paths_and_methods_it_does_not_have_are_named_in_json(service):
    _, _, server = service
    said = detail(httpx.put(f"{server.url}/health"), 405)
    assert said["message"] == "bad method: PUT /health; accepted: GET"
    said = detail(httpx.get(f"{server.url}/stores/a/b/get"), 404)
    assert said["message"].startswith("bad path: '/stores/a/b/get'")


def test_bad_assignments_are_refused_naming_the_value_and_change_nothing(service):
    _, instance, server = service
    before = instance.assignment
    current = before.to_dict()
    cases = [
        ({**current, "active": {"0": "i0", "1": "i0", "7": "i0"}}, 400,
         "bad assignment partitions (active and lost): [0, 1, 7]; accepted: each of 0..2 once"),
        ({**current, "instances": ["i1"], "active": {"0": "i1", "1": "i1", "2": "i1"}}, 400,
         "bad assignment instances: ['i1']; accepted: a list naming this instance, 'i0'"),
        ({**current, "active": {"0": "i0", "1": "i0", "2": "i5"}}, 400,
         "bad assignment owner: 'i5'"),
        ({**current, "standbys": {"0": ["i0"]}}, 400, "bad assignment standbys of partition 0"),
        ({**current, "instances": ["i0", "i1"]}, 400,
         "bad urls: {'i0': ''}; accepted: a URL for each other instance (none for 'i1')"),
        ({**current, "active": {"zero": "i0"}}, 422, "bad assignment.active.zero"),
        ({**current, "version": 0}, 422, "bad assignment.version: 0"),
        ({"active": {}}, 422, "missing body parameter 'assignment.standbys'"),
    ]
    for assignment, status, text in cases:
        body = {"assignment": assignment, "urls": {"i0": ""}}
        said = detail(httpx.post(f"{server.url}/assignment", json=body), status)
        assert text in said["message"], (assignment, said["message"])
        assert instance.assignment is before
    infinite = json.dumps({"assignment": {**current, "version": 1}, "urls": {}}).replace(
        '"version": 1', '"version": 1e400')
    said = detail(httpx.post(f"{server.url}/assignment", content=infinite,
                             headers={"content-type": "application/json"}), 422)
    assert "bad assignment.version: inf" in said["message"]
    taken = httpx.post(f"{server.url}/assignment", json={"assignment": current,
                                                         "urls": {"i0": ""}})
    assert taken.status_code == 200, taken.text  # its own assignment back: nothing moves
    assert taken.json() == {"instance": "i0", "version": 1,
                            "held": {"0": "active", "1": "active", "2": "active"}}
    assert instance.assignment.to_dict() == current
