"""Every web page at phone width, in dark mode, and in words that say what happens next.

One real ``signoff serve`` (hosting the demo chat agent) and one headless Chromium for the
module, with realistic data: a long shell command, a long file path, a file edit's diff, a
choice, questions, decided requests in history and a standing grant. Each page is loaded
at 390x844 (the inbox and a request also at 360 and 430) and must not scroll sideways, with
Sign out on screen. The screenshots of the inbox, a request, history and grants at 1280 and
390 px go to ``test-artifacts/``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from signoff.config import server_secret
from signoff.notify.links import sign_link
from signoff.server.app import API
from tests.mail import link_person
from tests.serving import DEMO, Server, agent_token, bearer, serve_hosted
from tests.web.browser import CHROMIUM, CHROMIUM_ARGS, SCREENSHOTS, need_chromium, sign_in
from tests.web.chat_serving import Chat, start

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page, ViewportSize

POLICY = '[tools]\nneed_approval = ["shell", "write_file", "edit_file", "deploy"]\n'
LONG_PATH = (
    "services/payments/src/main/java/com/example/PaymentsGateway/Reconciliation/"
    "NightlyBatchReconciliationJobConfiguration.java"
)
LONG_COMMAND = (
    "find /var/log/applications/payments-gateway/production -name '*.log.gz' -mtime +30 "
    "-print0 | xargs -0 --no-run-if-empty rm -f -- && echo cleaned:"
    + "/very/long/unbroken/path/segment"
    * 6
)
ADDRESS = "admin@example.com"
PHONE: ViewportSize = {"width": 390, "height": 844}
DESKTOP: ViewportSize = {"width": 1280, "height": 900}


@dataclass
class Site:
    """The server, its admin's token, and the requests the pages show."""

    server: Server
    admin: str
    ids: dict[str, str]
    chat: Chat


def _submit(client: httpx.Client, **body: Any) -> str:
    made = client.post(f"{API}/requests", json={"session_id": "deploy-2026-11", **body})
    assert made.status_code == 201, made.text
    request_id: str = made.json()["id"]
    return request_id


def _decide(client: httpx.Client, request_id: str, **decision: Any) -> None:
    done = client.post(f"{API}/requests/{request_id}/decision", json=decision)
    assert done.status_code == 200, done.text


def _seed(server: Server, admin: str) -> dict[str, str]:
    """Pending and decided requests of every kind, and a standing grant."""
    person = httpx.Client(base_url=server.base, headers=bearer(admin), timeout=30)
    agent = httpx.Client(base_url=server.base, headers=bearer(agent_token(server)), timeout=30)
    with agent, person:
        ids = {
            "shell": _submit(agent, tool_name="shell", tool_args={"command": LONG_COMMAND}),
            "write": _submit(
                agent,
                tool_name="write_file",
                tool_args={"path": LONG_PATH, "content": "class Job {}\n" * 3},
            ),
            "edit": _submit(
                agent,
                tool_name="edit_file",
                tool_args={
                    "path": LONG_PATH,
                    "old_string": "retries = 3  # " + "x" * 120,
                    "new_string": "retries = 5  # " + "y" * 120,
                },
                context={"why": "the nightly job times out", "ticket": "PAY-" + "1234" * 20},
            ),
            "choice": _submit(
                agent,
                kind="choice",
                prompt="How should the release roll out?",
                options=["Canary", "Blue-green", "All at once"],
            ),
            "questions": _submit(
                agent,
                kind="questions",
                questions=[
                    {"id": "version", "text": "Which version ships?", "required": True},
                    "Anything to tell the on-call engineer?",
                ],
            ),
            "answered": _submit(
                agent,
                kind="choice",
                prompt="Which strategy for the database migration?",
                options=["Canary", "Blue-green"],
            ),
            "granted": _submit(agent, tool_name="deploy", tool_args={"env": "staging"}),
            "rejected": _submit(agent, tool_name="shell", tool_args={"command": "rm -rf /"}),
        }
        _decide(person, ids["answered"], type="choose", choice="Canary")
        _decide(person, ids["granted"], type="approve", scope="always")
        _decide(person, ids["rejected"], type="reject", reason="never delete the root")
    return ids


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """One server hosting the demo agent, with the data every page shows."""
    need_chromium()
    home = tmp_path_factory.mktemp("phone")
    server, workspace = serve_hosted(home, DEMO, tools_toml=POLICY)
    assert server.admin_token is not None
    link_person(server, ADDRESS, "admin")
    chat = Chat(server, home, (DEMO,), workspace, {})
    yield Site(server, server.admin_token, _seed(server, server.admin_token), chat)
    if server.process.poll() is None:
        server.stop()


