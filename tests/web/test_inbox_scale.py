"""The inbox at scale, in real headless Chromium against one real ``signoff serve``: search and
filters applied by the server (and kept right by live events), grouping by session with a
group decided as a whole, and opt-in browser notifications."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import httpx
import pytest

from signoff.server.app import API
from tests.serving import Server, agent_token, bearer, serve_for_module
from tests.web.browser import Agent, launched_chromium
from tests.web.inbox_pages import card, notes, open_inbox, shown, wait_shown

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Request

XSS = "<img src=x onerror=alert(1)>"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One real server for the module."""
    yield from serve_for_module(tmp_path_factory.mktemp("inbox-scale"))


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One Chromium for the module; each test opens its own context."""
    yield from launched_chromium()


@pytest.fixture(scope="module")
def agents(server: Server) -> Iterator[tuple[Agent, Agent]]:
    """Two agents with their own tokens."""
    pair = (
        Agent(server, agent_token(server, "build-bot")),
        Agent(server, agent_token(server, "ship-bot")),
    )
    yield pair
    for agent in pair:
        agent.close()


@pytest.fixture
def admin(server: Server) -> Iterator[httpx.Client]:
    """The admin over HTTP; every request still pending is rejected after the test."""
    assert server.admin_token is not None
    with httpx.Client(base_url=server.base, headers=bearer(server.admin_token)) as http:
        yield http
        left = http.get(f"{API}/requests", params={"status": "pending", "limit": 200}).json()
        ids = [r["id"] for r in left["items"]]
        if ids:
            body = {"ids": ids, "type": "reject", "reason": "test over"}
            assert http.post(f"{API}/decisions", json=body).status_code == 200


@pytest.fixture
def errors() -> Iterator[list[str]]:
    """The page errors the test's pages raised; none is expected."""
    raised: list[str] = []
    yield raised
    assert raised == []


def listing(*params: str) -> Callable[[Request], bool]:
    """Whether a browser request lists pending requests with all of ``params``."""
    return lambda r: f"{API}/requests?" in r.url and all(p in r.url for p in params)


def test_search_and_filters_narrow_the_list_on_the_server_and_live(
    browser: Browser,
    server: Server,
    agents: tuple[Agent, Agent],
    admin: httpx.Client,
    errors: list[str],
) -> None:
    """Each filter and the search narrow the list by asking the server; the state is in the
    address; a live request that does not match stays hidden while one that matches appears."""
    build, ship = agents
    shell = build.submit(
        session_id="s-build", tool_name="shell", tool_args={"command": "make build"}
    )
    deploy = ship.submit(session_id="s-ship", tool_name="deploy", tool_args={"env": "prod"})
    choice = ship.submit(
        session_id="s-ship", kind="choice", prompt="Which canary region?", options=["eu", "us"]
    )
    context, page = open_inbox(browser, server, errors)
    everything = [shell["id"], deploy["id"], choice["id"]]
    wait_shown(page, everything)
    page.keyboard.press("/")
    assert page.evaluate("() => document.activeElement.dataset.filter") == "q"
    page.keyboard.press("Escape")
    assert page.inner_text("[data-role=shown-count]") == "3 shown of 3 pending"

    with page.expect_request(listing("requested_by=build-bot")):  # the server filters
        page.select_option("[data-filter=requested_by]", shell["requested_by"])
    wait_shown(page, [shell["id"]])
    assert "requested_by=build-bot" in page.url
    assert page.inner_text("[data-role=shown-count]") == "1 shown of 3 pending"
    page.click("[data-action=clear-filters]")
    wait_shown(page, everything)
    page.select_option("[data-filter=session_id]", "s-ship")
    wait_shown(page, [deploy["id"], choice["id"]])
    late_build = build.submit(session_id="s-build", tool_name="deploy", tool_args={})
    late_ship = ship.submit(session_id="s-ship", tool_name="deploy", tool_args={"env": "qa"})
    wait_shown(page, [deploy["id"], choice["id"], late_ship["id"]])  # live, if it matches
    assert late_build["id"] not in shown(page)
    with page.expect_request(listing("session_id=s-ship", "tool_name=deploy")):
        page.select_option("[data-filter=tool_name]", "deploy")
    wait_shown(page, [deploy["id"], late_ship["id"]])
    page.click("[data-action=clear-filters]")
    page.select_option("[data-filter=kind]", "choice")
    wait_shown(page, [choice["id"]])
    page.click("[data-action=clear-filters]")

    with page.expect_request(listing("q=canary")):
        page.fill("[data-filter=q]", "canary")
    wait_shown(page, [choice["id"]])
    page.fill("[data-filter=q]", "make build")  # words ANDed, over the args
    wait_shown(page, [shell["id"]])
    page.fill("[data-filter=q]", "make deploy")
    wait_shown(page, [])
    assert page.inner_text("[data-role=empty]") == "No pending request matches."

    page.fill("[data-filter=q]", "prod")
    wait_shown(page, [deploy["id"]])
    assert "q=prod" in page.url
    other = build.submit(session_id="s-build", tool_name="shell", tool_args={"command": "ls"})
    match = ship.submit(session_id="s-ship", tool_name="deploy", tool_args={"env": "prod"})
    wait_shown(page, [deploy["id"], match["id"]])
    assert other["id"] not in shown(page)
    page.wait_for_function(
        "want => document.querySelector('[data-role=shown-count]').textContent === want",
        arg="2 shown of 7 pending",
        timeout=5000,
    )

    page.goto(f"{server.base}/?q=prod&session_id=s-ship")  # the address restores the view
    wait_shown(page, [deploy["id"], match["id"]])
    assert page.input_value("[data-filter=q]") == "prod"
    assert page.input_value("[data-filter=session_id]") == "s-ship"
    context.close()


