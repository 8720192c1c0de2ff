"""A coding agent's hook files the same request everything else sees and decides.

``signoff hook AGENT`` runs as a real process against a real ``signoff serve`` with a
tools.toml: its request shows in the API, the web inbox (real Chromium) and ``signoff
pending``; the audit
names the agent; a person's session-wide approval lets the agent's next call pass with no
person (and no other session's); and tools.toml ``allow`` / ``deny`` answer without a person.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import httpx
import pytest

from signoff.server.app import API
from tests.hooks.hook_process import (
    assert_denied,
    claude_call,
    decide,
    finish,
    hook_command,
    pending_listing,
    reason,
    requests_of,
    run_hook,
    run_hooks,
    start_hook,
    stop_leftovers,
    verdict,
    wait_pending,
)
from tests.security.policy_serving import serve_with_policy
from tests.serving import Server, bearer
from tests.web.browser import CHROMIUM, CHROMIUM_ARGS, need_chromium, sign_in

if TYPE_CHECKING:
    from playwright.sync_api import Browser

POLICY = """\
[tools]
default = "ask"

[[rules]]
tool = "*"
args = { command = "rm *" }
action = "deny"
name = "no-rm"

[[rules]]
tool = "Read"
args = { file_path = "/home/dev/acme/*" }
extra_args = "ignore"
action = "allow"
name = "reads-in-the-repo"
"""
"""rm is refused, reading the repository passes, everything else waits for a person."""

WRITE = {"file_path": "/home/dev/acme/src/rate_limit.py", "content": "LIMIT = 100\n"}


@pytest.fixture(autouse=True)
def _no_hook_left_running() -> Iterator[None]:
    yield
    stop_leftovers()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One real server for the module, with :data:`POLICY` as its tools.toml."""
    yield from serve_with_policy(tmp_path_factory.mktemp("same_decision"), POLICY)


def request_page_text(server: Server, admin: str, request_id: str) -> tuple[str, str]:
    """The web inbox's page for one request as real Chromium renders it: the request's card
    and, in it, the diff preview's table."""
    need_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser: Browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_context(viewport={"width": 1200, "height": 900}).new_page()
            sign_in(page, server.base, admin)
            page.goto(f"{server.base}/requests/{request_id}")
            card = f'article.card[data-id="{request_id}"]'
            page.wait_for_selector(f"{card} table.diff")
            return page.inner_text(card), page.inner_text(f"{card} table.diff")
        finally:
            browser.close()


def test_a_hook_request_is_the_same_request_everywhere(
    server: Server, agent: str, admin: str, person: str
) -> None:
    """Claude Code's Write, filed by its hook: the API's pending list and ``signoff pending``
    show the tool, args, diff preview and the context naming the agent; the audit's submit
    entry names it; a person's no reaches the hook as a deny (exit 0) with their reason."""
    call = claude_call("everywhere", "Write", WRITE, tool_use_id="toolu_01")
    started = start_hook(
        hook_command("claude-code", server, agent, "--timeout", "120"), call, server.env
    )
    filed = wait_pending(server, admin, "everywhere", started)

    pending = requests_of(server, person, status="pending")
    assert filed["id"] in [item["id"] for item in pending]
    assert filed["tool_name"] == "Write" and filed["tool_args"] == WRITE
    assert filed["tool_call_id"] == "toolu_01" and filed["requested_by"] == "coder"
    assert filed["context"]["via"] == "Claude Code hook (PreToolUse)"
    assert filed["context"]["cwd"] == "/home/dev/acme"
    assert filed["preview"]["path"] == WRITE["file_path"]
    assert "+LIMIT = 100" in filed["preview"]["diff"]

    listed = pending_listing(server, person)
    assert filed["id"] in listed and "Write" in listed

    rejected = decide(server, person, filed["id"], type="reject", reason="use the config file")
    assert rejected.status_code == 200, rejected.text
    run = finish(started)
    assert_denied("claude-code", run, 0)
    assert "use the config file" in reason("claude-code", run.body)

    audit = httpx.get(
        f"{server.base}{API}/audit",
        params={"request_id": filed["id"]},
        headers=bearer(admin),
        timeout=30,
    ).json()["items"]
    submitted = next(entry for entry in audit if entry["action"] == "submit")
    assert submitted["actor"] == "coder"
    assert submitted["details"]["request"]["context"]["via"] == "Claude Code hook (PreToolUse)"
    assert [entry["actor"] for entry in audit if entry["action"] == "decide"] == ["alice"]


