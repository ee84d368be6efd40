"""The REST service and routing client against hostile keys, long waits and misdirected asks.

Real broker, real rocksdict stores, real uvicorn servers on loopback ports; the
changelog is written here batch by batch (``handlog``: statekit's own record
format, no Spark), so a test decides when the store reaches the batch a query
waits for. Each test names the defect of issue 17 it pins down.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import pandas as pd
import pytest
from helpers.handlog import START, HandLog
from helpers.serving import served

import statekit as sk
from statekit.errors import PositionNotReached, ResultTooLarge
from statekit.model.changelog_record import changelog_key_columns
from statekit.model.query_spec import QuerySpec, hopping, tumbling
from statekit.options.serve import GlobalTable
from statekit.serve.client import ServingClient
from statekit.serve.instance import ServingInstance
from statekit.serve.rest import MAX_URL, Server, create_app, create_control_app
from statekit.serve.routing.assignment import assign
from statekit.serve.routing.key_codec import KeyCodec
from statekit.serve.routing.key_text import MAX_KEY_CHARS, MAX_KEY_DEPTH
from statekit.serve.routing.key_times import time_ms
from statekit.serve.transport import HttpPool
from statekit.stores.rocksdb import COUNTED_UP_TO, RocksDBKeyValueStore

WAIT = 25.0  # seconds a test's waits may last; each is released long before by a new batch


@pytest.fixture()
def log(broker, topic_name):
    """A hand-written changelog at batch 0."""
    written = HandLog(broker, f"{topic_name}-changelog")
    written.ship()
    yield written
    written.close()


def waiting(instance: ServingInstance, count: int, timeout: float = 15.0) -> None:
    """Until ``count`` waits are parked on the instance's partitions (each awaits the
    partition's next change): the requests have arrived and wait."""
    deadline = time.monotonic() + timeout
    while sum(len(w) for w in getattr(instance.tail, "_waiters", {}).values()) < count:
        if time.monotonic() > deadline:
            return  # the test then fails on what it checks, not here
        time.sleep(0.02)


def detail(response: httpx.Response, status: int) -> dict:
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"] == "application/json"
    return response.json()["detail"]


# --- 1. hostile keys: a 4xx naming them, never a 500 ----------------------------------------
def test_a_deeply_nested_or_overlong_key_is_a_400_naming_it_on_every_query(log, broker,
                                                                          tmp_path):
    whole = GlobalTable("whole", log.topic, tuple(changelog_key_columns(
        log.schema.spec.key_columns)))
    with served(log, broker, tmp_path, global_tables=[whole]) as running:
        instance, url = running["i0"]
        instance.globals["whole"].wait_running(60)
        store = f"{url}/stores/{instance.tail.store_name}"
        nested = "[" * 1300 + "]" * 1300  # valid JSON: a 7.9 KB URL
        for key in (nested, "[" * 2000, '{"player": ' + "[" * 500 + "]" * 500 + "}"):
            for local in ("false", "true"):
                asks = [(f"{store}/get", {"key": key}),
                        (f"{store}/fetch", {"key": key, "time_from": "0", "time_to": "0"}),
                        (f"{store}/fetch_range", {"key_from": key, "time_from": "0",
                                                  "time_to": "0"}),
                        (f"{url}/global/whole/get", {"key": key})]
                for target, params in asks:
                    said = detail(httpx.get(target, params={**params, "local": local}), 400)
                    assert said["error"] == "BadArgument", said
                    assert f"nested at most {MAX_KEY_DEPTH} deep" in said["message"], said
                    assert said["message"].startswith(f"bad {next(iter(params))}: "
                                                      f"{key[:40]!r}"[:-1]), said
        # in process too: a BadArgument, not a RecursionError
        with pytest.raises(sk.BadArgument, match=f"nested at most {MAX_KEY_DEPTH} deep"):
            instance.get("[" * 2000)
        with pytest.raises(sk.BadArgument, match=f"at most {MAX_KEY_CHARS:,} characters"):
            instance.get('{"player": "' + "x" * MAX_KEY_CHARS + '"}')
        # and the keys that are right, written differently, still find their row (a row's
        # key columns too: its window_end is a time, unused)
        row = log.key(0)
        for key in (json.dumps(row), json.dumps({**row, "window_start": "2026-01-05T10:00Z"}),
                    json.dumps(row, indent=2),
                    json.dumps({**row, "window_end": "2026-01-05T10:10:00.000Z"})):
            answer = httpx.get(f"{store}/get", params={"key": key}).json()
            assert answer["rows"][0]["count"] == 1, answer
        said = detail(httpx.get(f"{store}/get", params={"key": json.dumps({**row, "count": 1})}),
                      400)
        assert said["message"].endswith("accepted: a JSON object of the key columns ['player', "
                                        "'window_start', 'window_end'] (not ['count'])"), said


