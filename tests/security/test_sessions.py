"""Attack: someone who is not the signed-in person rides or mints an inbox session.

Cookies are signed with the server secret (never with anything in the database), stored
server-side so sign-out and revoke end every copy, set only after a same-origin POST (no
login CSRF), and marked Secure when the operator says the inbox is reached over TLS.
"""

from __future__ import annotations

import hashlib
import hmac
import http.server
import os
import re
import secrets
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from signoff.config import secret_file
from signoff.server.app import API
from signoff.server.auth import COOKIE
from tests.serving import Server, free_port, new_token, start_server
from tests.web.browser import CHROMIUM, CHROMIUM_ARGS, need_chromium

FORM = {"content-type": "application/x-www-form-urlencoded"}


def post_login(
    base: str, token: str, headers: dict[str, str] | None = None
) -> tuple[httpx.Response, str | None]:
    """POST /login as a browser's same-origin form does, or with these ``headers`` instead."""
    sent = {**FORM, **(headers or {"origin": base, "sec-fetch-site": "same-origin"})}
    with httpx.Client(base_url=base) as http:
        response = http.post("/login", content=f"token={token}&next=/", headers=sent)
        return response, http.cookies.get(COOKIE)


def sign_in(base: str, token: str) -> str:
    """The session cookie a confirmed sign-in sets."""
    response, cookie = post_login(base, token)
    assert response.status_code == 200, response.text
    assert cookie
    return cookie


def api_status(base: str, cookie: str) -> int:
    """The status of an API read made with only this session cookie."""
    return httpx.get(f"{base}{API}/requests", headers={"Cookie": f"{COOKIE}={cookie}"}).status_code


def page_status(base: str, cookie: str) -> int:
    """The status of the inbox page (200 signed in, 303 to /login otherwise)."""
    page = httpx.get(f"{base}/", headers={"Cookie": f"{COOKIE}={cookie}"})
    return page.status_code


def db_path(server: Server) -> Path:
    """The server's SQLite file."""
    return Path(server.db.removeprefix("sqlite:///"))


@pytest.fixture
def restartable() -> Iterator[list[Server]]:
    """Servers a test starts on one database file; all stopped after."""
    started: list[Server] = []
    yield started
    for node in started:
        if node.process.poll() is None:
            node.stop()


def serve(started: list[Server], db: Path, env_extra: dict[str, str | None], *extra: str) -> Server:
    """Start ``signoff serve`` on ``db`` with these environment changes and options."""
    env = {**os.environ, "COLUMNS": "200"}
    for key, value in env_extra.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    running = start_server(f"sqlite:///{db}", free_port(), env, *extra)
    started.append(running)
    return running


def test_cookie_forged_from_the_token_hash_in_the_database_is_refused(server: Server) -> None:
    """Whoever reads the token hashes out of the database file cannot mint an inbox cookie."""
    token, token_id = new_token(server, "alice", "approver")
    sign_in(server.base, token)  # a real session exists, so its row is there to read too
    with sqlite3.connect(f"file:{db_path(server)}?mode=ro", uri=True) as db:
        stored_hash = db.execute(
            "SELECT token_hash FROM tokens WHERE id = ?", (token_id,)
        ).fetchone()[0]
        has_sessions = db.execute(
            "SELECT count(*) FROM sqlite_master WHERE name = 'sessions'"
        ).fetchone()[0]
        session_rows = [r[0] for r in db.execute("SELECT id FROM sessions")] if has_sessions else []
    key = bytes.fromhex(stored_hash)
    # the cookie as the old code signed it: HMAC keyed with the stored hash
    fields = f"{token_id}|{int(time.time())}|{secrets.token_urlsafe(12)}"
    mac = hmac.new(key, f"session|{fields}".encode(), hashlib.sha256).hexdigest()
    forged = [fields.replace("|", ".") + "." + mac]
    # today's format, keyed with the hash, for a new id and for the stored session ids
    for session_id in [secrets.token_urlsafe(24), *session_rows]:
        mac = hmac.new(key, f"session|{session_id}".encode(), hashlib.sha256).hexdigest()
        forged.append(f"{session_id}.{mac}")
    for cookie in forged:
        assert api_status(server.base, cookie) == 401, cookie
        assert page_status(server.base, cookie) == 303, cookie


