"""How serving is secured: ``ServingSecurity`` (a token, TLS files) and the token's rules.

A description only, checked when built: the token (``check_token``: 16 to 512
printable ASCII characters, never shown in an error or a ``repr``) and the PEM
files, which must exist (a certificate with its unencrypted key, or neither). A
``ServeOptions`` carries one; the HTTP side that asks for the token, answers 401
and serves TLS with these files is ``statekit.serve.auth``.

Example:
    >>> security = ServingSecurity(token="s3cret-token-for-the-docs")
    >>> security                      # the token itself is never shown
    ServingSecurity(token=<25 characters>, certfile=None, keyfile=None, cafile=None)
    >>> security.url("0.0.0.0", 8123)  # the URL to use from this machine
    'http://127.0.0.1:8123'
    >>> ServingSecurity(token="short")
    Traceback (most recent call last):
    ...
    statekit.errors.BadArgument: bad token: '<a secret of 5 characters, not shown>'; \
accepted: text of 16 to 512 printable ASCII characters without spaces, e.g. \
statekit.options.security.new_token()
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from statekit.errors import BadArgument

MIN_TOKEN = 16  # characters of a given token: shorter ones are refused
MAX_TOKEN = 512


def new_token() -> str:
    """A fresh random token: 48 hex characters (192 bits), as Jupyter makes its own.

    >>> len(new_token()), new_token() != new_token()
    (48, True)
    """
    return secrets.token_hex(24)


def check_token(token: object, what: str = "token") -> str:
    """``token`` when it is usable: text of printable ASCII without spaces, ``MIN_TOKEN`` to
    ``MAX_TOKEN`` characters. The error names what is wrong without showing the token."""
    accepted = (f"text of {MIN_TOKEN} to {MAX_TOKEN} printable ASCII characters without "
                f"spaces, e.g. statekit.options.security.new_token()")
    if not isinstance(token, str):
        raise BadArgument(what, f"<a {type(token).__name__}>", accepted)
    if not MIN_TOKEN <= len(token) <= MAX_TOKEN or not all(33 <= ord(c) < 127 for c in token):
        raise BadArgument(what, f"<a secret of {len(token)} characters, not shown>", accepted)
    return token


def pem_file(path: object, what: str) -> str | None:
    """``path`` as text when it names an existing file (None stays None); ``what`` names it
    in the error."""
    if path is None:
        return None
    if not isinstance(path, str | os.PathLike):
        raise BadArgument(what, path, "the path of a PEM file")
    if not Path(path).is_file():
        raise BadArgument(what, str(path), "the path of an existing PEM file")
    return str(path)


@dataclass(frozen=True, repr=False)
class ServingSecurity:
    """How a serving instance is protected: its token and its TLS files.

    Args:
        token: the token callers must send (``check_token``'s rules); None: none asked for
            on loopback, one generated on any other address (``statekit.serve.auth.settle``).
        certfile, keyfile: the server's certificate (chain) and unencrypted key, PEM: the
            instance serves HTTPS with them. The certificate must name the address clients
            use (for a wildcard bind that is 127.0.0.1 from this machine).
        cafile: the CA certificates (PEM) clients and forwarding instances verify the
            instances' certificate against; None: the system's trust store.
    """

    token: str | None = None
    certfile: str | None = None
    keyfile: str | None = None
    cafile: str | None = None

    def __post_init__(self) -> None:
        if self.token is not None:
            check_token(self.token)
        cert, key = pem_file(self.certfile, "certfile"), pem_file(self.keyfile, "keyfile")
        if (cert is None) != (key is None):
            raise BadArgument("keyfile" if key is None else "certfile", None,
                              "certfile and keyfile together (both PEM), or neither")
        if cert is not None:
            try:
                ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(
                    cert, key, password=_no_password)
            except (ssl.SSLError, ValueError) as exc:
                raise BadArgument("certfile/keyfile", f"{cert} / {key}",
                                  f"a PEM certificate and its unencrypted key ({exc})") from None
        object.__setattr__(self, "certfile", cert)
        object.__setattr__(self, "keyfile", key)
        object.__setattr__(self, "cafile", pem_file(self.cafile, "cafile"))

    def __repr__(self) -> str:
        token = None if self.token is None else f"<{len(self.token)} characters>"
        return (f"ServingSecurity(token={token}, certfile={self.certfile!r}, "
                f"keyfile={self.keyfile!r}, cafile={self.cafile!r})")

    @property
    def scheme(self) -> str:
        """``https`` with a certificate, else ``http``."""
        return "https" if self.certfile else "http"

    def url(self, host: str, port: int) -> str:
        """The URL to reach an instance bound to ``host``:``port`` from this machine (a
        wildcard bind, 0.0.0.0 or ::, is reached on loopback)."""
        if host in ("0.0.0.0", ""):
            host = "127.0.0.1"
        elif host == "::":
            host = "::1"
        if ":" in host:
            host = f"[{host}]"
        return f"{self.scheme}://{host}:{port}"

    def uvicorn_options(self) -> dict[str, str]:
        """uvicorn's TLS settings (none without a certificate)."""
        if not self.certfile:
            return {}
        return {"ssl_certfile": self.certfile, "ssl_keyfile": self.keyfile}

    def to_dict(self) -> dict:
        """As JSON (the token included: send it only where ``ps`` cannot see it)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping | None) -> ServingSecurity:
        return cls(**(data or {}))


def _no_password() -> str:
    raise ValueError("the key is encrypted")


def check_security(security: object) -> ServingSecurity | None:
    """``security`` when it is a ``ServingSecurity`` or None; else BadArgument naming what was
    given without its contents (a dict's keys only: its values may be the token).

    Example:
        >>> check_security({"token": "s3cret-token-for-the-docs"})
        Traceback (most recent call last):
        ...
        statekit.errors.BadArgument: bad security: '<a dict of token, values not shown>'; \
accepted: a ServingSecurity(token, certfile, keyfile, cafile) or None, e.g. \
ServingSecurity(token=...)
    """
    if security is None or isinstance(security, ServingSecurity):
        return security
    if isinstance(security, Mapping):
        given = f"<a {type(security).__name__} of {', '.join(map(str, security)) or 'nothing'}"
        given += ", values not shown>"
    else:
        given = f"<a {type(security).__name__}, not shown>"
    raise BadArgument("security", given, "a ServingSecurity(token, certfile, keyfile, cafile) "
                                         "or None, e.g. ServingSecurity(token=...)")