# --- 2. a forwarded wait: its deadline covers the wait ------------------------------------------
def test_a_forwarded_wait_longer_than_the_http_timeout_is_the_owners_answer(log, broker,
                                                                           tmp_path):
    with served(log, broker, tmp_path, ("i0", "i1"), client_timeout=1.0) as running:
        (i0, url0), (_, url1) = running["i0"], running["i1"]
        p = i0.active_partitions()[0]
        key = json.dumps(log.key(p))
        store = i0.tail.store_name
        # i1 forwards to the owner i0, which waits 2.5 s (its router's HTTP timeout: 1 s)
        said = detail(httpx.get(f"{url1}/stores/{store}/get", params={
            "key": key, "min_batch": log.batch + 1, "timeout": 2.5}, timeout=30), 409)
        assert said["error"] == "PositionNotReached", said
        assert (said["partition"], said["wanted"], said["current"]) == (
            p, log.batch + 1, log.batch)
        # the Python router the same way (timeout=1.0 for HTTP, 2.5 s of wait)
        client = ServingClient({"i0": url0, "i1": url1}, timeout=1.0)
        with pytest.raises(PositionNotReached, match=f"reflects batch {log.batch}"):
            client.get(log.key(p), min_batch=log.batch + 1, timeout=2.5)
        # and a forwarded wait that the next batch ends answers with it, from the owner
        with ThreadPoolExecutor(1) as pool:
            pending = pool.submit(httpx.get, f"{url1}/stores/{store}/get", params={
                "key": key, "min_batch": log.batch + 1, "timeout": WAIT}, timeout=60)
            waiting(i0, 1)
            batch = log.ship()
            answer = pending.result(60)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["partitions"][0]["instance"] == "i0"
        assert body["partitions"][0]["batch"] == batch and body["rows"][0]["count"] == 2


# --- 3. waits hold no thread; control stays answered -------------------------------------------
def test_fifty_waits_hold_no_thread_and_control_requests_are_answered_meanwhile(log, broker,
                                                                               tmp_path):
    with served(log, broker, tmp_path) as running:
        instance, url = running["i0"]
        store = f"{url}/stores/{instance.tail.store_name}"
        keys = [json.dumps(log.key(p)) for p in sorted(instance.roles)]
        with ThreadPoolExecutor(50) as pool:
            waits = [pool.submit(httpx.get, f"{store}/get", params={
                "key": keys[n % len(keys)], "min_batch": log.batch + 1, "timeout": WAIT},
                timeout=60) for n in range(50)]
            waiting(instance, 50)
            assignment = instance.assignment.to_dict()
            health = httpx.get(f"{url}/health", timeout=60)
            meta = httpx.get(f"{url}/metadata", timeout=60)
            taken = httpx.post(f"{url}/assignment", json={"assignment": assignment,
                                                          "urls": {"i0": url}}, timeout=60)
            everything = httpx.get(f"{store}/all", timeout=60)
            # each control request was answered while all 50 waits were still waiting
            assert not any(w.done() for w in waits), [w.result().text for w in waits
                                                      if w.done()][:2]
            batch = log.ship()
            answers = [w.result(60) for w in waits]
        assert health.status_code == meta.status_code == taken.status_code == 200
        assert meta.json()["instance"] == "i0" and taken.json()["version"] == 1
        assert len(everything.json()["rows"]) == len(log.players)
        assert [a.status_code for a in answers] == [200] * 50
        assert {a.json()["partitions"][0]["batch"] for a in answers} == {batch}


