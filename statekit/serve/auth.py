"""Serving beyond loopback: a token on every call, and TLS.

A serving instance bound to a loopback address answers anyone on this machine,
as before. Bound to any other address (``allow_remote=True``) it answers only
callers that send its **token**, like Jupyter: one is generated
(``secrets.token_hex(24)``) and printed once with the URL to use, unless the
caller gives one. ``/health`` stays open (a load balancer's probe); every other
path — the queries, ``/metadata``, ``POST /assignment``, ``/docs``,
``/openapi.json``, an unknown path — needs the token. A token may be asked for
on loopback too (``ServingSecurity(token=new_token())``).

The token travels as an ``Authorization: Bearer <token>`` header (what
statekit's own client, the cluster and instances forwarding to each other send:
headers stay out of URLs, access logs and browser history) or as a ``token``
query parameter (``?token=...``, as Jupyter accepts: a link one can paste into a
browser or a notebook). The check compares in constant time
(``hmac.compare_digest``) and strips the query parameter before the service
sees the request. A missing or wrong token gets 401 with ``WWW-Authenticate:
Bearer`` (RFC 6750) and the service's JSON error shape, naming what is wrong
(no token, which way it came, its length) and never echoing a token.

TLS: given ``certfile`` and ``keyfile`` (PEM, key unencrypted), uvicorn serves
HTTPS (``ssl_certfile`` / ``ssl_keyfile``); clients verify the instances'
certificate against ``cafile`` (PEM) or, without one, the system's trust store.

``ServingSecurity`` carries these together (a description, with the token's rules:
``statekit.options.security``); this module owns the check (``install`` puts it in an
app, ``arm`` sets what it checks), which token a host serves with (``settle``) and the
client's side (the header, the TLS context), and everything else calls it.

Example:
    >>> security = ServingSecurity(token="s3cret-token-for-the-docs")
    >>> security                      # the token itself is never shown
    ServingSecurity(token=<25 characters>, certfile=None, keyfile=None, cafile=None)
    >>> bearer(security.token)["Authorization"].startswith("Bearer ")
    True
    >>> needs_token("0.0.0.0"), needs_token("127.0.0.1"), needs_token("localhost")
    (True, False, False)
    >>> security.url("0.0.0.0", 8123)  # the URL to use from this machine
    'http://127.0.0.1:8123'
"""

from __future__ import annotations

import dataclasses
import hmac
import ipaddress
import json
import os
import ssl
from collections.abc import Mapping
from urllib.parse import unquote_to_bytes

from statekit.errors import BadArgument, TokenRefused
from statekit.options.security import (
    ServingSecurity,
    check_security,
    check_token,
    new_token,
    pem_file,
)

