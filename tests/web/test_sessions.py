"""The web inbox's sign-in: the session cookie, CSRF, security headers and escaping."""

from __future__ import annotations

import asyncio
import html
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpx
import pytest
from fastapi import FastAPI
from starlette.types import Message, Scope

from signoff.domain.principals import Role, TokenRecord
from signoff.domain.sessions import SessionRecord, cookie_mac, hash_session_id, new_session_id
from signoff.server.app import API, create_app
from signoff.server.auth import COOKIE, SESSION_MAX_AGE
from signoff.service import Service
from signoff.store.base import Write
from signoff.testing import AGENT, FakeClock

BASE = "http://signoff.test"
HOST = "signoff.test"
PAGES = ["/", "/history", "/grants", "/requests/req_abc", "/chat"]
CALL: dict[str, Any] = {
    "session_id": "s1",
    "tool_name": "shell",
    "tool_args": {"command": "ls"},
    "tool_call_id": "call-1",
}
FORM = {"content-type": "application/x-www-form-urlencoded"}
SAME_ORIGIN = {**FORM, "origin": BASE, "sec-fetch-site": "same-origin"}
"""What a browser sends with the sign-in page's own form."""

SignIn = Callable[[str, Role], Awaitable[httpx.AsyncClient]]


@pytest.fixture
def app(service: Service) -> FastAPI:
    """The whole app (API, pages, static files) over the backend-parametrized service."""
    return create_app(service, sweep=False, heartbeat=0.2)


@pytest.fixture
async def anon(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """A client with no token: a browser that has not signed in."""
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as c:
        yield c


@pytest.fixture
async def sign_in(app: FastAPI, service: Service) -> AsyncIterator[SignIn]:
    """Makes browsers: a fresh token of a role, signed in by link, the cookie in the jar."""
    clients: list[httpx.AsyncClient] = []

    async def make(name: str, role: Role) -> httpx.AsyncClient:
        token, _ = await service.create_token(name, role)
        client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE)
        clients.append(client)
        response = await post_login(client, token)
        assert response.status_code == 200, response.text
        assert client.cookies.get(COOKIE)
        return client

    yield make
    for client in clients:
        await client.aclose()


async def post_login(client: httpx.AsyncClient, token: str, next_: str = "/") -> httpx.Response:
    """Sign in as the confirm button does: the form POSTed from the sign-in page."""
    body = httpx.QueryParams({"token": token, "next": next_})
    return await client.post("/login", content=str(body), headers=SAME_ORIGIN)


def cookie_header(response: httpx.Response) -> list[str]:
    """The response's Set-Cookie header for the session cookie, split into lowercase parts."""
    headers = [h for h in response.headers.get_list("set-cookie") if h.startswith(f"{COOKIE}=")]
    assert len(headers) == 1, response.headers.get_list("set-cookie")
    return [part.strip().lower() for part in headers[0].split(";")]


def refresh_target(response: httpx.Response) -> str:
    """Where the sign-in page's meta refresh sends the browser (unescaped)."""
    found = re.search(r'<meta http-equiv="refresh" content="0;url=([^"]*)">', response.text)
    assert found is not None, response.text
    return html.unescape(found.group(1))


def browser_url(target: str) -> str:
    """The absolute URL a browser navigates to: URL parsing drops tabs and newlines."""
    return urljoin(f"{BASE}/login", re.sub("[\t\n\r]", "", target))


def csrf_of(page: str) -> str:
    """The CSRF token a page shell carries in its meta tag."""
    found = re.search(r'<meta name="csrf-token" content="([^"]+)">', page)
    assert found is not None, page
    return html.unescape(found.group(1))


async def submit(service: Service) -> str:
    """A pending approval request from an agent; its id."""
    return (await service.submit(CALL, AGENT)).request.id


