"""Serving beyond loopback: a token on every endpoint, TLS, forwarded calls and the cluster.

Real parts: the logged query's changelog (real Spark, real broker), real serving
instances with rocksdict stores, the real uvicorn server bound to 0.0.0.0 (every
call goes to 127.0.0.1), a throwaway CA and server certificate made by trustme.
Each endpoint comes from the app's own OpenAPI paths, so a new one is covered
without touching this file.
"""

from __future__ import annotations

import functools
import json
import ssl
import subprocess
from pathlib import Path

import httpx
import pytest
import trustme

from statekit.errors import BadArgument, TokenRefused
from statekit.options.security import MIN_TOKEN, ServingSecurity, new_token
from statekit.ports import free_port
from statekit.serve import serve
from statekit.serve.auth import client_context, refusal, settle
from statekit.serve.client import ServingClient
from statekit.serve.instance import ServingInstance
from statekit.serve.rest import Server, create_app
from statekit.serve.routing.assignment import assign
from statekit.serve.transport import HttpError, HttpPool

TOKEN = "the-right-token-" + "r" * 24
WRONG = "the-wrong-token-" + "w" * 24
STORE = "board-counts"  # the logged query's store (its app and store names)
#: paths outside the OpenAPI schema that need the token too
UNLISTED = ["/openapi.json", "/docs", "/no/such/path"]


@pytest.fixture(scope="module")
def tls(tmp_path_factory) -> dict[str, str]:
    """A CA, and a certificate it signed for 127.0.0.1 and localhost, as PEM files."""
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    folder = tmp_path_factory.mktemp("tls")
    files = {"certfile": folder / "cert.pem", "keyfile": folder / "key.pem",
             "cafile": folder / "ca.pem"}
    cert.private_key_pem.write_to_path(files["keyfile"])
    for n, pem in enumerate(cert.cert_chain_pems):
        pem.write_to_path(files["certfile"], append=n > 0)
    ca.cert_pem.write_to_path(files["cafile"])
    return {name: str(path) for name, path in files.items()}


def caught_up(instance: ServingInstance, query) -> ServingInstance:
    instance.start().wait_ready(timeout=120)
    for p in instance.roles:
        instance.tail.wait_for_batch(p, query.last_batch, timeout=60)
    return instance


@pytest.fixture(scope="module")
def whole(logged, broker, tmp_path_factory):
    """One instance holding every partition, caught up with the logged query."""
    query, _ = logged
    instance = caught_up(ServingInstance("i0", broker, query.changelog_topic,
                                         tmp_path_factory.mktemp("whole")), query)
    assert instance.tail.store_name == STORE
    yield query, instance
    instance.close()


@pytest.fixture(scope="module", params=["http", "https"])
def remote(request, whole, tls):
    """The instance served on 0.0.0.0 with TOKEN, over plain HTTP or over TLS; and the SSL
    context a client checks its certificate with."""
    query, instance = whole
    files = tls if request.param == "https" else {}
    server = Server(create_app(instance), "0.0.0.0", allow_remote=True,
                    security=ServingSecurity(token=TOKEN, **files)).start()
    context = ssl.create_default_context(cafile=tls["cafile"])
    yield query, server, context
    server.stop()


def key_of(row) -> dict:
    return {"player": row["player"], "window_start": row["window_start"].isoformat()}


def fill(path: str, store: str = STORE) -> str:
    return path.replace("{name}", store)


def assert_refused(response: httpx.Response, error: str) -> dict:
    """401 in the service's error shape, with a Bearer challenge, never showing a token."""
    assert response.status_code == 401, (response.request.url, response.text)
    assert response.headers["www-authenticate"].startswith('Bearer realm="statekit"')
    detail = response.json()["detail"]
    assert detail["error"] == error and detail["message"]
    assert TOKEN not in response.text and WRONG not in response.text
    return detail