#: The one path answered without a token (a liveness probe says nothing about the state).
OPEN_PATHS = frozenset({"/health"})
#: The query parameter a token may travel in (as Jupyter's ``?token=``).
QUERY_PARAM = "token"
REALM = 'Bearer realm="statekit"'
#: The OpenAPI security schemes (either one is enough).
SCHEMES = {
    "bearerToken": {"type": "http", "scheme": "bearer",
                    "description": "Authorization: Bearer <token> (statekit's own clients)"},
    "tokenQuery": {"type": "apiKey", "in": "query", "name": QUERY_PARAM,
                   "description": "?token=<token> (a link for a browser)"},
}


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1).

    >>> is_loopback("127.0.0.2"), is_loopback("::1"), is_loopback("0.0.0.0")
    (True, True, False)
    """
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def needs_token(host: str) -> bool:
    """True when serving on ``host`` needs a token: every address but loopback."""
    return not is_loopback(host)


def settle(host: str, security: ServingSecurity | None) -> tuple[ServingSecurity, bool]:
    """The security to serve ``host`` with, and whether its token was generated here: a
    non-loopback host without a token gets a new one; loopback keeps what was given."""
    security = check_security(security) or ServingSecurity()
    if security.token is None and needs_token(host):
        return dataclasses.replace(security, token=new_token()), True
    return security, False


def announce(url: str, security: ServingSecurity, what: str = "serving") -> None:
    """Print, once, the URL to use with a generated token (as Jupyter does)."""
    print(f"statekit {what} on {url} needs its token (generated): {security.token}\n"
          f"  e.g. {url}/metadata?{QUERY_PARAM}={security.token}\n"
          f"  or the header 'Authorization: Bearer <token>'; "
          f"ServingClient(urls, token=...) sends it", flush=True)


# --- the client side -------------------------------------------------------------------------
def bearer(token: str | None) -> dict[str, str]:
    """The header that carries ``token`` (none without a token)."""
    return {} if token is None else {"Authorization": f"Bearer {check_token(token)}"}


def client_context(verify: str | os.PathLike | ssl.SSLContext | None) -> ssl.SSLContext | None:
    """How a client checks an instance's certificate: ``verify`` as a CA file (PEM) or an
    ``ssl.SSLContext`` of the caller's; None: None (the system's trust store, made when an
    https:// URL is first met)."""
    if verify is None or isinstance(verify, ssl.SSLContext):
        return verify
    if isinstance(verify, bool):
        raise BadArgument("verify", verify, "a CA file (PEM path), an ssl.SSLContext, or None "
                                            "for the system's trust store (never unchecked)")
    cafile = pem_file(verify, "verify")
    try:
        return ssl.create_default_context(cafile=cafile)
    except ssl.SSLError as exc:
        raise BadArgument("verify", cafile, f"a PEM file of CA certificates ({exc})") from None


def refused(method: str, url: str, content: bytes, token_sent: bool) -> TokenRefused:
    """The exception of a 401 answer: who refused, and what it said (never the token)."""
    try:
        said = json.loads(content)["detail"]["message"]
    except (ValueError, KeyError, TypeError):
        said = content[:200].decode("utf-8", "replace")
    sent = "this client's token" if token_sent else "a call without a token"
    hint = "" if token_sent else " (pass token=... to the client)"
    return TokenRefused(f"{method} {url.split('?', 1)[0]} refused {sent}{hint}: {said}")


# --- the server side -------------------------------------------------------------------------
def _presented(scope: Mapping) -> tuple[list[tuple[str, bytes | None]], bytes | None]:
    """The tokens a request carries (where each came from, its bytes; None for an
    Authorization header that is not ``Bearer <token>``), and the query string without its
    token parameters (None when it had none)."""
    found: list[tuple[str, bytes | None]] = []
    for name, value in scope.get("headers") or ():
        if name == b"authorization":
            scheme, _, credential = value.strip().partition(b" ")
            found.append(("the Authorization header", credential.strip()
                          if scheme.lower() == b"bearer" and credential.strip() else None))
    query = scope.get("query_string") or b""
    if not query:
        return found, None
    kept = []
    for part in query.split(b"&"):
        name, _, value = part.partition(b"=")
        if _unquoted(name) == _PARAM:
            found.append(("the token query parameter", _unquoted(value)))
        else:
            kept.append(part)
    return found, (b"&".join(kept) if len(kept) < query.count(b"&") + 1 else None)


_PARAM = QUERY_PARAM.encode()


def _unquoted(text: bytes) -> bytes:
    """A query string's name or value as the bytes it stands for (``+`` a space)."""
    return unquote_to_bytes(text.replace(b"+", b" ")) if b"%" in text or b"+" in text else text


