"""A real ``signoff serve --agent`` for the web chat's browser tests, and the steps they share.

The server hosts its agents with their file tools in ``home/workspace`` (so "the tool ran" is
a file on disk) under a policy that asks people about ``write_file`` only.
"""

from __future__ import annotations

import re
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from signoff.server.app import API
from tests.serving import Server, bearer, new_token, serve_hosted
from tests.web.browser import need_chromium, sign_in

if TYPE_CHECKING:
    from playwright.sync_api import BrowserContext, Page

POLICY = '[tools]\nneed_approval = ["write_file"]\n'
"""People decide file writes (the only gated calls these tests make), said by a policy rather
than left to the fail-closed default, which asks about every call. A question to a person is
not gated under any policy: it asks the person itself."""
DECIDED = ":not([data-status=pending])"
"""A box whose request was decided (approved, then executing and completed as it runs)."""


@dataclass
class Chat:
    """A server hosting agents, its workspace, and the people who use it."""

    server: Server
    home: Path
    agents: tuple[str, ...]
    workspace: Path
    """Where the agents' file tools work."""
    tokens: dict[str, str]

    def crash_and_restart(self) -> None:
        """``kill -9`` the server, then start it again on its database and port."""
        port = self.server.port
        self.server.process.send_signal(signal.SIGKILL)
        self.server.process.communicate(timeout=20)
        self.server, _ = serve_hosted(self.home, *self.agents, tools_toml=POLICY, port=port)

    def api(self, person: str) -> httpx.Client:
        """An HTTP client acting as ``person``."""
        return httpx.Client(
            base_url=self.server.base + API, headers=bearer(self.tokens[person]), timeout=30
        )

    def task(self, person: str, task_id: str) -> dict[str, Any]:
        """The task as the API shows it to ``person``."""
        with self.api(person) as client:
            got: dict[str, Any] = client.get(f"/tasks/{task_id}").json()
            return got


def serve_chat(home: Path, *agents: str) -> Iterator[Chat]:
    """Yield ``signoff serve --agent AGENT...`` on its own SQLite file in ``home``, with
    approvers alice and bob and an agent token bot; stopped at the end."""
    need_chromium()
    server, workspace = serve_hosted(home, *agents, tools_toml=POLICY)
    tokens: dict[str, str] = {}
    for name, role in (("alice", "approver"), ("bob", "approver"), ("bot", "agent")):
        tokens[name] = new_token(server, name, role)[0]
    running = Chat(server, home, agents, workspace, tokens)
    yield running
    if running.server.process.poll() is None:
        running.server.stop()


def signed_in(context: BrowserContext, chat: Chat, person: str) -> Page:
    """A new page in ``context``, signed in as ``person``."""
    page = context.new_page()
    sign_in(page, chat.server.base, chat.tokens[person])
    return page


def start(page: Page, chat: Chat, prompt: str | None, agent: str = "demo") -> str:
    """Start a conversation with ``agent`` from /chat (``prompt`` None: send what the open
    /chat page's box holds); its task id."""
    if prompt is not None:
        page.goto(f"{chat.server.base}/chat")
        page.fill("[data-role=message]", prompt)
    page.wait_for_selector(f"[data-role=agent] option[value={agent}]", state="attached")
    page.select_option("[data-role=agent]", agent)
    page.press("[data-role=message]", "Enter")
    page.wait_for_url(re.compile(r".*/chat/task_[\w-]+$"))
    return page.url.rsplit("/", 1)[1]


def follow_up(page: Page, prompt: str) -> None:
    """Send a follow-up message under a Completed conversation."""
    page.wait_for_selector("[data-role=task-status][data-status=Completed]")
    sent = page.locator("[data-role=message-user]").count()
    page.fill("form.composer [data-role=message]", prompt)
    page.press("form.composer [data-role=message]", "Enter")
    page.locator("[data-role=message-user]").nth(sent).wait_for()


def waiting_ids(chat: Chat, person: str, task_id: str, count: int) -> list[str]:
    """The request ids the task waits on, once it waits on ``count`` of them."""
    for _ in range(200):
        task = chat.task(person, task_id)
        if task["status"] == "Paused" and len(task["pending"]) == count:
            return [p["request_id"] for p in task["pending"]]
        time.sleep(0.05)
    raise AssertionError(f"the task did not pause on {count} calls: {task}")


def box(request_id: str) -> str:
    """The selector of one request's inline box."""
    return f'.box[data-request="{request_id}"] article.card'


def settled(page: Page) -> None:
    """Wait until the conversation's last run completed and its reply is on the page."""
    page.wait_for_selector("[data-role=task-status][data-status=Completed]")
