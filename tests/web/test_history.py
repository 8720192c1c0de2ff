"""The history page in real headless Chromium against one real ``signoff serve`` per module:
rows that read as sentences, every filter and the search (server-side), paging, the filters
in the URL, a row's copy link, and agent text (args, prompts, reasons) shown inert."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from signoff.server.app import API
from tests.serving import Server, agent_token, bearer, new_token, serve_for_module
from tests.web.browser import launched_chromium, sign_in

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

XSS = "<img src=x onerror=\"document.body.dataset.pwned='1'\">"
BULK = 53
"""Requests in one session, more than a page (50)."""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server for the module."""
    yield from serve_for_module(tmp_path_factory.mktemp("history-web"))


class Seed:
    """Requests of every kind and outcome, filed and decided over HTTP; their ids by name."""

    def __init__(self, server: Server) -> None:
        self.http = httpx.Client(base_url=server.base, timeout=30)
        self.alice = bearer(new_token(server, "alice", "approver")[0])
        self.build = bearer(agent_token(server, "build-bot"))
        self.docs = bearer(agent_token(server, "docs-bot"))
        self.ids: dict[str, str] = {}

    def file(self, name: str, who: dict[str, str], **body: Any) -> str:
        """File a request as ``who``; remember its id as ``name``."""
        made = self.http.post(f"{API}/requests", json={"session_id": "s1", **body}, headers=who)
        assert made.status_code == 201, made.text
        self.ids[name] = made.json()["id"]
        return self.ids[name]

    def post(self, who: dict[str, str], path: str, body: dict[str, Any]) -> None:
        """POST ``body`` to a request's endpoint as ``who``."""
        answer = self.http.post(f"{API}/requests/{path}", json=body, headers=who)
        assert answer.status_code == 200, answer.text

    def run(self, request_id: str, args: dict[str, Any], result: dict[str, Any]) -> None:
        """Approve as alice, claim and report as build-bot."""
        self.post(self.alice, f"{request_id}/decision", {"type": "approve"})
        self.post(self.build, f"{request_id}/claim", {"args": args})
        self.post(self.build, f"{request_id}/result", result)


@pytest.fixture(scope="module")
def seed(server: Server) -> dict[str, str]:
    """The seeded requests' ids, oldest first."""
    s = Seed(server)
    approve = s.file("approved", s.build, tool_name="shell", tool_args={"command": "rm -rf build"})
    s.post(s.alice, f"{approve}/decision", {"type": "approve"})
    rejected = s.file("rejected", s.build, tool_name="shell", tool_args={"command": "drop db"})
    s.post(s.alice, f"{rejected}/decision", {"type": "reject", "reason": "too risky"})
    choice = s.file(
        "choice", s.docs, kind="choice", prompt="Deploy where?", options=["Canary", "Prod"]
    )
    s.post(s.alice, f"{choice}/decision", {"type": "choose", "choice": "Canary"})
    questions = s.file(
        "questions", s.docs, kind="questions", questions=[{"id": "name", "text": "Name?"}]
    )
    s.post(s.alice, f"{questions}/decision", {"type": "answer", "answers": {"name": "Ada"}})
    done = s.file("completed", s.build, tool_name="count", tool_args={"dir": "src"})
    s.run(done, {"dir": "src"}, {"ok": True, "result": "3 files"})
    failed = s.file("failed", s.build, tool_name="fetch", tool_args={"url": "x"})
    s.run(failed, {"url": "x"}, {"ok": False, "error": "disk full"})
    canceled = s.file("canceled", s.docs, tool_name="shell", tool_args={"command": "sleep 9"})
    s.post(s.docs, f"{canceled}/cancel", {"reason": "changed my mind"})
    hostile = s.file("hostile", s.docs, kind="choice", prompt=f"Pick {XSS}", options=[XSS, "b"])
    s.post(s.alice, f"{hostile}/decision", {"type": "reject", "reason": f"no {XSS}"})
    s.file("xss-args", s.docs, tool_name="shell", tool_args={"command": XSS})
    s.file("waiting", s.docs, tool_name="deploy", tool_args={"env": "prod"}, session_id="s2")
    for n in range(BULK):
        s.file(f"bulk{n}", s.build, tool_name="bulk", tool_args={"n": n}, session_id="bulk")
    s.http.close()
    return s.ids


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One Chromium for the module."""
    yield from launched_chromium()


@pytest.fixture(scope="module")
def page(browser: Browser, server: Server, seed: dict[str, str]) -> Iterator[Page]:
    """One signed-in tab for the module, with the clipboard allowed."""
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.base)
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda e: errors.append(str(e)))
    assert server.admin_token is not None
    sign_in(tab, server.base, server.admin_token)
    yield tab
    context.close()
    assert errors == [], errors


ROWS = "[data-role=history] tr"


def shown(page: Page, ids: list[str]) -> None:
    """Wait until the list shows exactly ``ids``, in this order."""
    page.wait_for_function(
        "want => JSON.stringify([...document.querySelectorAll('[data-role=history] tr')]"
        ".map((tr) => tr.dataset.id)) === JSON.stringify(want)",
        arg=ids,
        timeout=10_000,
    )


def texts(page: Page, request_id: str) -> tuple[str, str, str]:
    """A row's sentence, badge and outcome."""
    row = f'{ROWS}[data-id="{request_id}"]'
    return (
        page.inner_text(f"{row} [data-role=sentence]"),
        page.inner_text(f"{row} [data-role=status]"),
        page.inner_text(f"{row} [data-role=outcome]"),
    )