def test_the_control_listener_answers_while_the_data_listener_is_busy(log, broker, tmp_path,
                                                                     monkeypatch):
    """A lookup that holds the data listener's event loop (as a pass over 200 lookups in
    flight does) delays even /health there; the control listener answers meanwhile."""
    with served(log, broker, tmp_path) as running:
        instance, url = running["i0"]
        control = Server(create_control_app(instance)).start()
        try:
            store = f"{url}/stores/{instance.tail.store_name}"
            key = json.dumps(log.key(sorted(instance.roles)[0]))
            entered, released = threading.Event(), threading.Event()
            plain_get = instance.get_located

            def held_get(*args, **kwargs):   # a lookup here runs on the data event loop
                entered.set()
                released.wait(30)
                return plain_get(*args, **kwargs)

            monkeypatch.setattr(instance, "get_located", held_get)  # every lookup reads here
            with ThreadPoolExecutor(2) as pool:
                lookup = pool.submit(httpx.get, f"{store}/get", params={"key": key},
                                     timeout=60)
                assert entered.wait(30)
                data_health = pool.submit(httpx.get, f"{url}/health", timeout=60)
                body = {"assignment": instance.assignment.to_dict(), "urls": {"i0": url}}
                health = httpx.get(f"{control.url}/health", timeout=10)
                meta = httpx.get(f"{control.url}/metadata", timeout=10)
                taken = httpx.post(f"{control.url}/assignment", json=body, timeout=10)
                query = httpx.get(f"{control.url}/stores/{instance.tail.store_name}/get",
                                  params={"key": key}, timeout=10)
                # all answered while the data listener was still held by the lookup
                assert not lookup.done() and not data_health.done()
                released.set()
                assert lookup.result(60).status_code == 200
                assert data_health.result(60).status_code == 200
        finally:
            released.set()
            control.stop()
    assert health.json() == {"status": "ok", "instance": "i0"}
    assert meta.status_code == 200 and meta.json()["instance"] == "i0"
    assert set(meta.json()["held"]) == {str(p) for p in instance.roles}
    assert taken.status_code == 200 and taken.json()["version"] == 1
    assert detail(query, 404)["error"] == "NotFound"   # queries are the data listener's


# --- 4. every query takes a timeout for min_batch ---------------------------------------------
def test_every_query_waits_for_min_batch_up_to_its_timeout(log, broker, tmp_path):
    with served(log, broker, tmp_path) as running:
        instance, url = running["i0"]
        store = f"{url}/stores/{instance.tail.store_name}"
        window = {"time_from": START, "time_to": START}
        asks = {"all": {}, "fetch_all": window, "table": {},
                "top_k": {"window_start": START, "k": 5, "by": "count"}}
        client = ServingClient({"i0": url})
        calls = {"client.all": lambda **w: client.all(**w),
                 "client.fetch_all": lambda **w: client.fetch_all(START, START, **w),
                 "client.table": lambda **w: client.table(**w),
                 "client.to_pandas": lambda **w: client.to_pandas(**w),
                 "client.top_k": lambda **w: client.top_k(START, 5, "count", **w),
                 "client.position": lambda **w: client.position(**w)}
        with ThreadPoolExecutor(len(asks) + len(calls)) as pool:
            wait = {"min_batch": log.batch + 1, "timeout": WAIT}
            rest = {kind: pool.submit(httpx.get, f"{store}/{kind}", params={**params, **wait},
                                      timeout=60) for kind, params in asks.items()}
            python = {name: pool.submit(call, **wait) for name, call in calls.items()}
            waiting(instance, len(rest) + len(python))
            batch = log.ship()
            for kind, pending in rest.items():
                answer = pending.result(60)
                assert answer.status_code == 200, (kind, answer.text)
                if kind != "table":
                    assert {p["batch"] for p in answer.json()["partitions"]} == {batch}, kind
            for name, pending in python.items():
                answer = pending.result(60)
                if name == "client.to_pandas":
                    assert answer["count"].tolist() == [2, 2, 2], answer
                else:
                    assert answer.batch == batch, (name, answer)
        # a wait that no batch ends answers 409 once its time is up, with the batch it has
        said = detail(httpx.get(f"{store}/all", params={"min_batch": batch + 1,
                                                        "timeout": 0.3}), 409)
        assert said["current"] == batch and said["wanted"] == batch + 1


# --- 5. window starts: numpy's datetime64, and the hopping grid ----------------------------------
def test_a_numpy_datetime64_is_a_time_like_a_timestamp_text_or_milliseconds():
    stamp = pd.Timestamp("2026-01-05T10:00Z")
    expected = 1_767_607_200_000
    column = pd.Series([stamp.tz_localize(None)]).to_numpy()  # what .to_numpy() gives
    for value in (column[0], np.datetime64("2026-01-05T10:00"), np.datetime64(expected, "ms"),
                  stamp, "2026-01-05T10:00:00Z", expected):
        assert time_ms(value, "window_start") == expected, value
    with pytest.raises(sk.BadArgument, match="bad window_start: np.datetime64\\('NaT'"):
        time_ms(np.datetime64("NaT"), "window_start")