def test_rotating_the_secret_signs_everyone_out(restartable: list[Server], tmp_path: Path) -> None:
    """A cookie dies when SIGNOFF_SECRET changes or the secret file is replaced; not before."""
    db = tmp_path / "rot.db"
    first = serve(restartable, db, {"SIGNOFF_SECRET": "a" * 40})
    assert first.admin_token is not None
    cookie = sign_in(first.base, first.admin_token)
    assert api_status(first.base, cookie) == 200
    first.stop()

    same = serve(restartable, db, {"SIGNOFF_SECRET": "a" * 40})
    assert api_status(same.base, cookie) == 200  # a restart alone keeps people signed in
    same.stop()
    rotated = serve(restartable, db, {"SIGNOFF_SECRET": "b" * 40})
    assert api_status(rotated.base, cookie) == 401
    assert page_status(rotated.base, cookie) == 303
    rotated.stop()

    from_file = serve(restartable, db, {"SIGNOFF_SECRET": None})
    cookie = sign_in(from_file.base, first.admin_token)
    from_file.stop()
    again = serve(restartable, db, {"SIGNOFF_SECRET": None})
    assert api_status(again.base, cookie) == 200
    again.stop()
    secret = secret_file(f"sqlite:///{db}")
    assert secret is not None and secret.exists()
    secret.unlink()
    renewed = serve(restartable, db, {"SIGNOFF_SECRET": None})
    assert api_status(renewed.base, cookie) == 401


def test_a_short_secret_is_refused(tmp_path: Path) -> None:
    """serve will not sign sessions with a guessable SIGNOFF_SECRET: exit 3, one error line."""
    env = {**os.environ, "SIGNOFF_SECRET": "hunter2", "COLUMNS": "200"}
    done = start_refused(tmp_path, env)
    assert done.returncode == 3
    assert done.stderr.count("error:") == 1 and "SIGNOFF_SECRET" in done.stderr
    assert "Traceback" not in done.stderr