async def revoke(service: Service, record: TokenRecord) -> None:
    """Revoke a token by replacing its stored record (there is no revoke call in the service)."""
    now = service.clock()
    await service.store.commit(
        Write(at=now, tokens=(record.model_copy(update={"revoked_at": now}),))
    )


class InlineCode(HTMLParser):
    """Collects what `script-src 'self'; style-src 'self'` would refuse or what is inline."""

    def __init__(self) -> None:
        super().__init__()
        self.problems: list[str] = []
        self.scripts = 0
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        """Flag scripts without src, <style>, style= and on*= attributes, javascript: URLs."""
        names = {name.lower() for name, _ in attrs}
        if tag == "script":
            self.scripts += 1
            self._in_script = True
            if "src" not in names:
                self.problems.append("<script> without src")
        if tag == "style":
            self.problems.append("<style> element")
        self.problems += [f"<{tag} {n}=>" for n in names if n == "style" or n.startswith("on")]
        self.problems += [
            f"<{tag} {n}={v}>"
            for n, v in attrs
            if (v or "").strip().lower().startswith("javascript:")
        ]

    def handle_endtag(self, tag: str) -> None:
        """Leave a script element."""
        if tag == "script":
            self._in_script = False

    def handle_data(self, data: str) -> None:
        """Flag text inside a script element."""
        if self._in_script and data.strip():
            self.problems.append(f"inline script body {data.strip()[:40]!r}")


def inline_code(page: str) -> InlineCode:
    """Parse a page and return what it has inline."""
    parser = InlineCode()
    parser.feed(page)
    parser.close()
    return parser


# -- 1. signing in by link -----------------------------------------------------------------


async def test_sign_in_link_asks_to_confirm_and_sets_no_cookie(
    anon: httpx.AsyncClient, service: Service
) -> None:
    """GET /login?token= shows who the token is and a button POSTing it; no cookie yet."""
    token, _ = await service.create_token("alice", "approver")
    response = await anon.get("/login", params={"token": token, "next": "/grants"})
    assert response.status_code == 200
    assert response.headers["cache-control"] == "no-store"
    assert response.headers.get_list("set-cookie") == []
    assert "Sign in as alice (approver)?" in response.text
    assert '<form method="post" action="/login">' in response.text
    assert f'<input type="hidden" name="token" value="{token}">' in response.text
    assert '<input type="hidden" name="next" value="/grants">' in response.text
    assert "http-equiv" not in response.text
    assert (await anon.get("/")).status_code == 303


async def test_confirmed_sign_in_sets_a_strict_http_only_cookie(
    anon: httpx.AsyncClient, service: Service
) -> None:
    """The confirm POST answers 200 with a meta refresh to / and an HttpOnly Strict cookie."""
    token, _ = await service.create_token("alice", "approver")
    response = await post_login(anon, token)
    assert response.status_code == 200
    assert response.headers["cache-control"] == "no-store"
    assert refresh_target(response) == "/"
    parts = cookie_header(response)
    assert parts[0] != f"{COOKIE}=" and parts[0] != f'{COOKIE}=""'
    assert "httponly" in parts
    assert "samesite=strict" in parts
    assert "path=/" in parts
    assert f"max-age={SESSION_MAX_AGE}" in parts
    assert "secure" not in parts
    assert token not in response.headers["set-cookie"]


async def test_admin_token_signs_in_too(sign_in: SignIn) -> None:
    """Admins decide as well, so their token opens the inbox like an approver's."""
    browser = await sign_in("root", "admin")
    me = await browser.get(f"{API}/me")
    assert me.status_code == 200 and me.json() == {"name": "root", "role": "admin"}


# -- 2. the page shells ----------------------------------------------------------------------


@pytest.mark.parametrize("path", PAGES)
async def test_pages_carry_the_user_and_csrf_token(sign_in: SignIn, path: str) -> None:
    """Signed in, every page shell is 200 HTML with the user's name and a CSRF meta tag."""
    browser = await sign_in("alice", "approver")
    response = await browser.get(path)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert response.headers["cache-control"] == "no-store"
    assert len(csrf_of(response.text)) >= 32
    assert '<meta name="signoff-user" content="alice">' in response.text
    assert '<span class="who">alice <small>(approver)</small></span>' in response.text