def refusal(token: str, scope: Mapping) -> tuple[dict, bytes | None] | None:
    """None when the request carries ``token`` (every token it carries must be it, each
    compared in constant time), with its query string less the token; else the error."""
    found, query = _presented(scope)
    if not found:
        return {"error": "MissingToken", "message": (
            "no token: this service needs its token, as the header 'Authorization: Bearer "
            f"<token>' or the query parameter {QUERY_PARAM}=<token> (the token was printed "
            "when serving started; ServingClient(urls, token=...))")}, None
    expected = token.encode()
    for where, sent in found:
        if sent is None:
            return {"error": "BadToken", "message": (
                f"bad token: {where} is not 'Bearer <token>'; accepted: 'Authorization: "
                f"Bearer <token>' or {QUERY_PARAM}=<token>")}, None
        if not hmac.compare_digest(sent, expected):
            return {"error": "BadToken", "message": (
                f"bad token: the token in {where} ({len(sent)} characters) is not this "
                "service's token; accepted: the token printed when serving started")}, None
    return None, query


class TokenCheck:
    """ASGI middleware: every request but ``OPEN_PATHS`` carries the token of
    ``state.security`` (nothing is checked while it has none); 401 otherwise."""

    def __init__(self, app, state):
        self.app, self.state = app, state

    async def __call__(self, scope, receive, send):
        security = getattr(self.state, "security", None)
        if (security is None or security.token is None or scope["type"] not in
                ("http", "websocket") or scope["path"] in OPEN_PATHS):
            return await self.app(scope, receive, send)
        error, query = refusal(security.token, scope)
        if error is None:
            if query is not None:  # the service below never sees the token
                scope = {**scope, "query_string": query}
            return await self.app(scope, receive, send)
        if scope["type"] == "websocket":
            return await send({"type": "websocket.close", "code": 1008})
        body = json.dumps({"detail": error}, separators=(",", ":")).encode("ascii")
        challenge = REALM + (', error="invalid_token"' if error["error"] == "BadToken" else "")
        await send({"type": "http.response.start", "status": 401, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
            (b"www-authenticate", challenge.encode())]})
        await send({"type": "http.response.body", "body": body})


def install(app, error_model: type) -> None:
    """Put the token check in FastAPI ``app`` (it checks nothing until ``arm``): the
    middleware, a 502 for a forwarded call a peer refused, and — once armed — the OpenAPI
    security schemes and 401/502 answers of every path but ``OPEN_PATHS``."""
    from starlette.responses import JSONResponse

    app.state.security = None
    app.add_middleware(TokenCheck, state=app.state)

    def peer_refused(request, exc: TokenRefused):
        return JSONResponse({"detail": {"error": "PeerRefusedToken", "message": (
            f"a forwarded call was refused: {exc} (the instances must share one token)")}},
            502)

    app.add_exception_handler(TokenRefused, peer_refused)
    plain_openapi = app.openapi

    def openapi() -> dict:
        if app.openapi_schema is None:
            schema = plain_openapi()
            if app.state.security is not None and app.state.security.token is not None:
                _document(schema, error_model.__name__)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi


def arm(app, security: ServingSecurity) -> None:
    """Make ``app`` (see ``install``) check ``security.token`` (None: check nothing)."""
    if not hasattr(getattr(app, "state", None), "security"):
        if security.token is None:
            return  # nothing to check: any ASGI app serves on loopback
        raise BadArgument("app", app, "an app made by create_app (it installs the token check)")
    app.state.security = security
    app.openapi_schema = None


def _document(schema: dict, error_name: str) -> None:
    """Add the security schemes and the 401 (and a forwarded call's 502) answers."""
    error = {"application/json": {"schema": {"$ref": f"#/components/schemas/{error_name}"}}}
    schema.setdefault("components", {}).setdefault("securitySchemes", {}).update(SCHEMES)
    for path, operations in schema.get("paths", {}).items():
        if path in OPEN_PATHS:
            continue
        for operation in operations.values():
            operation["security"] = [{name: []} for name in SCHEMES]
            operation.setdefault("responses", {})["401"] = {
                "description": "no token, or not this service's (what is wrong is named; the "
                               "token is never echoed)", "content": error,
                "headers": {"WWW-Authenticate": {"description": "Bearer (RFC 6750)",
                                                 "schema": {"type": "string"}}}}
            operation["responses"]["502"] = {
                "description": "a call forwarded to another instance was refused its token",
                "content": error}
