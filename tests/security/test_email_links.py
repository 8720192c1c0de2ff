"""Attack: someone holding, guessing or altering an emailed one-click link.

A link decides one request, one way, as the one person its address is linked to, once,
until it expires, and only when that person presses the confirm page's button: a GET (a
mail scanner, a link preview) decides nothing. Each refusal leaves the request pending.
The mail goes through a real SMTP server (aiosmtpd) to a real ``signoff serve``.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from signoff.config import server_secret
from signoff.notify.links import sign_link
from signoff.server.app import API
from tests.mail import Mailbox, link_person, mail_links, parts, smtp_server
from tests.security.policy_serving import serve_with_policy
from tests.serving import Server, agent_token, bearer, new_token

ALICE = "alice@example.com"
"""Linked to the approver ``alice``."""
NOBODY = "nobody@example.com"
"""Linked to no one."""

POLICY = """
[[rules]]
tool = "two_votes"
action = "ask"
quorum = 2
"""


@pytest.fixture(scope="module")
def mailbox() -> Iterator[Mailbox]:
    """One real SMTP server for the module."""
    with smtp_server() as box:
        yield box


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One real server; alice, an approver, linked to her address."""
    for running in serve_with_policy(tmp_path_factory.mktemp("email_links"), POLICY):
        new_token(running, "alice", "approver")
        link_person(running, ALICE, "alice")
        yield running


@pytest.fixture(scope="module")
def agent(server: Server) -> Iterator[httpx.Client]:
    """The agent filing requests over HTTP."""
    with httpx.Client(
        base_url=server.base, headers=bearer(agent_token(server)), timeout=30
    ) as http:
        yield http


def _file(agent: httpx.Client, tool: str = "deploy", **args: Any) -> dict[str, Any]:
    answer = agent.post(
        f"{API}/requests",
        json={"session_id": "mail", "tool_name": tool, "tool_args": args or {"env": "prod"}},
    )
    assert answer.status_code == 201, answer.text
    request: dict[str, Any] = answer.json()
    return request


def mailed_links(
    server: Server, mailbox: Mailbox, request_id: str, to: str = ALICE
) -> dict[str, str]:
    """Mail ``request_id`` to ``to`` through the real SMTP server; the message's links."""
    return mail_links(server, mailbox, request_id, to)


def _status(agent: httpx.Client, request_id: str) -> str:
    status: str = agent.get(f"{API}/requests/{request_id}").json()["status"]
    return status


def _confirm(
    server: Server, link: str, reason: str = "not today", **headers: str
) -> httpx.Response:
    """Press the confirm page's button (a reject link's form says why, as the page requires)."""
    return httpx.post(
        link,
        data={"reason": reason},
        headers={"Sec-Fetch-Site": "same-origin", **headers},
        timeout=30,
    )


def _token(link: str) -> str:
    return link.rsplit("/links/", 1)[1]


def test_a_get_alone_decides_nothing(server: Server, agent: httpx.Client, mailbox: Mailbox) -> None:
    """Opening a link (as a mail scanner does), however often, only shows the confirm page."""
    request = _file(agent)
    mailed = mailed_links(server, mailbox, request["id"])
    for link in (mailed["approve"], mailed["reject"], mailed["approve"]):
        page = httpx.get(link, timeout=30)
        assert page.status_code == 200, page.text
        assert "as alice" in page.text
        assert page.headers["cache-control"] == "no-store"
    assert _status(agent, request["id"]) == "pending"


def test_the_same_link_twice_is_refused(
    server: Server, agent: httpx.Client, mailbox: Mailbox
) -> None:
    """Used once, a link is spent: on a request still waiting for a second vote as well."""
    decided = _file(agent)
    mailed = mailed_links(server, mailbox, decided["id"])
    assert _confirm(server, mailed["reject"]).status_code == 200
    again = _confirm(server, mailed["reject"])
    assert again.status_code == 409
    assert "already decided (reject) by alice via email-link" in again.text
    assert _status(agent, decided["id"]) == "rejected"

    voting = _file(agent, "two_votes")
    mailed = mailed_links(server, mailbox, voting["id"])
    first = _confirm(server, mailed["approve"])
    assert first.status_code == 200, first.text
    assert "waits for more" in first.text
    replayed = _confirm(server, mailed["approve"])
    assert replayed.status_code == 409
    assert "already used" in replayed.text
    votes = agent.get(f"{API}/requests/{voting['id']}").json()
    assert votes["status"] == "pending"