async def test_request_page_names_its_request(sign_in: SignIn) -> None:
    """/requests/<id> tells its script which request to show."""
    browser = await sign_in("alice", "approver")
    response = await browser.get("/requests/req_abc")
    assert 'data-page="request" data-request-id="req_abc"' in response.text


@pytest.mark.parametrize("path", PAGES)
async def test_pages_without_a_cookie_redirect_to_login(anon: httpx.AsyncClient, path: str) -> None:
    """Not signed in, every page shell is a 303 to /login?next=<that path>."""
    response = await anon.get(path)
    assert response.status_code == 303
    assert response.headers["location"] == f"/login?next={path}"


async def test_login_form_when_signed_out_and_redirect_when_signed_in(sign_in: SignIn) -> None:
    """/login without a token shows the form, or moves a signed-in browser on to next."""
    browser = await sign_in("alice", "approver")
    assert (await browser.get("/login", params={"next": "/grants"})).headers[
        "location"
    ] == "/grants"
    browser.cookies.clear()
    form = await browser.get("/login", params={"next": "/grants"})
    assert form.status_code == 200
    assert '<form method="post" action="/login">' in form.text
    assert '<input type="hidden" name="next" value="/grants">' in form.text


# -- 3. the API by cookie, and CSRF ----------------------------------------------------------


async def test_api_reads_work_with_only_the_cookie(sign_in: SignIn, service: Service) -> None:
    """A signed-in browser lists requests with no Authorization header and no CSRF token."""
    request_id = await submit(service)
    browser = await sign_in("alice", "approver")
    listed = await browser.get(f"{API}/requests")
    assert listed.status_code == 200
    assert [r["id"] for r in listed.json()["items"]] == [request_id]
    assert (await browser.get(f"{API}/me")).json() == {"name": "alice", "role": "approver"}


async def test_decision_by_cookie_needs_the_csrf_header(sign_in: SignIn, service: Service) -> None:
    """Without X-CSRF-Token, or with a wrong one, a cookie decision is 403 and changes nothing."""
    request_id = await submit(service)
    browser = await sign_in("alice", "approver")
    csrf = csrf_of((await browser.get("/")).text)
    url = f"{API}/requests/{request_id}/decision"

    missing = await browser.post(url, json={"type": "approve"})
    assert missing.status_code == 403
    assert missing.json()["error"] == "NotAllowed"
    wrong = await browser.post(url, json={"type": "approve"}, headers={"X-CSRF-Token": "x" + csrf})
    assert wrong.status_code == 403
    empty = await browser.post(url, json={"type": "approve"}, headers={"X-CSRF-Token": ""})
    assert empty.status_code == 403

    assert (await browser.get(f"{API}/requests/{request_id}")).json()["status"] == "pending"
    assert (await service.get(request_id)).status == "pending"

    ok = await browser.post(
        url, json={"type": "approve"}, headers={"X-CSRF-Token": csrf, "Origin": BASE}
    )
    assert ok.status_code == 200, ok.text
    assert ok.json()["status"] == "approved"
    assert ok.json()["decision"]["decided_by"] == "alice"


async def test_cross_origin_call_with_the_right_csrf_token_is_refused(
    sign_in: SignIn, service: Service
) -> None:
    """A cookie call from another origin is 403 even with the right CSRF token."""
    request_id = await submit(service)
    browser = await sign_in("alice", "approver")
    csrf = csrf_of((await browser.get("/")).text)
    refused = await browser.post(
        f"{API}/requests/{request_id}/decision",
        json={"type": "approve"},
        headers={"X-CSRF-Token": csrf, "Origin": "http://evil.example"},
    )
    assert refused.status_code == 403
    assert refused.json()["error"] == "NotAllowed"
    assert (await service.get(request_id)).status == "pending"
    read = await browser.get(f"{API}/requests", headers={"Origin": "http://evil.example"})
    assert read.status_code == 403