# --- the settings, without a server --------------------------------------------------------------
def test_tokens_are_random_and_bad_ones_are_named_without_being_shown(tls):
    tokens = {new_token() for _ in range(20)}
    assert len(tokens) == 20 and all(len(t) == 48 for t in tokens)
    assert ServingSecurity(token=next(iter(tokens))).token in tokens
    for bad, said in [("short-secret", "12 characters"), ("with a space " * 3, "39 characters"),
                      ("é" * 20, "20 characters"), (12345678901234567890, "<a int>")]:
        with pytest.raises(BadArgument, match=f"token.*{said}.*accepted: text of "
                                              f"{MIN_TOKEN} to"):
            ServingSecurity(token=bad)
    with pytest.raises(BadArgument) as error:
        ServingSecurity(token="short-secret")
    assert "short-secret" not in str(error.value)
    assert "r" * 24 not in repr(ServingSecurity(token=TOKEN))
    assert repr(ServingSecurity(token=TOKEN)).startswith("ServingSecurity(token=<40 characters>")


def test_tls_files_are_checked_and_named(tls, tmp_path):
    missing = str(tmp_path / "nope.pem")
    with pytest.raises(BadArgument, match=f"certfile.*{missing}.*an existing PEM file"):
        ServingSecurity(certfile=missing, keyfile=tls["keyfile"])
    with pytest.raises(BadArgument, match="keyfile.*certfile and keyfile together"):
        ServingSecurity(certfile=tls["certfile"])
    other = trustme.CA().issue_cert("127.0.0.1")  # a key that is not the certificate's
    other.private_key_pem.write_to_path(tmp_path / "other.pem")
    with pytest.raises(BadArgument, match="certfile/keyfile.*other.pem.*unencrypted key"):
        ServingSecurity(certfile=tls["certfile"], keyfile=str(tmp_path / "other.pem"))
    with pytest.raises(BadArgument, match="cafile.*nope.pem"):
        ServingSecurity(cafile=missing)
    with pytest.raises(BadArgument, match="verify: False.*never unchecked"):
        client_context(False)
    (tmp_path / "junk.pem").write_text("not a certificate")
    with pytest.raises(BadArgument, match="verify.*junk.pem.*a PEM file of CA certificates"):
        client_context(tmp_path / "junk.pem")
    secure = ServingSecurity(token=TOKEN, **tls)
    assert secure.scheme == "https" and secure.url("0.0.0.0", 8123) == "https://127.0.0.1:8123"
    assert secure.uvicorn_options() == {"ssl_certfile": tls["certfile"],
                                        "ssl_keyfile": tls["keyfile"]}
    assert ServingSecurity.from_dict(secure.to_dict()) == secure


def test_the_token_is_found_however_it_is_written_and_taken_out_of_the_query():
    def scope(query: bytes = b"", header: bytes | None = None) -> dict:
        headers = [(b"host", b"x")] + ([(b"authorization", header)] if header else [])
        return {"type": "http", "path": "/metadata", "query_string": query, "headers": headers}

    quoted = "".join(f"%{ord(c):02X}" for c in TOKEN).encode()
    for query in (b"token=" + TOKEN.encode(), b"%74oken=" + quoted, b"tok%65n=" + quoted):
        assert refusal(TOKEN, scope(b"key=%7B%7D&" + query + b"&local=true")) == (
            None, b"key=%7B%7D&local=true")
    for header in (b"Bearer " + TOKEN.encode(), b"bearer  " + TOKEN.encode() + b" "):
        assert refusal(TOKEN, scope(b"local=true", header)) == (None, None)  # query untouched
    missing, _ = refusal(TOKEN, scope(b"tokens=" + TOKEN.encode()))
    assert missing["error"] == "MissingToken"
    for header in (TOKEN.encode(), b"Bearer", b"Basic " + TOKEN.encode()):
        error, _ = refusal(TOKEN, scope(header=header))
        assert error["error"] == "BadToken" and TOKEN not in error["message"]
    error, _ = refusal(TOKEN, scope(b"token=" + TOKEN.encode() + b"x"))
    assert "41 characters" in error["message"] and TOKEN not in error["message"]