def test_group_by_session_collapses_and_decides_a_group_as_a_whole(
    browser: Browser,
    server: Server,
    agents: tuple[Agent, Agent],
    admin: httpx.Client,
    errors: list[str],
) -> None:
    """Grouped by session, each group names its agents and count, collapses, and approves or
    (with a reason, confirmed) rejects all its requests through the batch endpoint."""
    build, ship = agents
    one = [
        build.submit(session_id="g-one", tool_name="t", tool_args={"n": n})["id"] for n in range(2)
    ]
    two = [
        ship.submit(session_id="g-two", tool_name="t", tool_args={"n": 5})["id"],
        build.submit(session_id="g-two", tool_name="t", tool_args={"n": 6})["id"],
    ]
    context, page = open_inbox(browser, server, errors)
    wait_shown(page, one + two)
    page.check("[data-role=group-by-session]")
    group_one = page.locator('section.group[data-session="g-one"]')
    group_two = page.locator('section.group[data-session="g-two"]')
    group_two.wait_for()
    assert "group=session" in page.url
    assert group_one.locator("[data-role=group-meta]").inner_text() == "build-bot · 2 pending"
    assert (
        group_two.locator("[data-role=group-meta]").inner_text()
        == "build-bot, ship-bot · 2 pending"
    )
    assert sorted(shown(group_two)) == sorted(two)
    sessions = page.locator("section.group").evaluate_all("gs => gs.map(g => g.dataset.session)")
    assert sessions == ["g-two", "g-one"]  # the newest first

    group_one.locator("[data-action=toggle-group]").click()
    assert group_one.locator("article.card").first.is_hidden()
    assert group_one.locator("[data-action=toggle-group]").get_attribute("aria-expanded") == "false"
    for _ in range(4):
        page.keyboard.press("j")  # through g-two's cards, never into the collapsed g-one
    assert page.eval_on_selector("article.card.focused", "c => c.dataset.id") == shown(group_two)[1]
    group_one.locator("[data-action=toggle-group]").click()
    assert group_one.locator("article.card").first.is_visible()

    late = ship.submit(session_id="g-three", tool_name="t", tool_args={})  # live, its own group
    page.locator('section.group[data-session="g-three"]').locator(card(late["id"])).wait_for()

    group_one.locator("[data-action=group-approve-all]").click()
    assert build.get(one[0])["status"] == "pending"  # nothing before the confirmation
    group_one.locator("[data-action=confirm-group-approve]").click()
    group_one.wait_for(state="detached")
    assert [build.get(i)["status"] for i in one] == ["approved", "approved"]

    group_two.locator("[data-action=group-reject-all]").click()
    confirm = group_two.locator("[data-role=group-confirm]")
    assert confirm.locator("[data-action=reject]").is_disabled()  # no reason yet
    confirm.locator("[data-quick-reason='Not needed']").click()  # a quick pick fills it
    confirm.locator("[data-role=reason]").press("End")
    confirm.locator("[data-role=reason]").type(": wrong session")
    assert ship.get(two[0])["status"] == "pending"
    confirm.locator("[data-action=reject]").click()
    group_two.wait_for(state="detached")
    for request_id in two:
        rejected = build.get(request_id) if request_id == two[1] else ship.get(request_id)
        assert rejected["status"] == "rejected"
        assert rejected["decision"]["decision"]["reason"] == "Not needed: wrong session"

    page.reload()  # grouping is in the address too
    page.locator('section.group[data-session="g-three"]').wait_for()
    assert page.is_checked("[data-role=group-by-session]")
    context.close()