def test_a_window_start_off_the_grid_is_refused_naming_the_nearest_starts():
    hop = KeyCodec(QuerySpec(keys=["player"], window=hopping("10 minutes", "5 minutes")),
                   {"player": "string"}, partitions=3)
    tumble = KeyCodec(QuerySpec(keys=["player"], window=tumbling("10 minutes")),
                      {"player": "string"}, partitions=3)
    off = 1_767_607_200_000 + 7 * 60_000  # 10:07
    for start in (off, "2026-01-05T10:07:00Z", pd.Timestamp(off, unit="ms"),
                  np.datetime64(off, "ms")):
        with pytest.raises(sk.BadArgument, match=(
                r"sliding every 5 minutes \(a multiple of 300,000 ms since the epoch\): the "
                r"nearest are 2026-01-05T10:05:00.000Z and 2026-01-05T10:10:00.000Z")):
            hop.locate({"player": "p07", "window_start": start})
        with pytest.raises(sk.BadArgument, match=(
                r"the start of a 10 minutes window \(a multiple of 600,000 ms since the "
                r"epoch\): the nearest are 2026-01-05T10:00:00.000Z and 2026-01-05T10:10")):
            tumble.locate({"player": "p07", "window_start": start})
    # starts on the grid, written any way, are the same window
    on = [hop.locate({"player": "p07", "window_start": s}) for s in (
        off - 2 * 60_000, "2026-01-05T10:05Z", np.datetime64(off - 2 * 60_000, "ms"))]
    assert on[0] == on[1] == on[2]


# --- 6. local=true for a key held elsewhere: 421 naming the owners -------------------------------
def test_a_key_not_held_here_asked_locally_is_a_421_naming_its_owners(log, broker, tmp_path):
    with served(log, broker, tmp_path, ("i0", "i1")) as running:
        (i0, _), (_, url1) = running["i0"], running["i1"]
        p = i0.active_partitions()[0]
        response = httpx.get(f"{url1}/stores/{i0.tail.store_name}/get",
                             params={"key": json.dumps(log.key(p)), "local": "true"})
        said = detail(response, 421)
        assert said["error"] == "PartitionNotHeld" and said["owners"] == ["i0"], said
        assert said["message"] == f"instance 'i1' does not hold partition {p}; its owners: i0"
        assert "retry-after" not in response.headers  # asking i1 again cannot help
        # without local=true, i1 forwards it to i0
        routed = httpx.get(f"{url1}/stores/{i0.tail.store_name}/get",
                           params={"key": json.dumps(log.key(p))}).json()
        assert routed["partitions"][0]["instance"] == "i0" and routed["rows"][0]["count"] == 1


# --- 7. a request too long for the server is JSON too -----------------------------------------
def test_an_overlong_or_unreadable_request_is_answered_in_json(log, broker, tmp_path):
    with served(log, broker, tmp_path) as running:
        instance, url = running["i0"]
        pool = HttpPool(timeout=30)
        for size in (MAX_URL, 100_000, 1_000_000):  # beyond MAX_URL, httptools' 64 KiB, ...
            reply = pool.get(f"{url}/stores/{instance.tail.store_name}/get",
                             params={"key": "x" * size})
            assert reply.status == 414 and reply.content_type == "application/json", reply
            said = reply.json()["detail"]
            assert said["error"] == "URITooLong", said
            assert said["message"].endswith(f"accepted: at most {MAX_URL} bytes (path and "
                                            f"query)")
        host, port = url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=30) as raw:
            raw.sendall(b"NOT HTTP AT ALL\r\n\r\n")
            answer = b""
            while chunk := raw.recv(65536):
                answer += chunk
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 400") and b"application/json" in head, answer
        assert json.loads(body)["detail"]["message"].startswith("bad request: not HTTP/1.1")