def start_refused(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run ``signoff serve`` expecting it to refuse to start."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "signoff",
            "serve",
            "--port",
            str(free_port()),
            "--db",
            f"sqlite:///{tmp_path / 'x.db'}",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def test_a_copied_cookie_stops_working_at_sign_out(server: Server) -> None:
    """Signing out ends the session server-side: a copy of the cookie taken before is refused."""
    token, _ = new_token(server, "alice", "approver")
    with httpx.Client(base_url=server.base) as browser:
        response = browser.post(
            "/login",
            content=f"token={token}&next=/",
            headers={**FORM, "origin": server.base, "sec-fetch-site": "same-origin"},
        )
        assert response.status_code == 200
        copied = browser.cookies[COOKIE]
        page = browser.get("/")
        csrf = re.search(r'<meta name="csrf-token" content="([^"]+)">', page.text)
        assert csrf is not None
        out = browser.post("/logout", content=f"csrf={csrf.group(1)}", headers=FORM)
        assert out.status_code == 303
    assert api_status(server.base, copied) == 401
    assert page_status(server.base, copied) == 303
    events = httpx.get(
        f"{server.base}{API}/events", headers={"Cookie": f"{COOKIE}={copied}"}, timeout=10
    )
    assert events.status_code == 401


def test_a_copied_cookie_stops_working_when_its_token_is_revoked(server: Server) -> None:
    """Revoking the token ends every session signed in with it."""
    token, token_id = new_token(server, "alice", "approver")
    cookie = sign_in(server.base, token)
    assert api_status(server.base, cookie) == 200
    done = server.cli("token", "revoke", token_id)
    assert done.returncode == 0, done.stderr
    assert api_status(server.base, cookie) == 401
    assert page_status(server.base, cookie) == 303


@pytest.mark.parametrize(
    "headers",
    [
        {"origin": "http://evil.example", "sec-fetch-site": "cross-site"},
        {"origin": "http://evil.example"},
        {"origin": "null"},
        {"origin": "null", "sec-fetch-site": "cross-site"},
        {"sec-fetch-site": "same-site"},
        {"origin": "http://127.0.0.1:1", "sec-fetch-site": "same-site"},
    ],
)
def test_sign_in_posted_from_another_site_is_refused(
    server: Server, headers: dict[str, str]
) -> None:
    """Login CSRF: a form on another site posting the attacker's token sets no cookie (403)."""
    token, _ = new_token(server, "mallory", "approver")
    response, cookie = post_login(server.base, token, headers)
    assert response.status_code == 403
    assert response.headers.get_list("set-cookie") == []
    assert cookie is None


def test_sign_in_link_sets_no_cookie_until_confirmed(server: Server) -> None:
    """GET /login?token= only shows a confirm button: opening a link signs nobody in."""
    token, _ = new_token(server, "mallory", "approver")
    with httpx.Client(base_url=server.base) as browser:
        shown = browser.get("/login", params={"token": token})
        assert shown.status_code == 200
        assert shown.headers.get_list("set-cookie") == []
        assert 'id="confirm-sign-in"' in shown.text
        assert browser.get("/").status_code == 303


class _AttackerPage(http.server.BaseHTTPRequestHandler):
    """Serves a page that auto-submits a sign-in form to the victim's inbox."""

    target = ""
    token = ""

    def do_GET(self) -> None:
        """The attack page (scripts are allowed here: it is the attacker's own origin)."""
        body = (
            f'<form id="f" method="post" action="{self.target}/login">'
            f'<input name="token" value="{self.token}"><input name="next" value="/"></form>'
            '<script>document.getElementById("f").submit()</script>'
        ).encode()
        self.send_response(200)
        self.send_header("content-type", "text/html")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""


def test_auto_submitting_form_on_another_origin_signs_no_browser_in(server: Server) -> None:
    """In real Chromium, a page elsewhere that posts the attacker's token leaves no session."""
    need_chromium()
    from playwright.sync_api import sync_playwright

    token, _ = new_token(server, "mallory", "approver")
    handler = type("Attack", (_AttackerPage,), {"target": server.base, "token": token})
    attacker = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=attacker.serve_forever, daemon=True).start()
    try:
        with sync_playwright() as p:
            chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            context = chromium.new_context()
            tab = context.new_page()
            with tab.expect_response(f"{server.base}/login") as answer:
                tab.goto(f"http://127.0.0.1:{attacker.server_address[1]}/")
            assert answer.value.status == 403
            assert [c for c in context.cookies() if c["name"] == COOKIE] == []
            tab.goto(f"{server.base}/")
            assert tab.url.startswith(f"{server.base}/login")
            chromium.close()
    finally:
        attacker.shutdown()
        attacker.server_close()


def cookie_flags(response: httpx.Response) -> list[str]:
    """The session cookie's Set-Cookie attributes, lowercased."""
    headers = [h for h in response.headers.get_list("set-cookie") if h.startswith(f"{COOKIE}=")]
    assert len(headers) == 1, response.headers.get_list("set-cookie")
    return [part.strip().lower() for part in headers[0].split(";")[1:]]


def test_secure_flag_with_secure_cookies(restartable: list[Server], tmp_path: Path) -> None:
    """--secure-cookies marks the session cookie Secure; a plain serve does not."""
    plain = serve(restartable, tmp_path / "s.db", {})
    assert plain.admin_token is not None
    response, _ = post_login(plain.base, plain.admin_token)
    assert "secure" not in cookie_flags(response)
    plain.stop()
    tls = serve(restartable, tmp_path / "s.db", {}, "--secure-cookies")
    response, _ = post_login(tls.base, plain.admin_token)
    assert "secure" in cookie_flags(response)


def test_forwarded_proto_counts_only_when_trusted(
    restartable: list[Server], tmp_path: Path
) -> None:
    """X-Forwarded-Proto: https marks the cookie Secure behind --trust-forwarded-proto only."""
    https = {"x-forwarded-proto": "https"}
    untrusting = serve(restartable, tmp_path / "f.db", {})
    assert untrusting.admin_token is not None
    response, _ = post_login(untrusting.base, untrusting.admin_token, https)
    assert "secure" not in cookie_flags(response)
    untrusting.stop()
    trusting = serve(restartable, tmp_path / "f.db", {}, "--trust-forwarded-proto")
    response, _ = post_login(trusting.base, untrusting.admin_token, https)
    assert "secure" in cookie_flags(response)
    response, _ = post_login(trusting.base, untrusting.admin_token, {"x-forwarded-proto": "http"})
    assert "secure" not in cookie_flags(response)