def test_the_web_inbox_shows_a_hook_request(
    server: Server, agent: str, admin: str, person: str
) -> None:
    """The inbox's page for a hook's Write shows the tool, the path, the diff preview and the
    context naming the agent and its working directory."""
    call = claude_call("web-inbox", "Write", WRITE, tool_use_id="toolu_02")
    started = start_hook(
        hook_command("claude-code", server, agent, "--timeout", "120"), call, server.env
    )
    filed = wait_pending(server, admin, "web-inbox", started)
    shown, diff = request_page_text(server, admin, filed["id"])
    for text in (
        "Write",
        WRITE["file_path"],
        "Claude Code hook (PreToolUse)",
        '"cwd": "/home/dev/acme"',
    ):
        assert text in shown, f"{text!r} not in:\n{shown}"
    assert "+++ b/home/dev/acme/src/rate_limit.py" in diff and "+\tLIMIT = 100" in diff, diff
    rejected = decide(server, person, filed["id"], type="reject", reason="not now")
    assert rejected.status_code == 200, rejected.text
    assert_denied("claude-code", finish(started), 0)


def test_a_session_approval_lets_the_same_session_pass_and_no_other(
    server: Server, agent: str, admin: str, person: str
) -> None:
    """A person approves with scope=session: the agent's next Bash call in that session passes
    on the grant with no person; the same call from another session still waits (denied when
    nobody answers, its request withdrawn)."""
    first = claude_call("granted", "Bash", {"command": "make test"}, tool_use_id="toolu_1")
    started = start_hook(
        hook_command("claude-code", server, agent, "--timeout", "120"), first, server.env
    )
    filed = wait_pending(server, admin, "granted", started)
    approved = decide(server, person, filed["id"], type="approve", scope="session")
    assert approved.status_code == 200, approved.text
    run = finish(started)
    assert run.code == 0 and verdict("claude-code", run.body) == "allow", run

    again = claude_call("granted", "Bash", {"command": "make lint"}, tool_use_id="toolu_2")
    elsewhere = claude_call("not-granted", "Bash", {"command": "make lint"}, tool_use_id="t3")
    quick = hook_command("claude-code", server, agent, "--timeout", "1")
    runs = run_hooks({"same session": (quick, again), "other": (quick, elsewhere)}, server.env)

    passed = runs["same session"]
    assert passed.code == 0 and verdict("claude-code", passed.body) == "allow", passed
    assert "standing grant" in reason("claude-code", passed.body)
    on_grant = requests_of(server, admin, session_id="granted")[0]
    assert on_grant["status"] == "approved" and on_grant["grant_id"] is not None
    assert on_grant["tool_args"] == {"command": "make lint"}

    assert_denied("claude-code", runs["other"], 2)
    assert requests_of(server, admin, session_id="not-granted")[0]["status"] == "canceled"


DENIED_CALLS = {
    "claude-code": claude_call("policy-cc", "Bash", {"command": "rm -rf /home/dev/acme"}),
    "codex": {**claude_call("policy-codex", "Bash", {"command": "rm -rf ."}), "turn_id": "t"},
    "gemini": {
        "session_id": "policy-gemini",
        "hook_event_name": "BeforeTool",
        "tool_name": "run_shell_command",
        "tool_input": {"command": "rm -rf node_modules"},
    },
    "cursor": {
        "conversation_id": "policy-cursor",
        "hook_event_name": "beforeShellExecution",
        "command": "rm -rf dist",
        "cwd": "/home/dev/acme",
    },
}


def test_a_tools_toml_deny_answers_every_agent_without_a_person(
    server: Server, agent: str, admin: str
) -> None:
    """tools.toml's deny rule: each agent's hook denies at once with exit 0 (a decision, not a
    failure) and the policy's reason; the request is rejected by policy, not left waiting."""
    runs = run_hooks(
        {
            name: (hook_command(name, server, agent, "--timeout", "120"), call)
            for name, call in DENIED_CALLS.items()
        },
        server.env,
    )
    for name, run in runs.items():
        assert_denied(name, run, 0)
        assert "denied by policy" in reason(name, run.body), run
    for call in DENIED_CALLS.values():
        session = call.get("session_id") or call["conversation_id"]
        [filed] = requests_of(server, admin, session_id=session)
        assert filed["status"] == "rejected" and filed["decision"]["via"] == "policy"


def test_a_tools_toml_allow_answers_without_a_person(server: Server, agent: str) -> None:
    """tools.toml's allow rule: reading a file in the repository passes at once, exit 0."""
    call = claude_call("policy-read", "Read", {"file_path": "/home/dev/acme/README.md"})
    run = run_hook(hook_command("claude-code", server, agent, "--timeout", "120"), call, server.env)
    assert run.code == 0 and verdict("claude-code", run.body) == "allow", run
    assert reason("claude-code", run.body) == "allowed by signoff policy"