# --- 8. approximate_num_entries is never 0 for a store holding rows -----------------------------
def test_approximate_num_entries_counts_a_store_whose_estimate_tombstones_wiped(tmp_path):
    with RocksDBKeyValueStore(tmp_path, "counts", key_columns=["k"],
                              value_columns=["n"]) as store:
        rows = [(json.dumps({"k": f"k{i:05d}"}).encode(), b'{"n":1}') for i in range(2000)]
        store.write_raw(rows)
        store.write_checkpoint({0: 2000})  # flushed to a file
        gone = [(key, None) for key, _ in rows[170:]]
        store.write_raw(gone)
        store.write_checkpoint({0: 3830})
        store.write_raw(gone)  # tombstones again: RocksDB's estimate drops to 0
        store.write_checkpoint({0: 5660})
        assert store.approximate_num_entries() == 170
        assert len(store.to_pandas()) == 170
    with RocksDBKeyValueStore(tmp_path / "big", "counts", key_columns=["k"],
                              value_columns=["n"]) as big:
        big.write_raw((json.dumps({"k": f"k{i:06d}"}).encode(), b'{"n":1}')
                      for i in range(COUNTED_UP_TO + 500))
        assert COUNTED_UP_TO <= big.approximate_num_entries() <= COUNTED_UP_TO + 1000


# --- 9. which process serves: in /metadata and the assignment frame -----------------------------
def test_metadata_and_the_assignment_frame_name_each_instances_process(log, broker, tmp_path):
    with served(log, broker, tmp_path, ("i0", "i1")) as running:
        url0, url1 = running["i0"][1], running["i1"][1]
        meta = httpx.get(f"{url1}/metadata").json()
        assert meta["pid"] == os.getpid()  # in-process instances: this test's process
        started = pd.Timestamp(meta["started"])
        assert started.tzinfo is not None and started <= pd.Timestamp.now(tz="UTC")
        frame = ServingClient({"i0": url0, "i1": url1}).all_metadata()
        assert set(frame.columns) >= {"partition", "instance", "role", "url", "pid",
                                      "started"}
        assert (frame["pid"] == os.getpid()).all()
        assert (frame["started"] == started).any()
        assert str(frame["started"].dtype) == "datetime64[ns, UTC]"


@pytest.mark.timeout(120)
def test_a_wait_is_woken_by_the_batch_it_waits_for_in_process(log, broker, tmp_path):
    """The in-process wait is woken by the changelog's progress (no polling), from any
    thread; its answer is the new batch's."""
    with served(log, broker, tmp_path) as running:
        instance, _ = running["i0"]
        answers = []
        threads = [threading.Thread(target=lambda p=p: answers.append(instance.get(
            log.key(p), min_batch=log.batch + 1, timeout=WAIT))) for p in instance.roles]
        for thread in threads:
            thread.start()
        waiting(instance, len(threads))
        batch = log.ship()
        for thread in threads:
            thread.join(60)
        assert sorted(a.value["count"] for a in answers) == [2, 2, 2]
        assert {a.batch for a in answers} == {batch}


# --- the plain lookup's own path: the framework's answers, cheaper --------------------------
def test_a_plain_lookup_answers_what_the_framework_route_answers(log, broker, tmp_path):
    """Every lookup below is asked twice: plainly (the fast path) and with ``local`` written
    as ``False``/``True`` (a form only the framework route reads): same status, same body."""
    with served(log, broker, tmp_path, ("i0", "i1")) as running:
        (i0, url0), (i1, _) = running["i0"], running["i1"]
        store = f"{url0}/stores/{i0.tail.store_name}/get"
        mine, theirs = i0.active_partitions()[0], i1.active_partitions()[0]
        row = log.key(mine)
        asks = [
            {"key": json.dumps(row)},                                     # held here
            {"key": json.dumps(log.key(theirs))},                         # forwarded to i1
            {"key": json.dumps(log.key(theirs)), "local": "true"},        # 421, owners named
            {"key": json.dumps({**row, "window_start": "2026-01-05T10:00Z"}), "local": "false"},
            {"key": json.dumps({**row, "player": "nobody"}), "min_batch": "0"},  # no row
            {"key": json.dumps(row), "min_batch": str(log.batch + 5), "timeout": "0.2"},  # 409
            {"key": "[" * 2000},                                          # 400, nested
            {"key": "not json", "timeout": "1"},                          # 400
            {"key": json.dumps({**row, "count": 1})},                     # 400, not a key column
            {"key": ""},                                                  # 400, empty
        ]
        for params in asks:
            plain = httpx.get(store, params=params, timeout=30)
            framework = httpx.get(store, timeout=30, params={
                **params, "local": params.get("local", "false").capitalize()})
            assert (plain.status_code, plain.headers["content-type"]) == \
                   (framework.status_code, framework.headers["content-type"]), params
            assert steady(plain.json()) == steady(framework.json()), params
        statuses = [httpx.get(store, params=p, timeout=30).status_code for p in asks]
        assert statuses == [200, 200, 421, 200, 200, 409, 400, 400, 400, 400]
        assert httpx.get(store, params=asks[0]).json()["rows"][0]["count"] == 1


