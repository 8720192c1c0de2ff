"""Who is asking in a browser: the inbox's session cookie, its CSRF token, the call's origin.

Signing in with a token opens a session the store keeps (:meth:`Service.sign_in`) and sets
a cookie ``<session id>.<mac>``: a random id and an HMAC-SHA256 of it keyed with the server
secret (``SIGNOFF_SECRET`` or the 0600 secret file), never with anything in the database.
The store holds only the sha256 of the id, so a copy of the database signs nobody in;
changing the secret signs everyone out; signing out, revoking the token or the session's
age (:data:`SESSION_MAX_AGE`) ends it for every copy of the cookie. The CSRF token is a
second HMAC of the id, so pages carry it and the server checks it without storing it.

Every unsafe request (anything but GET, HEAD and OPTIONS) that authenticates by cookie
must carry the CSRF token, as ``X-CSRF-Token`` (the inbox's scripts) or a ``csrf`` form
field (its forms), and must not come from another origin.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.requests import HTTPConnection

from signoff.domain.principals import Principal
from signoff.domain.sessions import cookie_mac
from signoff.errors import NotAllowed, Unauthenticated
from signoff.service import Service

__all__ = [
    "COOKIE",
    "CSRF_HEADER",
    "SAFE_METHODS",
    "SESSION_MAX_AGE",
    "WebSession",
    "check_login_origin",
    "check_origin",
    "cookie_principal",
    "cookie_secure",
    "end_session",
    "open_session",
    "read_session",
    "session_key",
]

COOKIE = "signoff_session"
"""Name of the inbox's session cookie."""

CSRF_HEADER = "x-csrf-token"
"""Header the inbox's scripts send the CSRF token in."""

SESSION_MAX_AGE = 12 * 3600
"""Seconds a sign-in lasts."""

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

_MAX_COOKIE = 300


@dataclass(frozen=True)
class WebSession:
    """A signed-in person: who, and the CSRF token their pages must send back."""

    principal: Principal
    csrf: str
    cookie: str
    session_id: str


def session_key(conn: HTTPConnection) -> bytes:
    """The key the app signs session cookies with (derived from the server secret)."""
    key: bytes = conn.app.state.session_key
    return key


def _session(principal: Principal, key: bytes, session_id: str) -> WebSession:
    cookie = f"{session_id}.{cookie_mac(key, 'session', session_id)}"
    return WebSession(principal, cookie_mac(key, "csrf", session_id), cookie, session_id)


async def open_session(service: Service, key: bytes, token: str) -> WebSession:
    """Sign in with an approver's or admin's token (Unauthenticated, NotAllowed otherwise)."""
    session_id, principal = await service.sign_in(token, max_age=SESSION_MAX_AGE)
    return _session(principal, key, session_id)


async def read_session(service: Service, key: bytes, cookie: str | None) -> WebSession | None:
    """The session a cookie stands for, or None when absent, forged, ended, old or revoked."""
    if not cookie or len(cookie) > _MAX_COOKIE:
        return None
    session_id, dot, mac = cookie.partition(".")
    if not dot or not session_id:
        return None
    expected = cookie_mac(key, "session", session_id)
    # bytes: compare_digest refuses non-ASCII str, and a cookie may hold anything
    if not hmac.compare_digest(mac.encode("utf-8", "replace"), expected.encode()):
        return None
    principal = await service.session_principal(session_id)
    if principal is None:
        return None
    return _session(principal, key, session_id)


async def end_session(service: Service, session: WebSession) -> None:
    """Sign out: the session stops working for every copy of its cookie."""
    await service.sign_out(session.session_id)


def cookie_secure(conn: HTTPConnection) -> bool:
    """Whether the cookie gets the Secure flag: ``--secure-cookies``, or a trusted proxy's
    ``X-Forwarded-Proto: https`` (only with ``--trust-forwarded-proto``)."""
    state = conn.app.state
    if getattr(state, "secure_cookies", False):
        return True
    if getattr(state, "trust_forwarded_proto", False):
        forwarded = conn.headers.get("x-forwarded-proto", "")
        return forwarded.split(",")[0].strip().lower() == "https"
    return False


def _same_origin(conn: HTTPConnection, origin: str) -> bool:
    return urlsplit(origin).netloc == conn.headers.get("host", "")


def check_origin(conn: HTTPConnection) -> None:
    """Refuse a cookie-authenticated call that a page on another origin made."""
    origin = conn.headers.get("origin")
    if origin is None:
        # browsers send Origin on every cross-origin POST and WebSocket; its absence
        # means a same-origin navigation or a client that is not a browser
        return
    if not _same_origin(conn, origin):
        raise NotAllowed("cross-origin request refused")


def check_login_origin(conn: HTTPConnection) -> None:
    """Refuse a sign-in form posted from another site (login CSRF).

    A browser says where a POST comes from: ``Sec-Fetch-Site`` (which pages cannot forge)
    must be ``same-origin``; without it, ``Origin`` must be this server (``null``, sent by
    sandboxed and privacy-stripped pages, is refused). A client that sends neither is not
    a browser acting for someone else, so it may sign in (curl, scripts).
    """
    site = conn.headers.get("sec-fetch-site")
    if site is not None:
        if site != "same-origin":
            raise NotAllowed(f"sign-in from another site refused (Sec-Fetch-Site: {site[:40]})")
        return
    origin = conn.headers.get("origin")
    if origin is not None and not _same_origin(conn, origin):
        raise NotAllowed("sign-in from another origin refused")


async def cookie_principal(conn: HTTPConnection) -> Principal | None:
    """The principal behind the inbox's session cookie, checking CSRF on unsafe calls."""
    service: Service = conn.app.state.service
    session = await read_session(service, session_key(conn), conn.cookies.get(COOKIE))
    if session is None:
        if conn.cookies.get(COOKIE):
            raise Unauthenticated("the inbox session has expired; sign in again")
        return None
    check_origin(conn)
    if conn.scope["type"] == "http" and conn.scope["method"] not in SAFE_METHODS:
        sent = conn.headers.get(CSRF_HEADER, "")
        if not hmac.compare_digest(sent.encode(), session.csrf.encode()):
            raise NotAllowed("missing or wrong CSRF token")
    return session.principal
