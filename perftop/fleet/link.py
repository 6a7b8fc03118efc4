"""The forwarder-collector handshake: a token proved by HMAC, never sent on the wire.

The collector greets each connection with a random nonce; the forwarder answers with one
JSON line naming itself (a session id, its host) and ``HMAC-SHA256(token, nonce + session)``;
the collector compares with :func:`hmac.compare_digest` and answers ``OK`` or ``DENIED
<why>``. Then the forwarder's bytes are a perftop stream (:mod:`perftop.wire`). The link is
authenticated, not encrypted: on an untrusted network, tunnel it (``ssh -L``).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import socket

from perftop.errors import UsageError
from perftop.events import FORMAT_VERSION

GREETING = "PERFTOP-COLLECT"
ENV_TOKEN = "PERFTOP_TOKEN"
ENV_HOST = "PERFTOP_HOST"  # the host name a node reports (default: its real one)
MAX_LINE = 4096
DEFAULT_PORT = 7470


def new_token() -> str:
    return secrets.token_urlsafe(24)


def node_host() -> str:
    """The name this node reports; ``PERFTOP_HOST`` overrides it (two nodes on one
    machine, tests, or a name nicer than the machine's)."""
    return os.environ.get(ENV_HOST) or socket.gethostname()


def greeting(nonce: str) -> bytes:
    return f"{GREETING} {FORMAT_VERSION} {nonce}\n".encode()


def parse_greeting(line: bytes) -> str:
    """The nonce of a collector's greeting; ValueError when it is not one we can talk to."""
    parts = line.decode(errors="replace").split()
    if len(parts) != 3 or parts[0] != GREETING:
        raise ValueError("the peer is not a perftop collector")
    if parts[1] != str(FORMAT_VERSION):
        raise ValueError(f"the collector speaks format {parts[1]}, this node {FORMAT_VERSION}")
    return parts[2]


def mac(token: str, nonce: str, session: str) -> str:
    return hmac.new(token.encode(), (nonce + session).encode(), hashlib.sha256).hexdigest()


def hello_line(token: str, nonce: str, session: str, host: str) -> bytes:
    body = {
        "v": FORMAT_VERSION,
        "session": session,
        "host": host,
        "mac": mac(token, nonce, session),
    }
    return json.dumps(body).encode() + b"\n"


WRONG_FORMAT = f"another format version (this collector reads {FORMAT_VERSION})"


def check_hello(line: bytes, token: str, nonce: str) -> tuple[str, str]:
    """(session, host) of a forwarder whose proof checks; ValueError(why) otherwise."""
    try:
        body = json.loads(line)
        session, host, proof = str(body["session"]), str(body["host"]), str(body["mac"])
    except (ValueError, KeyError, TypeError):
        raise ValueError("not a perftop forwarder") from None
    if body.get("v") != FORMAT_VERSION:
        raise ValueError(WRONG_FORMAT)  # never the peer's own words (refusals.py)
    if not hmac.compare_digest(proof, mac(token, nonce, session)):
        raise ValueError("wrong token")
    if not session or not host or len(host) > 200:
        raise ValueError("no node name")
    return session, host


def parse_addr(text: str, default_host: str = "127.0.0.1") -> tuple[str, int]:
    """``HOST:PORT``, ``[V6]:PORT`` or ``PORT`` (on ``default_host``)."""
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = default_host, text
    host = host.strip("[]") or default_host
    try:
        p = int(port)
    except ValueError:
        raise UsageError(f"{text!r}: expected HOST:PORT or PORT") from None
    if not 0 <= p <= 65535:
        raise UsageError(f"{text!r}: port out of range")
    return host, p


def token_from_env() -> str | None:
    tok = os.environ.get(ENV_TOKEN, "").strip()
    return tok or None