def test_only_non_loopback_addresses_get_a_token_unasked():
    for host in ("0.0.0.0", "::", "192.0.2.7", "serving.example"):
        security, generated = settle(host, None)
        assert generated and len(security.token) == 48
    for host in ("127.0.0.1", "127.0.0.2", "::1", "localhost"):
        assert settle(host, None) == (ServingSecurity(), False)
    given = ServingSecurity(token=TOKEN)
    assert settle("0.0.0.0", given) == (given, False)
    assert settle("127.0.0.1", given) == (given, False)  # asked for on loopback: kept
    with pytest.raises(BadArgument, match="security.*a ServingSecurity"):
        settle("0.0.0.0", {"token": TOKEN})


# --- every endpoint, plain HTTP and TLS ----------------------------------------------------------
@pytest.mark.timeout(300)
def test_every_endpoint_needs_the_token_and_the_schema_says_so(remote):
    _, server, context = remote
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(verify=context, timeout=30) as http:
        assert http.get(f"{server.url}/health").json()["status"] == "ok"  # open: a probe
        assert_refused(http.get(f"{server.url}/openapi.json"), "MissingToken")
        schema = http.get(f"{server.url}/openapi.json", headers=auth).json()
        operations = [(path, method) for path, item in schema["paths"].items()
                      for method in item]
        assert ("/stores/{name}/get", "get") in operations and len(operations) >= 10
        assert set(schema["components"]["securitySchemes"]) == {"bearerToken", "tokenQuery"}
        for path, method in operations + [(p, "get") for p in UNLISTED]:
            if path == "/health":
                assert "security" not in schema["paths"][path][method]
                continue
            if path in schema["paths"]:  # documented: the schemes and the 401 answer
                operation = schema["paths"][path][method]
                assert operation["security"] == [{"bearerToken": []}, {"tokenQuery": []}]
                assert "WWW-Authenticate" in operation["responses"]["401"]["headers"]
            call = functools.partial(http.request, method.upper(), f"{server.url}{fill(path)}")

            assert "Authorization: Bearer" in assert_refused(call(), "MissingToken")["message"]
            said = assert_refused(call(headers={"Authorization": f"Bearer {WRONG}"}),
                                  "BadToken")
            assert "Authorization header (40 characters)" in said["message"]
            wrong = call(params={"token": WRONG})
            assert "invalid_token" in wrong.headers["www-authenticate"]
            assert "query parameter" in assert_refused(wrong, "BadToken")["message"]
            assert "is not 'Bearer <token>'" in assert_refused(
                call(headers={"Authorization": f"Basic {TOKEN}"}), "BadToken")["message"]
            # the right token, and a wrong one beside it: refused (every token sent must be it)
            assert_refused(call(headers=auth, params={"token": WRONG}), "BadToken")
            by_header, by_query = call(headers=auth), call(params={"token": TOKEN})
            for answer in (by_header, by_query):
                assert answer.status_code != 401, (path, answer.text)
                assert TOKEN not in answer.text
            assert by_header.status_code == by_query.status_code, path


