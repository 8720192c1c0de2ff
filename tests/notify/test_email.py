"""Email: a request mailed through a real SMTP server, decided from the mail in Chromium.

A real ``signoff serve``; a real SMTP server (aiosmtpd) receives the message; the test
parses it, opens its Approve link in headless Chromium (signed in as nobody), sees the
confirm page, presses confirm, and the agent's long-poll wait returns approved.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from signoff.server.app import API
from tests.mail import Mailbox, link_person, mail_links, parts, smtp_server
from tests.serving import Server, agent_token, serve_for_module
from tests.web.browser import CHROMIUM, CHROMIUM_ARGS, SCREENSHOTS, Agent, need_chromium

if TYPE_CHECKING:
    from playwright.sync_api import Browser

ALICE = "alice@example.com"


@pytest.fixture(scope="module")
def mailbox() -> Iterator[Mailbox]:
    """One real SMTP server for the module."""
    with smtp_server() as box:
        yield box


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One real server, alice an approver linked to her address."""
    for running in serve_for_module(tmp_path_factory.mktemp("email")):
        done = running.cli("token", "create", "alice", "--role", "approver")
        assert done.returncode == 0, done.stderr
        link_person(running, ALICE, "alice")
        yield running


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