def _exchange(sock: socket.socket, requests: list[bytes], count: int) -> list[tuple]:
    """Send ``requests`` at once on a kept-alive socket and read ``count`` answers in order:
    (status, headers, body) each."""
    sock.sendall(b"".join(requests))
    answers, data = [], b""
    while len(answers) < count:
        while b"\r\n\r\n" not in data:
            data += sock.recv(65536)
        head, _, data = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = dict(line.lower().split(": ", 1) for line in lines[1:])
        size = int(headers["content-length"])
        while len(data) < size:
            data += sock.recv(65536)
        answers.append((int(lines[0].split()[1]), headers, data[:size]))
        data = data[size:]
    return answers


def test_a_plain_lookup_is_written_by_the_protocol_and_anything_else_by_the_app(
        log, broker, tmp_path):
    """A plain lookup answered at once is written as its headers are read (no ASGI task):
    the same status, headers and body as the app's answer, in order with the requests
    around it on one connection; HTTP/1.0, a request with a body, a wait and an error go to
    the app."""
    from urllib.parse import urlencode

    plan = assign(log.schema.partitions, ["i0"], 0)
    instance = ServingInstance("i0", broker, log.topic, tmp_path, plan,
                               schema=log.schema).start()
    app = create_app(instance)
    answered_now, answer_now = [], app.state.answer_now

    def counted(url, headers):
        body = answer_now(url, headers)
        answered_now.append(body is not None)
        return body

    app.state.answer_now = counted
    server = Server(app).start()
    try:
        instance.wait_ready(60)
        for p in instance.roles:
            assert instance.tail.wait_for_batch(p, log.batch, 60).batch == log.batch
        path = f"/stores/{instance.tail.store_name}/get"
        key = json.dumps(log.key(0))

        def get(params: dict, version: str = "1.1", extra: bytes = b"") -> bytes:
            return (f"GET {path}?{urlencode(params)} HTTP/{version}\r\nHost: x\r\n"
                    ).encode() + extra + b"\r\n"

        with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
            answers = _exchange(sock, [
                get({"key": key}),                                   # the protocol's
                b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n",            # the app's
                get({"key": key}),                                   # behind it: the app's
                get({"key": key, "local": "False"}),                 # not plain: the app's
                get({"key": key, "min_batch": log.batch + 9, "timeout": "0.2"}),  # 409
                get({"key": "not json"}),                            # 400
                get({"key": key}, extra=b"Content-Length: 2\r\n") + b"{}",  # a body
            ], 7)
            assert [a[0] for a in answers] == [200, 200, 200, 200, 409, 400, 200]
            assert answers[1][2] == b'{"status":"ok"}' or json.loads(answers[1][2])
            lookups = [json.loads(answers[n][2]) for n in (0, 2, 3, 6)]
            assert len({json.dumps(steady(a), sort_keys=True) for a in lookups}) == 1
            assert lookups[0]["rows"] == instance.get(log.key(0)).rows != []
            assert answers[0][1].keys() == answers[3][1].keys() >= {
                "date", "server", "content-length", "content-type"}
            assert answers[0][1]["content-type"] == answers[3][1]["content-type"]
            # the connection is kept: the protocol's answer again, alone on it
            again = _exchange(sock, [get({"key": key})], 1)[0]
            assert again[0] == 200 and steady(json.loads(again[2])) == steady(lookups[0])
            waits = _exchange(sock, [get({"key": key, "min_batch": log.batch + 9,
                                          "timeout": "0.2"})], 1)[0]
            assert waits[0] == 409 and answered_now[-1] is False  # asked; the app's to wait
        with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
            old = _exchange(sock, [get({"key": key}, "1.0")], 1)[0]  # HTTP/1.0: the app's
            assert old[0] == 200 and steady(json.loads(old[2])) == steady(lookups[0])
            assert old[1]["connection"] == "close"
        assert answered_now.count(True) >= 2  # the first lookup and the one alone
    finally:
        server.stop()
        instance.close()