def test_a_granted_opt_in_notifies_of_a_new_request_as_text_and_opens_it(
    browser: Browser,
    server: Server,
    agents: tuple[Agent, Agent],
    admin: httpx.Client,
    errors: list[str],
) -> None:
    """With permission and the opt-in, a new request the person may decide notifies once
    (the args' markup as text), their own request does not, and a click opens it."""
    build, _ = agents
    context, page = open_inbox(browser, server, errors, notifications=True)
    button = page.locator("[data-action=notify]")
    assert button.inner_text() == "Notify me"
    button.click()
    page.wait_for_function("() => localStorage.getItem('signoff.notify') === 'on'", timeout=5000)
    assert button.inner_text() == "Notifications on"

    own = admin.post(f"{API}/requests", json={"session_id": "s", "tool_name": "t", "tool_args": {}})
    assert own.status_code == 201, own.text  # the person's own request: not theirs to be told of
    mine = build.submit(tool_name="shell", tool_args={"command": XSS})
    page.wait_for_function("() => window.__notes.length > 0", timeout=10_000)
    assert notes(page) == [
        {
            "title": "signoff: build-bot asks",
            "body": f'shell {{"command":"{XSS}"}}',
            "tag": f"signoff-{mine['id']}",
        }
    ]
    admin.post(f"{API}/requests/{mine['id']}/decision", json={"type": "approve"})
    page.wait_for_selector(card(mine["id"]), state="detached")
    assert len(notes(page)) == 1  # a decision is no new request

    page.evaluate("() => { window.__shown = true; }")  # the person is looking at the tab
    seen = build.submit(tool_name="shell", tool_args={"command": "seen"})
    page.wait_for_selector(card(seen["id"]))
    assert len(notes(page)) == 1
    page.evaluate("() => { window.__shown = false; window.__illegal = true; }")
    refused = build.submit(tool_name="shell", tool_args={"command": "android"})
    page.wait_for_selector(card(refused["id"]))  # a browser refusing to notify breaks nothing
    assert len(notes(page)) == 1
    page.evaluate("() => { window.__illegal = false; }")
    again = build.submit(tool_name="deploy", tool_args={})
    page.wait_for_function("() => window.__notes.length === 2", timeout=10_000)
    page.evaluate("window.__notes[1].onclick()")
    page.wait_for_url(re.compile(rf"/requests/{again['id']}$"))
    page.goto(f"{server.base}/")
    assert page.locator("[data-action=notify]").inner_text() == "Notifications on"  # remembered
    context.close()


def test_without_permission_or_opt_in_nothing_notifies(
    browser: Browser,
    server: Server,
    agents: tuple[Agent, Agent],
    admin: httpx.Client,
    errors: list[str],
) -> None:
    """Permission alone (no click) shows nothing; a click the browser refuses shows nothing."""
    build, _ = agents
    for granted in (True, False):
        context, page = open_inbox(browser, server, errors, notifications=granted)
        if not granted:
            page.click("[data-action=notify]")
            page.wait_for_selector("#toast:not([hidden])")
            assert "blocked" in page.inner_text("#toast")
            assert page.inner_text("[data-action=notify]") == "Notify me"
        created = build.submit(tool_name="shell", tool_args={"command": "quiet"})
        page.wait_for_selector(card(created["id"]))  # its event reached the page
        assert notes(page) == []
        assert page.evaluate("Notification.permission") == ("granted" if granted else "denied")
        context.close()