def test_the_right_token_answers_as_without_one_on_loopback(remote, whole):
    query, server, context = remote
    row = query.snapshot().iloc[0]
    params = {"key": json.dumps(key_of(row))}
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(verify=context, timeout=30) as http:
        by_header = http.get(f"{server.url}/stores/{STORE}/get", params=params,
                             headers=auth).json()
        by_query = http.get(f"{server.url}/stores/{STORE}/get",
                            params={**params, "token": TOKEN}).json()
        assert by_header["rows"] == by_query["rows"]
        assert by_header["rows"][0]["count"] == row["count"]
        assert http.get(f"{server.url}/metadata", headers=auth).json()["instance"] == "i0"
        # a wrong token on a POST with a body, then the same kept connection goes on
        assert_refused(http.post(f"{server.url}/assignment", json={"x": 1},
                                 headers={"Authorization": f"Bearer {WRONG}"}), "BadToken")
        assert http.post(f"{server.url}/assignment", json={"x": 1},
                         headers=auth).status_code == 422
    # statekit's own client: the header, and a refusal named without the token
    with ServingClient({"i0": server.url}, token=TOKEN, verify=context) as client:
        assert client.get(key_of(row)).value["count"] == row["count"]
    with pytest.raises(TokenRefused, match=r"/metadata refused a call without a token \(pass "
                                           r"token=\.\.\. to the client\): no token") as error:
        ServingClient({"i0": server.url}, verify=context)
    with pytest.raises(TokenRefused, match="refused this client's token: bad token") as wrong:
        ServingClient({"i0": server.url}, token=WRONG, verify=context)
    assert WRONG not in str(wrong.value) and TOKEN not in str(error.value)


def test_tls_is_checked_against_the_ca(remote, tls):
    _, server, _ = remote
    if not server.url.startswith("https://"):
        with pytest.raises(HttpError):  # plain HTTP where TLS is expected, and back
            HttpPool(token=TOKEN, verify=tls["cafile"]).get(
                server.url.replace("http://", "https://") + "/health")
        return
    assert HttpPool(verify=tls["cafile"]).get(f"{server.url}/health").status == 200
    with pytest.raises(HttpError, match="CERTIFICATE_VERIFY_FAILED"):  # the system store
        HttpPool(token=TOKEN).get(f"{server.url}/health")
    with pytest.raises(HttpError):  # plain HTTP to the TLS port
        HttpPool(token=TOKEN).get(server.url.replace("https://", "http://") + "/health")


def test_loopback_stays_tokenless_unless_a_token_is_asked_for(whole, capsys):
    query, instance = whole
    row = query.snapshot().iloc[0]
    server = Server(create_app(instance)).start()
    try:
        assert server.security == ServingSecurity() and server.url.startswith("http://127.")
        assert httpx.get(f"{server.url}/metadata").json()["instance"] == "i0"
        schema = httpx.get(f"{server.url}/openapi.json").json()
        assert "securitySchemes" not in schema.get("components", {})
        assert ServingClient({"i0": server.url}).get(key_of(row)).value["count"] == row["count"]
    finally:
        server.stop()
    server = Server(create_app(instance), security=ServingSecurity(token=TOKEN)).start()
    try:
        assert_refused(httpx.get(f"{server.url}/metadata"), "MissingToken")
        assert httpx.get(f"{server.url}/metadata", params={"token": TOKEN}).status_code == 200
    finally:
        server.stop()
    server = Server(create_app(instance), "0.0.0.0", allow_remote=True).start()
    try:  # generated, printed once with the URL to use, and required
        token = server.security.token
        printed = capsys.readouterr().out
        assert f"{server.url}/metadata?token={token}" in printed and printed.count(token) == 2
        assert_refused(httpx.get(f"{server.url}/metadata"), "MissingToken")
        assert httpx.get(f"{server.url}/metadata",
                         headers={"Authorization": f"Bearer {token}"}).status_code == 200
    finally:
        server.stop()