def test_a_plain_lookup_is_read_and_placed_once_per_query_string(log, broker, tmp_path,
                                                                 monkeypatch):
    """The key of a plain lookup is parsed and placed once per query string (kept for the
    ``PLACED_QUERIES`` latest): asked again, only the store is read; the oldest go first; a
    bad key is never kept (the app names it each time); whether this instance owns the key
    is asked every time."""
    from statekit.serve.rest import fast_lookup

    monkeypatch.setattr(fast_lookup, "PLACED_QUERIES", 2)
    with served(log, broker, tmp_path) as running:
        instance, url = running["i0"]
        located, locate = [], instance.codec.locate

        def counted(key):
            located.append(key["player"])
            return locate(key)

        get = f"{url}/stores/{instance.tail.store_name}/get"
        keys = {p: json.dumps(log.key(p)) for p in sorted(instance.roles)}
        players = {p: log.key(p)["player"] for p in keys}
        counts = {p: instance.get(log.key(p)).value["count"] for p in keys}
        monkeypatch.setattr(instance.codec, "locate", counted)
        with httpx.Client(timeout=30) as http:
            def ask(p: int) -> int:
                answer = http.get(get, params={"key": keys[p]})
                assert answer.status_code == 200, answer.text
                assert answer.json()["rows"][0]["player"] == players[p]
                return answer.json()["rows"][0]["count"]

            before = ask(0)
            assert before == counts[0]
            located.clear()
            assert [ask(0), ask(0)] == [before, before] and located == []  # kept
            ask(1), ask(2)                          # two more: the first is the oldest out
            ask(0)
            assert located == [players[1], players[2], players[0]]
            log.ship()                              # the store moves: read anew, not kept
            instance.tail.wait_for_batch(0, log.batch, 60)
            located.clear()
            assert ask(0) == before + 1 and located == []
            bad = http.get(get, params={"key": json.dumps({**log.key(0), "count": 1})})
            again = http.get(get, params={"key": json.dumps({**log.key(0), "count": 1})})
            assert bad.status_code == again.status_code == 400
            assert bad.json() == again.json() and "count" in bad.json()["detail"]["message"]


def steady(answer: dict) -> dict:
    """An answer without what moves between two asks (each partition's age in seconds)."""
    return {**answer, "partitions": [{k: v for k, v in p.items() if k != "seconds"}
                                     for p in answer.get("partitions", [])]}


@pytest.mark.parametrize("query", [
    b"key=k&key=k",                       # a parameter twice
    b"key=k&token=t",                     # one the route does not read (the token check does)
    b"min_batch=1",                       # no key
    b"key=k&min_batch=9007199254740992",  # past MAX_ID
    b"key=k&min_batch=-1", b"key=k&min_batch=1e3", b"key=k&timeout=30.5",
    b"key=k&timeout=.5", b"key=k&local=yes", b"key=k&local=1", b"key=k&local=True",
    b"key=" + b"x" * 5000,                # longer than a plain lookup's query
])
def test_a_lookup_not_in_the_plain_form_is_left_to_the_framework_route(query):
    from statekit.serve.rest import plain_lookup

    assert plain_lookup(query) is None


def test_the_plain_form_reads_a_key_as_the_framework_does():
    from urllib.parse import urlencode

    from statekit.serve.rest import plain_lookup

    key = '{"player": "p 1/é", "window_start": "2026-01-05T10:00Z"}'
    for query in (urlencode({"key": key}), urlencode({"key": key}).replace("+", "%20")):
        assert plain_lookup(query.encode()) == (key, None, 0.0, False)
    assert plain_lookup(b"local=true&timeout=30&min_batch=007&key=k") == ("k", 7, 30.0, True)
    assert plain_lookup(b"key=k&timeout=0.25&local=false") == ("k", None, 0.25, False)