@pytest.fixture(scope="module")
def browser(site: Site) -> Iterator[Browser]:
    """One Chromium for the module."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


def _context(browser: Browser, site: Site, viewport: ViewportSize, **options: Any) -> Page:
    context = browser.new_context(viewport=viewport, **options)
    page = context.new_page()
    sign_in(page, site.server.base, site.admin)
    return page


@pytest.fixture(scope="module")
def phone(browser: Browser, site: Site) -> Iterator[Page]:
    """A page signed in as the admin at 390x844."""
    page = _context(browser, site, PHONE)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    yield page
    page.context.close()
    assert errors == [], errors


def _fits(page: Page, what: str) -> None:
    """No sideways scrolling, and Sign out (when the page has it) on screen."""
    width = page.evaluate("[document.documentElement.scrollWidth, innerWidth]")
    assert width[0] <= width[1], f"{what}: {width[0]} px wide in a {width[1]} px viewport"
    sign_out = page.locator(".logout button")
    if sign_out.count():
        box = sign_out.bounding_box()
        assert box is not None and sign_out.is_visible(), what
        assert box["x"] >= 0 and box["x"] + box["width"] <= width[1], f"{what}: Sign out {box}"


def _open(page: Page, url: str, ready: str) -> None:
    page.goto(url)
    page.wait_for_selector(ready)


def _shot(page: Page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def _card(request_id: str) -> str:
    return f'article.card[data-id="{request_id}"]'


# agent data that must never be shown upper-cased (paths are case-sensitive)
_TRANSFORMED = """(needles) => [...document.querySelectorAll("body *")]
  .filter((el) => getComputedStyle(el).textTransform !== "none")
  .filter((el) => needles.some((n) => el.textContent.includes(n)))
  .map((el) => el.outerHTML.slice(0, 120))"""


def test_the_signed_in_pages_fit_a_phone(phone: Page, site: Site) -> None:
    """Inbox, each kind of request, history, grants and chat: no sideways scroll at 390 px."""
    base, ids = site.server.base, site.ids
    _open(phone, f"{base}/", _card(ids["questions"]))
    phone.wait_for_selector(f"{_card(ids['edit'])} table.diff")
    _fits(phone, "inbox")
    _shot(phone, "inbox-phone")
    for name in ("edit", "shell", "choice", "questions", "answered"):
        _open(phone, f"{base}/requests/{ids[name]}", f"{_card(ids[name])} .title")
        phone.wait_for_selector("[data-role=audit] tr")
        _fits(phone, f"the {name} request's page")
        if name == "edit":
            _shot(phone, "request-phone")
            phone.click(f"{_card(ids[name])} [data-action=edit]")
            phone.wait_for_selector(f"{_card(ids[name])} .editor:not([hidden])")
            _fits(phone, "the edit request's page with its arguments' editor open")
    _open(phone, f"{base}/history", f'[data-id="{ids["answered"]}"]')
    _fits(phone, "history")
    _shot(phone, "history-phone")
    _open(phone, f"{base}/grants", "[data-role=grants] [data-action=revoke]")
    _fits(phone, "grants")
    _shot(phone, "grants-phone")
    _open(phone, f"{base}/requests/req_unknown", "main .empty")
    _fits(phone, "an unknown request")
    task = start(phone, site.chat, "create welcome.md saying hello from the chat")
    phone.wait_for_selector(".box article.card [data-action=approve]")
    _fits(phone, "a conversation")
    _open(phone, f"{base}/chat", f'a[href="/chat/{task}"]')
    _fits(phone, "the chat list")
    _open(phone, f"{base}/chat/task_somebody_elses", "main")
    _fits(phone, "a conversation that is not yours")


def test_inbox_and_request_fit_from_360_to_430(browser: Browser, site: Site) -> None:
    """The narrowest and widest phones too; the action row stacks inside the screen."""
    for width in (360, 430):
        page = _context(browser, site, {"width": width, "height": 800})
        _open(page, f"{site.server.base}/", _card(site.ids["questions"]))
        _fits(page, f"inbox at {width}")
        _open(page, f"{site.server.base}/requests/{site.ids['edit']}", "table.diff")
        _fits(page, f"request at {width}")
        approve = page.locator(f"{_card(site.ids['edit'])} [data-action=approve]").bounding_box()
        assert approve is not None and approve["x"] + approve["width"] <= width
        field = page.locator(f"{_card(site.ids['edit'])} [data-role=feedback]").bounding_box()
        assert field is not None and field["height"] < 50, f"a one-line field stacked {field}"
        page.context.close()


def test_pages_without_a_session_fit_a_phone(browser: Browser, site: Site) -> None:
    """Sign-in, its errors, an emailed link's confirm page and an unknown path."""
    context = browser.new_context(viewport=PHONE)
    page = context.new_page()
    base = site.server.base
    _open(page, f"{base}/login", "form")
    _fits(page, "sign-in")
    _open(page, f"{base}/login?token=not-a-token", ".message.error")
    _fits(page, "sign-in refused")
    token = sign_link(
        server_secret(site.server.db).key,
        request_id=site.ids["edit"],
        decision="reject",
        recipient=ADDRESS,
        expires_at=datetime.now(UTC) + timedelta(hours=1),
    )
    _open(page, f"{base}/links/{token}", "#link-args")
    _fits(page, "an emailed link's confirm page")
    _open(page, f"{base}/links/{'x' * 40}", "#link-message")
    _fits(page, "a refused link")
    _open(page, f"{base}/no/such/page/{'segment' * 20}", "#error-message")
    _fits(page, "an unknown path")
    context.close()