def test_rows_read_as_sentences_with_their_outcome(
    page: Page, server: Server, seed: dict[str, str]
) -> None:
    """Each kind and outcome in words; agent text stays text."""
    page.goto(f"{server.base}/history")
    decided = [seed[k] for k in ("hostile", "canceled", "failed", "completed", "questions")]
    decided += [seed[k] for k in ("choice", "rejected", "approved")]
    shown(page, decided)
    assert texts(page, seed["approved"]) == (
        "alice approved shell `rm -rf build` for build-bot",
        "approved",
        "approved",
    )
    assert texts(page, seed["rejected"])[1:] == ("rejected", "rejected: too risky")
    assert texts(page, seed["choice"]) == (
        "alice answered “Deploy where?” for docs-bot",
        "answered",
        "answered: Canary",
    )
    assert texts(page, seed["questions"])[2] == "Name?: Ada"
    assert texts(page, seed["completed"])[1:] == ("completed", "3 files")
    assert texts(page, seed["failed"])[1:] == ("failed", "failed: disk full")
    assert texts(page, seed["canceled"])[:2] == ("docs-bot canceled shell `sleep 9`", "canceled")
    hostile = texts(page, seed["hostile"])
    assert XSS in hostile[0] and hostile[2] == f"rejected: no {XSS}"
    assert page.locator("table.history img").count() == 0
    assert page.evaluate("document.body.dataset.pwned") is None
    badge_wraps = page.evaluate(
        "[...document.querySelectorAll('[data-role=status]')]"
        ".some((b) => b.getClientRects().length > 1 || getComputedStyle(b).whiteSpace !== 'nowrap')"
    )
    assert badge_wraps is False


def test_filters_and_search_narrow_on_the_server_and_live_in_the_url(
    page: Page, server: Server, seed: dict[str, str]
) -> None:
    """Status, kind, agent, session, person and search; the URL keeps them across a reload."""
    page.goto(f"{server.base}/history?status=rejected")
    shown(page, [seed["hostile"], seed["rejected"]])
    page.select_option("[data-filter=kind]", "approval")
    shown(page, [seed["rejected"]])
    assert "kind=approval" in page.url and "status=rejected" in page.url
    page.reload()
    shown(page, [seed["rejected"]])
    assert page.input_value("[data-filter=status]") == "rejected"
    assert page.input_value("[data-filter=kind]") == "approval"
    page.goto(f"{server.base}/history?status=")
    page.fill("[data-filter=q]", "RM build")
    shown(page, [seed["approved"]])
    assert "q=RM+build" in page.url
    page.fill("[data-filter=q]", XSS)
    shown(page, [seed["xss-args"], seed["hostile"]])
    page.fill("[data-filter=q]", "")
    page.fill("[data-filter=requested_by]", "docs-bot")
    page.fill("[data-filter=session_id]", "s2")
    shown(page, [seed["waiting"]])
    assert texts(page, seed["waiting"])[:2] == ("docs-bot asks: deploy `prod`", "waiting")
    page.goto(f"{server.base}/history?decided_by=alice&kind=choice")
    shown(page, [seed["hostile"], seed["choice"]])
    page.fill("[data-filter=q]", "%")
    shown(page, [])
    assert page.is_visible("[data-role=empty]")


def test_load_more_pages_with_the_cursor_and_a_row_shares_its_link(
    page: Page, server: Server, seed: dict[str, str]
) -> None:
    """Fifty rows, then the rest with Load more; Copy link copies the request's address."""
    page.goto(f"{server.base}/history?status=pending&session_id=bulk")
    bulk = [seed[f"bulk{n}"] for n in reversed(range(BULK))]
    shown(page, bulk[:50])
    page.click("[data-action=more]")
    shown(page, bulk)
    assert page.is_hidden("[data-action=more]")
    row = f'{ROWS}[data-id="{bulk[0]}"]'
    page.click(f"{row} [data-action=copy-link]")
    link = f"{server.base}/requests/{bulk[0]}"
    page.wait_for_function(
        "want => navigator.clipboard.readText().then((t) => t === want)", arg=link
    )
    assert page.get_attribute(f"{row} [data-action=copy-link]", "data-link") == link
    page.click(f"{row} [data-role=sentence]")
    page.wait_for_url(link)
