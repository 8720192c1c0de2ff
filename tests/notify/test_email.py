"""Email: a request mailed through a real SMTP server, decided from the mail in Chromium.

A real ``signoff serve``; a real SMTP server (aiosmtpd) receives the message; the test
parses it, opens its Approve link in headless Chromium (signed in as nobody), sees the
confirm page, presses confirm, and the agent's long-poll wait returns approved.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from signoff.domain.requests import ApprovalRequest
from signoff.notify.email import Mailed, render_message
from signoff.server.app import API
from tests.mail import Mailbox, link_person, links, mail_links, parts, smtp_server
from tests.serving import Server, agent_token, free_port, new_token, start_server
from tests.web.browser import CHROMIUM, CHROMIUM_ARGS, SCREENSHOTS, Agent, need_chromium

if TYPE_CHECKING:
    from playwright.sync_api import Browser

ALICE = "alice@example.com"
SENT = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def mailbox() -> Iterator[Mailbox]:
    """One real SMTP server for the module."""
    with smtp_server() as box:
        yield box


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, mailbox: Mailbox) -> Iterator[Server]:
    """One real server sending mail to ``mailbox``, alice an approver linked to her address."""
    home = tmp_path_factory.mktemp("email")
    env = {**os.environ, "XDG_CONFIG_HOME": str(home)}
    smtp = ["--smtp-host", "127.0.0.1", "--smtp-port", str(mailbox.port), "--smtp-tls", "none"]
    running = start_server(f"sqlite:///{home / 'serve.db'}", free_port(), env, *smtp)
    try:
        new_token(running, "alice", "approver")
        link_person(running, ALICE, "alice")
        yield running
    finally:
        running.stop()


def confirm_in_browser(link: str) -> tuple[str, str, str]:
    """Open ``link`` in Chromium, read the confirm page, confirm: both pages' text and the
    text the same link shows when opened again."""
    need_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser: Browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_context(viewport={"width": 900, "height": 700}).new_page()
            page.goto(link)
            shown = page.inner_text("main")
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SCREENSHOTS / "email-link-confirm.png"))
            page.click("#confirm-link")
            page.wait_for_selector("#link-message:not(.error)")
            done = page.inner_text("#link-message")
            page.goto(link)
            again = page.inner_text("#link-message")
            return shown, done, again
        finally:
            browser.close()


def test_an_emailed_link_confirmed_in_chromium_approves_and_the_wait_returns(
    server: Server, mailbox: Mailbox
) -> None:
    """Mail, link, confirm page, confirm: the agent's wait returns approved, via email-link,
    by alice; the link opened again says who already decided."""
    need_chromium()
    agent = Agent(server, agent_token(server))
    try:
        request = agent.submit(tool_name="deploy", tool_args={"service": "api", "env": "prod"})
        join = agent.wait_in_background(request["id"])
        mailed = mail_links(server, mailbox, request["id"], ALICE)
        message = mailbox.last_to(ALICE)
        assert "deploy" in str(message["Subject"])
        text, page = parts(message)
        assert '"service": "api"' in text and mailed["approve"] in text
        assert mailed["approve"].replace("&", "&amp;") in page
        assert mailed["approve"].startswith(f"{server.base}/links/")

        shown, done, again = confirm_in_browser(mailed["approve"])
        assert "Approve this request as alice (alice@example.com)?" in shown
        assert "deploy" in shown and '"env": "prod"' in shown
        assert done == "Approved as alice."
        assert "already decided (approve) by alice via email-link" in again

        answer: dict[str, Any] = join()
        assert answer["status"] == "approved"
        assert answer["decision"]["decided_by"] == "alice"
        assert answer["decision"]["via"] == "email-link"
    finally:
        agent.close()


def test_the_audit_names_the_link(server: Server, mailbox: Mailbox) -> None:
    """A link's decision is in the audit like any other, via email-link."""
    agent = Agent(server, agent_token(server))
    try:
        request = agent.submit(tool_name="rotate", tool_args={"key": "k1"})
        mailed = mail_links(server, mailbox, request["id"], ALICE)
        answer = httpx.post(
            mailed["reject"], data={"reason": "not today"}, headers={"Origin": server.base}
        )
        assert answer.status_code == 200, answer.text
        decided = agent.get(request["id"])
        assert decided["status"] == "rejected"
        assert decided["decision"]["decision"]["reason"] == "not today"
        assert server.admin_token is not None
        audit = httpx.get(
            f"{server.base}{API}/audit",
            params={"request_id": request["id"]},
            headers={"Authorization": f"Bearer {server.admin_token}"},
        ).json()
        assert any("email-link" in str(entry) for entry in audit["items"]), audit
    finally:
        agent.close()