def test_a_reject_link_needs_a_reason_and_still_works_after_a_blank_one(
    server: Server, agent: httpx.Client, mailbox: Mailbox
) -> None:
    """The reject page requires a reason; posting none or a blank one is 422, decides
    nothing and does not use the link up, which then rejects with a reason."""
    request = _file(agent)
    mailed = mailed_links(server, mailbox, request["id"])
    page = httpx.get(mailed["reject"], timeout=30)
    assert '<textarea id="reason" name="reason"' in page.text and " required>" in page.text
    for blank in ("", " \n\t "):
        refused = _confirm(server, mailed["reject"], blank)
        assert refused.status_code == 422, refused.text
        assert "a reason is required to reject" in refused.text
    assert _status(agent, request["id"]) == "pending"
    assert _confirm(server, mailed["reject"], "Not needed").status_code == 200
    decided = agent.get(f"{API}/requests/{request['id']}").json()
    assert decided["decision"]["decision"]["reason"] == "Not needed"


def _flip(token: str, at: int) -> str:
    swapped = "A" if token[at] != "A" else "B"
    return token[:at] + swapped + token[at + 1 :]


def test_altered_foreign_and_expired_links_are_refused(
    server: Server, agent: httpx.Client, mailbox: Mailbox
) -> None:
    """A flipped byte, another request's id under this MAC, or an expired link: refused,
    on the page and on the confirm, and the request stays pending."""
    request = _file(agent)
    other = _file(agent)
    mailed = mailed_links(server, mailbox, request["id"])
    token = _token(mailed["approve"])
    payload, mac = token.split(".")
    decoded = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
    moved = decoded.replace(request["id"].encode(), other["id"].encode())
    foreign = base64.urlsafe_b64encode(moved).rstrip(b"=").decode() + "." + mac
    rejected = decoded.replace(b"\napprove\n", b"\nreject\n")
    turned = base64.urlsafe_b64encode(rejected).rstrip(b"=").decode() + "." + mac
    expired = sign_link(
        server_secret(server.db).key,
        request_id=request["id"],
        decision="approve",
        recipient=ALICE,
        expires_at=datetime.now(UTC) - timedelta(seconds=1),
    )
    bad = {
        "flipped in the MAC": (_flip(token, len(token) - 5), 400),
        "flipped in the payload": (_flip(token, 10), 400),
        "another request": (foreign, 400),
        "another decision": (turned, 400),
        "expired": (expired, 410),
        "not a token": ("x" * 40, 400),
    }
    for what, (forged, status) in bad.items():
        url = f"{server.base}/links/{forged}"
        assert httpx.get(url, timeout=30).status_code == status, what
        refused = _confirm(server, url)
        assert refused.status_code == status, (what, refused.text)
        assert "This link is refused" in refused.text, what
    assert _status(agent, request["id"]) == "pending"
    assert _status(agent, other["id"]) == "pending"


def test_an_unlinked_address_and_another_site_are_refused(
    server: Server, agent: httpx.Client, mailbox: Mailbox
) -> None:
    """No person behind the address, or a POST from another site: nothing decided.
    An unlinked address is mailed the inbox page, not one-click links."""
    request = _file(agent)
    assert mailed_links(server, mailbox, request["id"], to=NOBODY) == {}
    text, _ = parts(mailbox.last_to(NOBODY))
    assert f"{server.base}/requests/{request['id']}" in text
    key = server_secret(server.db).key
    until = datetime.now(UTC) + timedelta(hours=1)
    unlinked = sign_link(
        key, request_id=request["id"], decision="approve", recipient=NOBODY, expires_at=until
    )
    for answer in (
        httpx.get(f"{server.base}/links/{unlinked}", timeout=30),
        _confirm(server, f"{server.base}/links/{unlinked}"),
    ):
        assert answer.status_code == 403, answer.text
        assert "not linked" in answer.text
    mailed = mailed_links(server, mailbox, request["id"])
    for headers in ({"Sec-Fetch-Site": "cross-site"}, {"Origin": "https://evil.example"}):
        answer = httpx.post(mailed["approve"], headers=headers, timeout=30)
        assert answer.status_code == 403, answer.text
    assert _status(agent, request["id"]) == "pending"


def test_agent_text_in_the_email_is_data(
    server: Server, agent: httpx.Client, mailbox: Mailbox
) -> None:
    """Markup in a call's arguments is escaped in the HTML part and on the confirm page."""
    evil = "<img src=x onerror=alert(1)><a href='https://evil.example'>click</a>"
    request = _file(agent, note=evil)
    mailed = mailed_links(server, mailbox, request["id"])
    text, page = parts(mailbox.last_to(ALICE))
    assert evil in text
    assert "<img" not in page and "&lt;img src=x" in page
    assert "evil.example'>" not in page
    confirm = httpx.get(mailed["approve"], timeout=30)
    assert "<img" not in confirm.text and "&lt;img src=x" in confirm.text