async def test_csrf_token_belongs_to_its_session(sign_in: SignIn, service: Service) -> None:
    """One session's CSRF token does not unlock another session of the same person."""
    request_id = await submit(service)
    first = await sign_in("alice", "approver")
    second = await sign_in("bob", "approver")
    csrf_first = csrf_of((await first.get("/")).text)
    refused = await second.post(
        f"{API}/requests/{request_id}/decision",
        json={"type": "approve"},
        headers={"X-CSRF-Token": csrf_first},
    )
    assert refused.status_code == 403


async def test_bearer_calls_need_no_csrf_token(anon: httpx.AsyncClient, service: Service) -> None:
    """A bearer token is not ambient authority: its unsafe calls need no CSRF token."""
    request_id = await submit(service)
    token, _ = await service.create_token("alice", "approver")
    decided = await anon.post(
        f"{API}/requests/{request_id}/decision",
        json={"type": "approve"},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert decided.status_code == 200 and decided.json()["status"] == "approved"


# -- 4. bad tokens and bad cookies -----------------------------------------------------------


async def test_unknown_token_gets_401_and_no_cookie(anon: httpx.AsyncClient) -> None:
    """An unknown token gets the 401 sign-in page and no cookie."""
    response = await anon.get("/login", params={"token": "so_not-a-real-token"})
    assert response.status_code == 401
    assert "Unknown or revoked token." in response.text
    assert response.headers.get_list("set-cookie") == []
    assert COOKIE not in anon.cookies


async def test_agent_token_gets_403_and_no_cookie(
    anon: httpx.AsyncClient, service: Service
) -> None:
    """An agent's token cannot sign in to the inbox: 403 page, no cookie."""
    token, _ = await service.create_token("bot", "agent")
    response = await anon.get("/login", params={"token": token})
    assert response.status_code == 403
    assert "Agent tokens cannot sign in" in response.text
    assert response.headers.get_list("set-cookie") == []
    assert (await anon.get("/")).status_code == 303


async def test_revoked_token_ends_its_sessions(anon: httpx.AsyncClient, service: Service) -> None:
    """Once its token is revoked a cookie opens neither the API nor the pages."""
    token, record = await service.create_token("alice", "approver")
    assert (await post_login(anon, token)).status_code == 200
    assert (await anon.get(f"{API}/requests")).status_code == 200
    await revoke(service, record)
    api = await anon.get(f"{API}/requests")
    assert api.status_code == 401 and api.json()["error"] == "Unauthenticated"
    page = await anon.get("/")
    assert page.status_code == 303 and page.headers["location"] == "/login?next=/"
    again = await anon.get("/login", params={"token": token})
    assert again.status_code == 401 and again.headers.get_list("set-cookie") == []
    again = await post_login(anon, token)
    assert again.status_code == 401 and again.headers.get_list("set-cookie") == []


def _tampered(cookie: str) -> list[str]:
    """Variants of a real cookie that must not authenticate."""
    session_id, mac = cookie.split(".")
    flipped = mac[:-1] + ("0" if mac[-1] != "0" else "1")
    return [
        f"{session_id}.{flipped}",
        f"{session_id}x.{mac}",
        f"{new_session_id()}.{mac}",
        session_id,
        f"{session_id}.",
        f".{mac}",
        "garbage",
        cookie + "." + mac,
        "x" * 400,
    ]


async def test_forged_cookies_are_refused(
    sign_in: SignIn, anon: httpx.AsyncClient, service: Service
) -> None:
    """A tampered cookie is 401 Unauthenticated on the API and a redirect to login on pages."""
    browser = await sign_in("alice", "approver")
    real = browser.cookies[COOKIE]
    ok = await anon.get(f"{API}/requests", headers={"Cookie": f"{COOKIE}={real}"})
    assert ok.status_code == 200
    for forged in _tampered(real):
        headers = {"Cookie": f"{COOKIE}={forged}"}
        api = await anon.get(f"{API}/requests", headers=headers)
        assert api.status_code == 401, forged
        assert api.json()["error"] == "Unauthenticated"
        page = await anon.get("/history", headers=headers)
        assert page.status_code == 303, forged
        assert page.headers["location"] == "/login?next=/history"


async def test_expired_and_future_sessions_are_refused(sign_in: SignIn, clock: FakeClock) -> None:
    """A session older than SESSION_MAX_AGE, or one whose start is ahead of now, fails."""
    browser = await sign_in("alice", "approver")
    clock.advance(SESSION_MAX_AGE - 60)
    assert (await browser.get(f"{API}/requests")).status_code == 200
    clock.advance(120)
    assert (await browser.get(f"{API}/requests")).status_code == 401
    later = await sign_in("bob", "approver")
    clock.now -= timedelta(hours=1)
    assert (await later.get(f"{API}/requests")).status_code == 401


async def test_agent_session_signed_with_the_server_key_is_refused(
    app: FastAPI, anon: httpx.AsyncClient, service: Service
) -> None:
    """Even a correctly signed, stored session for an agent's token authenticates nobody."""
    _, record = await service.create_token("bot", "agent")
    session_id, now = new_session_id(), service.clock()
    stored = SessionRecord(
        id=hash_session_id(session_id),
        token_id=record.id,
        created_at=now,
        expires_at=now + timedelta(hours=1),
    )
    await service.store.commit(Write(at=now, sessions=(stored,)))
    cookie = f"{session_id}.{cookie_mac(app.state.session_key, 'session', session_id)}"
    call = await anon.get(f"{API}/requests", headers={"Cookie": f"{COOKIE}={cookie}"})
    assert call.status_code == 401


async def test_cookie_with_a_non_ascii_digit_is_401_not_500(app: FastAPI) -> None:
    """A cookie whose mac holds non-ASCII characters is refused, not a server error."""
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
        header = f"{COOKIE}=abc.\u00b2\u00e9".encode("latin-1")
        call = await client.get(f"{API}/requests", headers={b"cookie": header})
        assert call.status_code == 401


# -- 5. next is a local path -----------------------------------------------------------------


@pytest.mark.parametrize(
    "next_",
    [
        "//evil.example/x",
        "https://evil.example",
        "/\\evil.example/x",
        "\\\\evil.example",
        "javascript:alert(1)",
        "evil.example",
        "/x\r\nSet-Cookie: a=b",
        "",
    ],
)
async def test_next_never_leaves_the_site(
    anon: httpx.AsyncClient, service: Service, next_: str
) -> None:
    """A next that is not a plain local path signs in to / instead."""
    token, _ = await service.create_token("alice", "approver")
    response = await post_login(anon, token, next_)
    assert response.status_code == 200
    assert refresh_target(response) == "/"
    assert 'href="/"' in response.text


async def test_next_with_a_tab_never_leaves_the_site(
    anon: httpx.AsyncClient, service: Service
) -> None:
    """'/<TAB>/evil.example' is '//evil.example' to a browser, so it must not be kept."""
    token, _ = await service.create_token("alice", "approver")
    response = await post_login(anon, token, "/\t/evil.example/x")
    assert urlsplit(browser_url(refresh_target(response))).netloc == HOST


@pytest.mark.parametrize("next_", ["/requests/abc", "/history", "/grants?live=false"])
async def test_local_next_is_kept(anon: httpx.AsyncClient, service: Service, next_: str) -> None:
    """A plain local path survives sign-in and is where the meta refresh goes."""
    token, _ = await service.create_token("alice", "approver")
    response = await post_login(anon, token, next_)
    assert response.status_code == 200
    target = refresh_target(response)
    assert target == next_
    assert urlsplit(browser_url(target)).netloc == HOST


async def test_next_is_escaped_in_the_sign_in_page(
    anon: httpx.AsyncClient, service: Service
) -> None:
    """A quote in next cannot break out of the meta refresh or the link."""
    token, _ = await service.create_token("alice", "approver")
    next_ = '/x"><img src=x onerror=alert(1)>'
    response = await post_login(anon, token, next_)
    assert "<img" not in response.text
    assert refresh_target(response) == next_
    assert inline_code(response.text).problems == []


async def test_signed_in_redirect_drops_a_foreign_next(sign_in: SignIn) -> None:
    """A signed-in browser sent to /login?next=//evil goes to /, not elsewhere."""
    browser = await sign_in("alice", "approver")
    response = await browser.get("/login", params={"next": "//evil.example/x"})
    assert response.status_code == 303
    assert response.headers["location"] == "/"


# -- 6. the sign-in form and signing out ----------------------------------------------------


async def test_sign_in_form_post(anon: httpx.AsyncClient, service: Service) -> None:
    """POST /login with a urlencoded token and next signs in and goes to next."""
    token, _ = await service.create_token("alice", "approver")
    response = await anon.post(
        "/login", content=f"token={token}&next=/history", headers=SAME_ORIGIN
    )
    assert response.status_code == 200
    assert refresh_target(response) == "/history"
    assert "httponly" in cookie_header(response)
    assert (await anon.get("/history")).status_code == 200


async def test_sign_in_form_post_with_a_bad_token(
    anon: httpx.AsyncClient, service: Service
) -> None:
    """POST /login with an unknown token or an agent's is refused without a cookie."""
    agent_token, _ = await service.create_token("bot", "agent")
    for token, status in [("so_nope", 401), ("", 401), (agent_token, 403)]:
        response = await anon.post("/login", content=f"token={token}&next=/", headers=SAME_ORIGIN)
        assert response.status_code == status, token
        assert response.headers.get_list("set-cookie") == []


async def test_logout_needs_the_csrf_field(sign_in: SignIn) -> None:
    """POST /logout without the form's csrf field is 403 and the session goes on working."""
    browser = await sign_in("alice", "approver")
    refused = await browser.post("/logout", content="", headers=FORM)
    assert refused.status_code == 403
    assert refused.headers.get_list("set-cookie") == []
    wrong = await browser.post("/logout", content="csrf=nope", headers=FORM)
    assert wrong.status_code == 403
    assert (await browser.get("/")).status_code == 200
    assert (await browser.get(f"{API}/requests")).status_code == 200


async def test_logout_with_the_csrf_field_clears_the_cookie(sign_in: SignIn) -> None:
    """POST /logout with the csrf field is a 303 to /login whose Set-Cookie deletes the cookie."""
    browser = await sign_in("alice", "approver")
    csrf = csrf_of((await browser.get("/")).text)
    response = await browser.post("/logout", content=f"csrf={csrf}", headers=FORM)
    assert response.status_code == 303
    assert response.headers["location"] == "/login"
    parts = cookie_header(response)
    assert parts[0] in (f"{COOKIE}=", f'{COOKIE}=""')
    assert "max-age=0" in parts and "path=/" in parts
    assert COOKIE not in browser.cookies
    assert (await browser.get("/")).status_code == 303


# -- 7. security headers, static files, no inline code --------------------------------------


def assert_security_headers(response: httpx.Response) -> None:
    """The CSP forbids inline script; nosniff; never framed."""
    csp = response.headers["content-security-policy"]
    directives = {d.strip().split(" ")[0]: d.strip() for d in csp.split(";")}
    assert directives["script-src"] == "script-src 'self'"
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    assert "frame-ancestors 'none'" in csp
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["x-frame-options"] == "DENY"


async def test_security_headers_everywhere(
    sign_in: SignIn, anon: httpx.AsyncClient, service: Service
) -> None:
    """Pages, sign-in, redirects, API answers, errors and static files carry the headers."""
    browser = await sign_in("alice", "approver")
    token, _ = await service.create_token("carol", "approver")
    responses = [
        await browser.get("/"),
        await browser.get("/requests/x"),
        await browser.get(f"{API}/requests"),
        await browser.get("/static/main.js"),
        await anon.get("/login"),
        await anon.get("/login", params={"token": token}),
        await anon.get("/login", params={"token": "so_bad"}),
        await anon.get("/history"),
        await anon.get(f"{API}/requests"),
        await anon.get("/healthz"),
        await anon.get("/static/missing.js"),
    ]
    for response in responses:
        assert_security_headers(response)


async def test_static_files_are_served(anon: httpx.AsyncClient) -> None:
    """The page's script and stylesheet, and every module main.js imports, are served."""
    script = await anon.get("/static/main.js")
    assert script.status_code == 200
    assert "javascript" in script.headers["content-type"]
    style = await anon.get("/static/inbox.css")
    assert style.status_code == 200
    assert style.headers["content-type"].startswith("text/css")
    modules = set(re.findall(r'from "\./([\w-]+\.js)"', script.text))
    assert modules
    for module in sorted(modules):
        assert (await anon.get(f"/static/{module}")).status_code == 200, module


async def test_pages_have_no_inline_code(
    sign_in: SignIn, anon: httpx.AsyncClient, service: Service
) -> None:
    """Every <script> has a src; no inline style=, on*= handlers or <style> anywhere."""
    browser = await sign_in("alice", "approver")
    token, _ = await service.create_token("carol", "approver")
    shell = inline_code((await browser.get("/")).text)
    assert shell.scripts >= 1 and shell.problems == []
    for path in PAGES[1:]:
        assert inline_code((await browser.get(path)).text).problems == [], path
    for response in [
        await anon.get("/login"),
        await anon.get("/login", params={"token": token}),
        await anon.get("/login", params={"token": "so_bad"}),
    ]:
        assert inline_code(response.text).problems == [], response.text


# -- 8. escaping -----------------------------------------------------------------------------


async def test_page_shell_escapes_the_user_name(anon: httpx.AsyncClient, service: Service) -> None:
    """A token named <script>x</script> shows escaped in the page shell, never as a tag."""
    token, _ = await service.create_token("<script>x</script>", "approver")
    assert (await post_login(anon, token)).status_code == 200
    page = await anon.get("/")
    assert page.status_code == 200
    assert "<script>x</script>" not in page.text
    assert "&lt;script&gt;x&lt;/script&gt;" in page.text
    assert inline_code(page.text).problems == []


async def test_sign_in_page_escapes_the_user_name(
    anon: httpx.AsyncClient, service: Service
) -> None:
    """The confirm and 'Signed in as ...' pages show a hostile name escaped, never as a tag."""
    token, _ = await service.create_token("<script>x</script>", "approver")
    for response in [
        await anon.get("/login", params={"token": token}),
        await post_login(anon, token),
    ]:
        assert response.status_code == 200
        assert "<script>x</script>" not in response.text
        assert "&lt;script&gt;x&lt;/script&gt;" in response.text


# -- 9. the WebSocket by cookie --------------------------------------------------------------


class Socket:
    """A minimal in-process WebSocket client: ASGI messages to and from the app."""

    def __init__(self, app: FastAPI, target: str, headers: dict[str, str] | None = None) -> None:
        path, _, query = target.partition("?")
        raw = {"host": HOST, **(headers or {})}
        self.scope: Scope = {
            "type": "websocket",
            "asgi": {"version": "3.0"},
            "scheme": "ws",
            "server": (HOST, 80),
            "client": ("127.0.0.1", 50000),
            "root_path": "",
            "path": path,
            "raw_path": path.encode(),
            "query_string": query.encode(),
            "headers": [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in raw.items()],
            "subprotocols": [],
        }
        self.app = app
        self._to_app: asyncio.Queue[Message] = asyncio.Queue()
        self._from_app: asyncio.Queue[Message] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None

    async def connect(self) -> Message:
        """Open the handshake; the app's answer (websocket.accept or websocket.close)."""
        await self._to_app.put({"type": "websocket.connect"})
        self._task = asyncio.create_task(self.app(self.scope, self._to_app.get, self._from_app.put))
        return await self.receive()

    async def receive(self) -> Message:
        """The app's next message (a bound, not a timing assumption: heartbeats are 0.2 s)."""
        return await asyncio.wait_for(self._from_app.get(), timeout=10)

    async def next_event(self) -> dict[str, Any]:
        """The next message that is not a heartbeat, parsed."""
        for _ in range(100):
            message = await self.receive()
            assert message["type"] == "websocket.send", message
            data: dict[str, Any] = json.loads(message["text"])
            if data["type"] != "heartbeat":
                return data
        raise AssertionError("only heartbeats arrived")

    async def close(self) -> None:
        """Disconnect and wait for the app's handler to finish."""
        await self._to_app.put({"type": "websocket.disconnect", "code": 1000})
        if self._task is not None:
            await asyncio.wait_for(self._task, timeout=10)


async def refused_code(app: FastAPI, headers: dict[str, str] | None = None) -> int | None:
    """The code the socket is closed with, before or just after the accept (None: served)."""
    socket = Socket(app, f"{API}/ws", headers)
    answer = await socket.connect()
    if answer["type"] == "websocket.accept":
        # an accepted socket's first message is a heartbeat (0.2 s) or an event; a refused
        # one is closed straight away (accepting first lets a browser see the code)
        answer = await socket.receive()
    await socket.close()
    if answer["type"] == "websocket.close":
        code: int = answer["code"]
        return code
    assert answer["type"] == "websocket.send", answer
    return None


async def test_websocket_authenticates_by_cookie(
    sign_in: SignIn, app: FastAPI, service: Service
) -> None:
    """The inbox's socket accepts the session cookie and delivers a created event."""
    browser = await sign_in("alice", "approver")
    cookie = {"Cookie": f"{COOKIE}={browser.cookies[COOKIE]}"}
    agent_token, _ = await service.create_token("bot", "agent")
    seq = await service.store.last_event_seq()
    socket = Socket(app, f"{API}/ws?since={seq}", {**cookie, "Origin": BASE})
    try:
        assert (await socket.connect())["type"] == "websocket.accept"
        made = await browser.post(
            f"{API}/requests", json=CALL, headers={"Authorization": f"Bearer {agent_token}"}
        )
        assert made.status_code == 201, made.text
        event = await socket.next_event()
        assert event["type"] == "created"
        assert event["request"]["id"] == made.json()["id"]
        assert event["seq"] > seq
    finally:
        await socket.close()


async def test_websocket_without_a_valid_session_is_closed_4401(
    anon: httpx.AsyncClient, app: FastAPI, service: Service
) -> None:
    """No cookie or bearer, a forged cookie, a cross-origin page or a revoked token: 4401."""
    assert await refused_code(app) == 4401
    assert await refused_code(app, {"Cookie": f"{COOKIE}=abc.mac"}) == 4401
    token, record = await service.create_token("carol", "approver")
    assert (await post_login(anon, token)).status_code == 200
    cookie = {"Cookie": f"{COOKIE}={anon.cookies[COOKIE]}"}
    assert await refused_code(app, cookie) is None
    assert await refused_code(app, {**cookie, "Origin": "http://evil.example"}) == 4401
    assert await refused_code(app, {"Authorization": f"Bearer {token}"}) is None
    await revoke(service, record)
    assert await refused_code(app, cookie) == 4401