def test_an_email_route_mails_the_linked_person_who_decides_from_it(
    server: Server, mailbox: Mailbox
) -> None:
    """``signoff notify add --email``: the server mails a matching request through SMTP by
    itself; its Reject link, confirmed, rejects with the reason and the wait returns."""
    added = server.cli("notify", "add", "ship-mail", "--email", ALICE, "--tool", "ship")
    assert added.returncode == 0, added.stderr
    agent = Agent(server, agent_token(server))
    try:
        request = agent.submit(tool_name="ship", tool_args={"release": "1.2"})
        join = agent.wait_in_background(request["id"])
        deadline = time.monotonic() + 20
        while not any(request["id"] in str(m.get_body(("plain",))) for m in mailbox.messages):
            assert time.monotonic() < deadline, "the route sent no mail"
            time.sleep(0.1)
        [message] = [m for m in mailbox.messages if request["id"] in str(m.get_body(("plain",)))]
        assert str(message["To"]) == ALICE
        reject = links(message)["reject"]
        answer = httpx.post(
            reject, data={"reason": "not on a Friday"}, headers={"Origin": server.base}
        )
        assert answer.status_code == 200, answer.text
        decided = join()
        assert decided["status"] == "rejected"
        assert decided["decision"]["via"] == "email-link"
        assert decided["decision"]["decision"]["reason"] == "not on a Friday"
    finally:
        agent.close()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--smtp-host", "mail.example.com", "--smtp-user", "u"], "$SIGNOFF_SMTP_PASSWORD"),
        (["--smtp-host", "mail.example.com", "--smtp-tls", "ssl"], "--smtp-tls is one of"),
        (["--smtp-port", "25"], "need --smtp-host"),
        (["--public-url", "javascript:alert(1)"], "--public-url must be an http(s) URL"),
    ],
)
def test_smtp_settings_refused_before_serving(
    tmp_path: Path, options: list[str], message: str
) -> None:
    """A login without its password (never on the command line), an unknown TLS mode or a
    link base that is not a web address stops ``signoff serve`` with one error line."""
    env = {k: v for k, v in os.environ.items() if k != "SIGNOFF_SMTP_PASSWORD"}
    db = f"sqlite:///{tmp_path / 'x.db'}"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "signoff",
            "serve",
            "--db",
            db,
            "--port",
            str(free_port()),
            *options,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert message in done.stderr, done.stderr


def _approval(request_id: str, tool: str) -> ApprovalRequest:
    return ApprovalRequest(
        id=request_id,
        session_id="s",
        requested_by="bot\u202e<b>",
        created_at=SENT,
        updated_at=SENT,
        allowed_decisions=("approve", "reject"),
        tool_name=tool,
        tool_args={"x": "<script>alert(1)</script>"},
    )


def test_a_digest_lists_each_request_with_its_own_links() -> None:
    """One message for a digest's requests: a one-line subject, each request's links, and
    agent text escaped in the HTML part."""
    items = [
        Mailed(
            request=_approval(f"req_{n}", f"tool{n}\r\nBcc: x@evil"),
            page=f"/r/{n}",
            approve=f"https://s/links/a{n}",
            reject=f"https://s/links/r{n}",
        )
        for n in (1, 2)
    ]
    subject, text, page = render_message(items, "digest", recipient="ann@example.com", linked=True)
    assert subject == "[signoff] Waiting for you: 2 requests"
    for n in (1, 2):
        assert f"Approve: https://s/links/a{n}" in text and f"Reject:  https://s/links/r{n}" in text
    assert "<script>" not in page and "&lt;script&gt;" in page
    one, _, _ = render_message(items[:1], "new", recipient="ann@example.com", linked=True)
    assert "\n" not in one and "\r" not in one
