"""The REST service fuzzed against its own OpenAPI schema, and each bad input named over HTTP.

A serving instance holds every partition of a real query's changelog (real broker, real
Spark query, real rocksdict stores) behind the real uvicorn server on a loopback port: a
window store (the logged tumbling query), a session store and a key-value store (a running
aggregate). ``schemathesis run --checks all`` reads each one's ``/openapi.json`` and sends
every operation requests that fit the schema and requests that break it, and every check
must pass: no server error, every answer one the schema documents (status, content type,
headers, body), every request that fits the schema accepted and every one that breaks it
refused. So the schema states what the service takes: keys as JSON objects of the store's
key columns and types, times and window starts in the grammar and grid the service checks,
partitions within the store's range, only the queries of the store's kind. What no schema
states — a range's two ends in order — the hooks (``tests/helpers/fuzz_hooks.py``) respect.

Then each kind of bad input, sent on purpose: its status, and a message naming the value.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir

import statekit as sk
from statekit.datasets import GAME_EVENT_SCHEMA
from statekit.serve.instance import QUERIES, ServingInstance
from statekit.serve.rest import MAX_BODY, MAX_URL, Server, create_app

# Hypothesis caches what it mines from the source (constants) under ./.hypothesis: not in the
# work tree
set_hypothesis_home_dir(Path(tempfile.gettempdir()) / "statekit-hypothesis")

EXAMPLES = 40  # fuzzed requests per operation, besides the examples and coverage phases
#: What a request that fits the schema may get besides 2xx: 409 (the store has not reached
#: min_batch yet) and 413 (more rows than the limit asked): answers about the state, not the
#: request; never a 400 or a 422
ACCEPTED = ["2xx", "409", "413"]
#: What a request that breaks the schema may get: schemathesis' refusals, with 413 and 414
REFUSED = ["400", "404", "405", "409", "413", "414", "415", "422"]
CONFIG = """\
hooks = "{hooks}"

[checks.positive_data_acceptance]
expected-statuses = {accepted}

[checks.negative_data_rejection]
expected-statuses = {refused}

# POST /assignment's rules span its fields (each partition once across active and lost, owners
# among the instances, a URL for each other one), and a body it takes moves partitions: it is
# sent bodies that break its schema, each of which it must refuse
[[operations]]
include-path = "/assignment"
generation.mode = "negative"
"""


def start(spark, broker, games, folder, name, window):
    query = sk.start_query(games, keys=["player"], window=window,
                           aggregates=["count", "sum(score)", "max(score)"], spark=spark,
                           kafka=broker, event_schema=GAME_EVENT_SCHEMA,
                           checkpoint=str(folder / name), name=name, store_name="counts",
                           max_offsets_per_trigger=2500, trigger="100 milliseconds")
    query.wait_until_drained()
    return query


def serving(query, broker, folder):
    """One instance holding every partition, caught up with the query, served over HTTP."""
    instance = ServingInstance("i0", broker, query.changelog_topic, folder).start()
    try:
        instance.wait_ready(timeout=120)
        for p in range(instance.schema.partitions):
            instance.tail.wait_for_batch(p, query.last_batch, timeout=60)
        return instance, Server(create_app(instance)).start()
    except BaseException:
        instance.close()
        raise


@pytest.fixture(scope="module")
def service(logged, broker, tmp_path_factory):
    """The window store of the logged query, served."""
    query, _ = logged
    instance, server = serving(query, broker, tmp_path_factory.mktemp("fuzzed"))
    yield query, instance, server
    server.stop()
    instance.close()


@pytest.fixture(scope="module", params=["window", "session", "key-value"])
def each_kind(request, service, spark, broker, games, tmp_path_factory):
    """A served store of each kind: the logged windows, sessions, a running aggregate."""
    if request.param == "window":
        yield service
        return
    folder = tmp_path_factory.mktemp(request.param)
    window = sk.session("3 minutes") if request.param == "session" else None
    query = start(spark, broker, games, folder, f"fuzz-{request.param}", window)
    try:
        instance, server = serving(query, broker, folder / "serving")
        try:
            assert instance.kind == request.param
            yield query, instance, server
        finally:
            server.stop()
            instance.close()
    finally:
        query.close()


def test_the_schema_lists_the_queries_of_the_store_kind_only(each_kind):
    _, instance, server = each_kind
    paths = httpx.get(f"{server.url}/openapi.json").json()["paths"]
    queries = {path.rsplit("/", 1)[-1] for path in paths if path.startswith("/stores/")}
    assert queries == set(QUERIES[instance.kind])
    assert not any(path.startswith("/global/") for path in paths)  # none held here
    get = paths["/stores/{name}/get"]["get"]["parameters"]
    key = next(p for p in get if p["name"] == "key")["content"]["application/json"]["schema"]
    assert key["additionalProperties"] is False
    assert key["required"] == (["player"] if instance.kind == "key-value" else
                               ["player", "window_start"])
    scan = paths["/stores/{name}/all"]["get"]["parameters"]
    parts = next(p for p in scan if p["name"] == "partitions")
    assert (parts["style"], parts["explode"]) == ("form", False)
    assert parts["schema"]["items"] == {"type": "integer", "minimum": 0,
                                        "maximum": instance.schema.partitions - 1}


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_schemathesis_with_every_check_finds_no_failure(each_kind, tmp_path):
    _, instance, server = each_kind
    before = instance.assignment
    config = tmp_path / "schemathesis.toml"
    hooks = Path(__file__).resolve().parents[1] / "helpers" / "fuzz_hooks.py"
    config.write_text(CONFIG.format(hooks=hooks, accepted=json.dumps(ACCEPTED),
                                    refused=json.dumps(REFUSED)))
    command = [str(Path(sys.executable).with_name("schemathesis")), "--config-file",
               str(config), "run", f"{server.url}/openapi.json", "--checks", "all",
               "--max-examples", str(EXAMPLES), "--seed", "17", "--workers", "1",
               "--generation-database", "none", "--no-color"]
    env = {**os.environ, "STATEKIT_FUZZ_URL": server.url,
           "STATEKIT_FUZZ_INSTANCE": instance.name}
    run = subprocess.run(command, capture_output=True, text=True, env=env, timeout=800,
                         cwd=tmp_path)  # its caches under tmp_path, not the work tree
    report = run.stdout + run.stderr
    assert run.returncode == 0, report[-12_000:]
    operations = len(QUERIES[instance.kind]) + 3  # and /health, /metadata, POST /assignment
    assert f"Tested: {operations}" in report, report[-3000:]
    assert "Schema-valid request rejected" not in report
    assert instance.assignment is before  # no fuzzed body was taken


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