def test_words_say_what_happened_and_what_happens_next(phone: Page, site: Site) -> None:
    """An answered choice says "answered: Canary", never APPROVED; questions are sent, a
    choice is made by naming it; nothing that shows agent data is upper-cased."""
    base, ids = site.server.base, site.ids
    _open(phone, f"{base}/requests/{ids['answered']}", f"{_card(ids['answered'])} .title")
    answered = _card(ids["answered"])
    assert phone.inner_text(f"{answered} [data-role=status]") == "answered"
    assert "answered: Canary" in phone.inner_text(f"{answered} [data-role=outcome]")
    assert "approved" not in phone.inner_text(answered).lower()
    _open(phone, f"{base}/requests/{ids['questions']}", "[data-action=answer]")
    assert phone.inner_text("[data-action=answer]") == "Send answers"
    approve = phone.locator("[data-action=approve]")
    assert approve.count() == 0 or "approve" not in approve.inner_text().lower()
    _open(phone, f"{base}/requests/{ids['choice']}", "[data-action=choose]")
    buttons = phone.locator("[data-action=choose]").all_inner_texts()
    assert buttons == ["Choose Canary", "Choose Blue-green", "Choose All at once"]
    for name in ("edit", "write", "shell"):
        _open(phone, f"{base}/requests/{ids[name]}", f"{_card(ids[name])} [data-role=args]")
        needles = [LONG_PATH, "shell", "write_file", "edit_file", "admin", "deploy-2026-11"]
        assert phone.evaluate(_TRANSFORMED, needles) == [], name


def test_dark_mode_follows_the_system(browser: Browser, site: Site) -> None:
    """prefers-color-scheme: dark gives a dark page with light text and readable diffs;
    light stays as it was."""
    looks = """() => {
      const lum = (c) => { const [r, g, b] = c.match(/\\d+/g).map(Number);
        return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255; };
      const of = (sel, prop) => lum(getComputedStyle(document.querySelector(sel))[prop]);
      return { body: of("body", "backgroundColor"), text: of("body", "color"),
        card: of("article.card", "backgroundColor"), del: of(".diff tr.del", "backgroundColor"),
        delText: of(".diff tr.del td.code", "color"), add: of(".diff tr.add", "backgroundColor"),
        addText: of(".diff tr.add td.code", "color"), pre: of("pre", "backgroundColor"),
        preText: of("pre", "color") };
    }"""
    seen = {}
    for scheme in ("light", "dark"):
        page = _context(browser, site, DESKTOP, color_scheme=scheme)
        _open(page, f"{site.server.base}/requests/{site.ids['edit']}", "table.diff tr.add")
        seen[scheme] = page.evaluate(looks)
        if scheme == "light":
            _shot(page, "request-desktop")
            for name, url, ready in _DESKTOP_SHOTS:
                _open(page, site.server.base + url.format(**site.ids), ready.format(**site.ids))
                _shot(page, name)
        else:
            _shot(page, "request-dark")
        page.context.close()
    light, dark = seen["light"], seen["dark"]
    assert light["body"] > 0.9 and light["text"] < 0.2 and light["card"] > 0.95
    assert dark["body"] < 0.15 and dark["text"] > 0.8 and dark["card"] < 0.2, dark
    for side in ("del", "add", "pre"):
        # readable: text far from its background in both schemes
        assert abs(light[f"{side}Text"] - light[side]) > 0.45, (side, light)
        assert abs(dark[f"{side}Text"] - dark[side]) > 0.45, (side, dark)


_DESKTOP_SHOTS = (
    ("inbox-desktop", "/", "article.card[data-id='{questions}']"),
    ("history-desktop", "/history", "[data-id='{answered}']"),
    ("grants-desktop", "/grants", "[data-role=grants] [data-action=revoke]"),
)