# --- forwarded calls between instances -----------------------------------------------------------
@pytest.fixture(scope="module")
def pair(logged, broker, tmp_path_factory):
    """Two instances, each the only holder of its partitions, served on 0.0.0.0 with TOKEN;
    i0 forwards with the token, and a second server of i0 forwards without one."""
    query, _ = logged
    plan = assign(3, ["i0", "i1"], standbys=0)
    security = ServingSecurity(token=TOKEN)
    ports = {name: free_port("0.0.0.0") for name in ("i0", "i1", "bare")}
    urls = {name: security.url("0.0.0.0", ports[name]) for name in ("i0", "i1")}
    instances, servers = {}, []
    try:
        for name in ("i0", "i1"):
            instances[name] = caught_up(ServingInstance(
                name, broker, query.changelog_topic, tmp_path_factory.mktemp(name), plan),
                query)
            client = ServingClient(urls, local=instances[name], token=TOKEN)
            servers.append(Server(create_app(instances[name], client), "0.0.0.0", ports[name],
                                  allow_remote=True, security=security).start())
        bare = ServingClient(urls, local=instances["i0"])  # forwards without the token
        servers.append(Server(create_app(instances["i0"], bare), "0.0.0.0", ports["bare"],
                              allow_remote=True, security=security).start())
        yield query, urls, servers[-1].url
    finally:
        for server in servers:
            server.stop()
        for instance in instances.values():
            instance.close()


@pytest.mark.timeout(300)
def test_forwarded_calls_carry_the_token(pair):
    query, urls, bare = pair
    snapshot = query.snapshot()
    theirs = snapshot[snapshot["partition"] == 1].iloc[0]  # i1's partition, asked of i0
    key = key_of(theirs)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    params = {"key": json.dumps(key)}
    answer = httpx.get(f"{urls['i0']}/stores/{STORE}/get", params=params, headers=auth).json()
    assert answer["partitions"][0]["instance"] == "i1"
    assert answer["rows"][0]["count"] == theirs["count"]
    with ServingClient(urls, token=TOKEN) as client:
        assert client.get(key).value["count"] == theirs["count"]
        assert len(client.all().rows) == len(snapshot)
    # an instance forwarding without the token: the peer's refusal, named, as 502
    refused = httpx.get(f"{bare}/stores/{STORE}/get", params=params, headers=auth)
    assert refused.status_code == 502, refused.text
    detail = refused.json()["detail"]
    assert detail["error"] == "PeerRefusedToken"
    assert f"{urls['i1']}/stores/{STORE}/get refused a call without a token" in detail["message"]
    assert "share one token" in detail["message"] and TOKEN not in refused.text


# --- a cluster of instance processes -------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.timeout(400)
def test_a_cluster_serves_with_a_generated_token_over_tls(logged, broker, tls, tmp_path,
                                                          capsys):
    query, _ = logged
    row = query.snapshot().iloc[0]
    context = ssl.create_default_context(cafile=tls["cafile"])
    with serve(broker, query.changelog_topic, instances=2, standbys=1, host="0.0.0.0",
               allow_remote=True, workdir=tmp_path / "cluster",
               security=ServingSecurity(**tls)) as cluster:
        cluster.wait_ready(timeout=180)
        token = cluster.security.token
        printed = capsys.readouterr().out
        assert token and printed.count(token) == 2 and "2 instances" in printed
        assert all(url.startswith("https://127.0.0.1:") for url in cluster.urls.values())
        client = cluster.client()
        assert client.get(key_of(row)).value["count"] == row["count"]
        assert len(client.all().rows) == len(query.snapshot())
        with ServingClient(cluster.urls, token=token, verify=context) as own:
            assert own.get(key_of(row)).value["count"] == row["count"]
        with pytest.raises(TokenRefused, match="refused a call without a token"):
            ServingClient(cluster.urls, verify=context)
        for name, proc in cluster.procs.items():  # no instance shows the token
            for view in (["ps", "-ww", "-o", "args=", "-p", str(proc.pid)],
                         ["ps", "eww", "-p", str(proc.pid)]):
                shown = subprocess.run(view, capture_output=True, text=True, check=True).stdout
                assert "statekit.serve instance" in shown and token not in shown
            assert token.encode() not in Path(f"/proc/{proc.pid}/cmdline").read_bytes()
            assert token.encode() not in Path(f"/proc/{proc.pid}/environ").read_bytes()
            assert token not in cluster.log(name)