# --- /all's rows kept as text per partition and store position -----------------------------
def test_all_is_answered_from_its_kept_text_only_while_each_store_stays_put(log, broker,
                                                                          tmp_path):
    """A dashboard polls ``/all``: the rows' text is made once per store position and the
    answer is what the general path gives, every partition's report read anew; once a
    batch arrives, the next answer reads the moved store again."""
    from statekit.serve.rows_text import RowsText

    with served(log, broker, tmp_path) as running:
        instance, url = running["i0"]
        text = RowsText(instance)
        parts = text.plain(None, routed=True, min_batch=None)
        assert parts == [0, 1, 2]
        assert text.body(parts, 100, made_only=True) is None  # nothing made yet
        first = json.loads(text.body(parts, 100, made_only=False))
        general = instance.all(partitions=parts, limit=101).to_dict()
        assert steady(first) == steady(general)
        assert sorted(row["count"] for row in first["rows"]) == [1, 1, 1]
        again = text.body(parts, 100, made_only=True)  # made: joined, no store read
        assert steady(json.loads(again)) == steady(first)

        batch = log.ship()
        for p in parts:
            instance.tail.wait_for_batch(p, batch, 60)
        assert text.body(parts, 100, made_only=True) is None  # every store moved
        moved = json.loads(text.body(parts, 100, made_only=False))
        assert sorted(row["count"] for row in moved["rows"]) == [2, 2, 2]
        assert {p["batch"] for p in moved["partitions"]} == {batch}
        assert text.body(parts, 99, made_only=True) is None  # another limit: made anew

        # the REST answer: the same rows, as often as asked, and the new batch's at once
        store = f"{url}/stores/{instance.tail.store_name}/all"
        answers = [httpx.get(store, timeout=30) for _ in range(3)]
        assert [a.status_code for a in answers] == [200] * 3
        assert all(steady(a.json()) == steady(moved) for a in answers)
        batch = log.ship()
        for p in parts:
            instance.tail.wait_for_batch(p, batch, 60)
        after = httpx.get(store, timeout=30).json()
        assert sorted(row["count"] for row in after["rows"]) == [3, 3, 3]
        # partitions narrow a local ask only, on both paths (a routed one reads them all)
        routed = httpx.get(store, params={"partitions": "1"}, timeout=30).json()
        assert steady(routed) == steady(after)
        local = httpx.get(store, params={"partitions": "1", "local": "true"}, timeout=30).json()
        assert [p["partition"] for p in local["partitions"]] == [1]
        assert [r["player"] for r in local["rows"]] == [log.players[1]]


def test_all_from_kept_text_refuses_what_the_general_path_refuses(log, broker, tmp_path):
    """Too many rows is a 413 on both paths; a wait, another instance's partition or a
    budget too small for any text goes the general way or reads each time."""
    from statekit.serve.rows_text import RowsText

    with served(log, broker, tmp_path, ("i0", "i1")) as running:
        (i0, url0), (i1, _) = running["i0"], running["i1"]
        store = f"{url0}/stores/{i0.tail.store_name}/all"
        mine = i0.active_partitions()
        local = httpx.get(store, params={"local": "true", "limit": 1}, timeout=30)
        many = len(mine) > 1
        assert local.status_code == (413 if many else 200), local.text
        if many:
            assert local.json()["detail"]["error"] == "ResultTooLarge"
        whole = httpx.get(store, timeout=30)  # routed: i1's partitions asked of i1
        assert whole.status_code == 200
        assert sorted(r["player"] for r in whole.json()["rows"]) == sorted(
            log.players.values())
        assert httpx.get(store, params={"limit": 2}, timeout=30).status_code == 413
        mine_only = httpx.get(store, params={"local": "true", "limit": 10}, timeout=30).json()
        assert {p["partition"] for p in mine_only["partitions"]} == set(mine)

        text = RowsText(i0)
        assert text.plain(None, routed=True, min_batch=None) is None  # i1 owns some
        assert text.plain(i1.active_partitions(), routed=False, min_batch=None) is None
        assert text.plain(None, routed=False, min_batch=log.batch + 1) is None  # a wait
        assert text.plain(None, routed=False, min_batch=log.batch) == mine
        with pytest.raises(ResultTooLarge, match="all"):
            text.body(mine, len(mine) - 1, made_only=False)

        tight = RowsText(i0, budget=10)  # no text fits: read each time, answered the same
        assert tight.body(mine, 10, made_only=False) is not None
        assert tight.body(mine, 10, made_only=True) is None


def test_a_partition_answer_as_a_dict_is_what_asdict_gives():
    from dataclasses import asdict

    from statekit.serve.results import REPORT_COLUMNS, PartitionAnswer

    for answer in (PartitionAnswer(3, "i0", "standby", 7, 2, 0.25, "restoring"),
                   PartitionAnswer(0, "", "active", -1)):
        assert answer.to_dict() == asdict(answer)
        assert list(answer.to_dict()) == REPORT_COLUMNS
        assert PartitionAnswer.from_dict(answer.to_dict()) == answer
