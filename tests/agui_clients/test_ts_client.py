"""The official AG-UI TypeScript client (``@ag-ui/client``'s ``HttpAgent``) against a real
``signoff serve`` hosting the demo chat agent.

``client.mjs`` asks the agent to write a file as a person (a person's token in the client's
headers), receives the run's interrupt, and, once this test has seen the request pending,
approves it through the client's own resume mechanism (``RunAgentInput.resume``, pydantic-ai's
``{"approved": true}`` payload) and reads the reply, then sends a follow-up message in the same
thread. What the client saw comes back as JSON.

The npm package (pinned with its dependencies by ``package-lock.json`` here) is installed
once into ``.cache/npm-agui`` (ignored by git). Without node and npm the module is skipped,
except in CI (``CI=true``), where it fails.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from signoff.server.app import API
from tests.agui_clients.hosted_demo import runs_url, serve_demo
from tests.node import cache_lock, need_node
from tests.serving import Server, bearer

HERE = Path(__file__).resolve().parent

CACHE = HERE.parents[1] / ".cache" / "npm-agui"
"""Where the npm packages are installed, once (ignored by git)."""

CLIENT_VERSION = json.loads((HERE / "package.json").read_text())["dependencies"]["@ag-ui/client"]
"""The ``@ag-ui/client`` release these tests pin."""

NODE_MAJOR = 18
"""The client needs the fetch and web streams node 18 brought."""

PROMPT = "create notes.md saying hello"

FOLLOW_UP = "what else can you do?"
"""A message the demo model answers with text alone (no call to approve)."""

STEP_TIMEOUT = 60.0
"""Seconds one run through the client may take before the test gives up on it."""


# --- the client -------------------------------------------------------------------------


def _installed() -> bool:
    """Whether the cache holds what ``package-lock.json`` pins (then npm is not asked)."""
    manifest = CACHE / "node_modules" / "@ag-ui" / "client" / "package.json"
    try:
        version = json.loads(manifest.read_text())["version"]
        lock = (CACHE / "package-lock.json").read_text()
    except (OSError, ValueError, KeyError):
        return False
    return version == CLIENT_VERSION and lock == (HERE / "package-lock.json").read_text()


@pytest.fixture(scope="module")
def client_script() -> Path:
    """``client.mjs`` beside its installed ``node_modules`` (npm ci on first use only)."""
    need_node(NODE_MAJOR, f"@ag-ui/client {CLIENT_VERSION}")
    with cache_lock(CACHE):
        if not _installed():
            for name in ("package.json", "package-lock.json"):
                shutil.copyfile(HERE / name, CACHE / name)
            done = subprocess.run(
                ["npm", "ci", "--no-audit", "--no-fund"],
                cwd=CACHE,
                capture_output=True,
                text=True,
                timeout=600,
                check=False,
            )
            assert done.returncode == 0, f"npm ci in {CACHE} failed:\n{done.stderr[-3000:]}"
        # beside node_modules, so its `import "@ag-ui/client"` resolves there
        script = CACHE / "client.mjs"
        shutil.copyfile(HERE / "client.mjs", script)
    return script


class Conversation:
    """``client.mjs`` running: one JSON line per run, resumed when told."""

    def __init__(self, script: Path, server: Server, token: str) -> None:
        self.process = subprocess.Popen(
            ["node", str(script), runs_url(server), token, PROMPT, FOLLOW_UP],
            cwd=script.parent,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._reader = ThreadPoolExecutor(max_workers=1)

    def next_run(self) -> dict[str, Any]:
        """What the client printed after its next run (a failure's message included)."""
        assert self.process.stdout is not None
        line = self._reader.submit(self.process.stdout.readline).result(timeout=STEP_TIMEOUT)
        if not line:
            self.process.wait(timeout=10)
            assert self.process.stderr is not None
            raise AssertionError(f"client.mjs exited: {self.process.stderr.read()[-3000:]}")
        said: dict[str, Any] = json.loads(line)
        assert said["phase"] != "error", said["message"]
        return said

    def resume(self) -> None:
        """Let the client resume the interrupted run."""
        assert self.process.stdin is not None
        self.process.stdin.write("go\n")
        self.process.stdin.flush()

    def close(self) -> None:
        """Stop the client if it still runs."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.communicate(timeout=10)
        self._reader.shutdown(wait=False)


# --- the server ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the hosted agent writes files."""
    return tmp_path_factory.mktemp("agui-client-workspace")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, workspace: Path) -> Iterator[Server]:
    """The module's ``signoff serve`` hosting the demo chat agent (``admin`` and ``person``,
    the hook tests' token fixtures, are made on it)."""
    yield from serve_demo(tmp_path_factory.mktemp("agui-client"), workspace)


def _get(server: Server, token: str, path: str, **params: str) -> Any:
    response = httpx.get(f"{server.base}{API}{path}", params=params, headers=bearer(token))
    assert response.status_code == 200, response.text
    return response.json()


def _said_by_user(said: dict[str, Any]) -> list[tuple[str, str]]:
    """The user messages the client held after a run: (id, text)."""
    return [(m["id"], m["content"]) for m in said["messages"] if m["role"] == "user"]


def _replayed_user_messages(server: Server, token: str, thread: str) -> list[tuple[str, str]]:
    """The user messages of the conversation's whole stream (GET /tasks/{id}/stream)."""
    url = f"{server.base}{API}/tasks/{thread}/stream"
    with httpx.stream("GET", url, headers=bearer(token), timeout=30) as got:
        assert got.status_code == 200
        events = [json.loads(line[5:]) for line in got.iter_lines() if line.startswith("data:")]
    users = {e["messageId"] for e in events if e.get("role") == "user"}
    return [
        (e["messageId"], e["delta"])
        for e in events
        if e["type"] == "TEXT_MESSAGE_CONTENT" and e["messageId"] in users
    ]


# --- the test -----------------------------------------------------------------------------


def test_the_official_client_is_interrupted_resumes_with_an_approval_and_reads_the_reply(
    client_script: Path, server: Server, person: str, admin: str, workspace: Path
) -> None:
    """HttpAgent's run ends in an interrupt naming the pending request; its resume approves
    it as the token's person; the file is written once and the client reads the reply; it
    holds each message it sent once, and the conversation's stream has them."""
    conversation = Conversation(client_script, server, person)
    try:
        first = conversation.next_run()
        assert first["error"] is None, first
        assert first["outcome"] == "interrupt", first
        (interrupt,) = first["interrupts"]
        assert first["pending"] == [interrupt["id"]]
        events = first["events"]
        assert events[0] == "RUN_STARTED" and events[-1] == "RUN_FINISHED", events
        for kind in ("TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END"):
            assert kind in events, events
        assert "TEXT_MESSAGE_START" not in events, "an echo, or an empty assistant message"
        request = _get(server, person, f"/requests/{interrupt['id']}")
        assert request["status"] == "pending", request
        assert request["tool_name"] == "write_file", request
        assert request["tool_args"]["path"] == "notes.md", request
        assert interrupt["toolCallId"] == request["tool_call_id"]
        assert interrupt["reason"] == "tool_call"
        assert interrupt["metadata"]["signoff"]["requestId"] == interrupt["id"]
        assert "approve" in interrupt["metadata"]["signoff"]["actions"]
        assert not (workspace / "notes.md").exists()
        assert _said_by_user(first) == [("user-1", PROMPT)], first["messages"]

        conversation.resume()
        done = conversation.next_run()
        followed = conversation.next_run()
    finally:
        conversation.close()

    assert done["error"] is None, done
    assert done["resume"] == [
        {"interruptId": interrupt["id"], "status": "resolved", "payload": {"approved": True}}
    ]
    assert done["outcome"] == "success", done
    assert done["pending"] == []
    events = done["events"]
    assert events[0] == "RUN_STARTED" and events[-1] == "RUN_FINISHED", events
    assert "TOOL_CALL_RESULT" in events and "TEXT_MESSAGE_CONTENT" in events, events
    (decision,) = [c["value"] for c in done["custom"] if c["name"] == "signoff.decision"]
    assert decision["requestId"] == interrupt["id"], decision
    assert decision["status"] == "approved" and decision["by"] == "alice", decision
    assert "notes.md" in done["finalText"], done["finalText"]
    assert done["result"] == done["finalText"]
    roles = [m["role"] for m in done["messages"]]
    assert roles[0] == "user" and roles[-2:] == ["tool", "assistant"], done["messages"]
    assert done["warnings"] == [], "the client stripped or dropped what we sent"

    assert [p.name for p in workspace.iterdir()] == ["notes.md"]
    assert (workspace / "notes.md").read_text() == "hello\n"
    audit = _get(server, admin, "/audit", request_id=interrupt["id"])["items"]
    decisions = [(e["actor"], e["to_status"]) for e in audit if e["action"] == "decide"]
    assert decisions == [("alice", "approved")], audit

    assert followed["error"] is None and followed["outcome"] == "success", followed
    assert followed["threadId"] == first["threadId"]
    assert followed["finalText"] != done["finalText"]
    task = _get(server, person, f"/tasks/{first['threadId']}")
    assert task["status"] == "Completed" and task["output"] == followed["finalText"], task
    # the client holds each message it sent once (the server echoes none back); the
    # conversation's own stream has both, under the client's ids
    assert _said_by_user(done) == [("user-1", PROMPT)], done["messages"]
    sent = [("user-1", PROMPT), ("user-2", FOLLOW_UP)]
    assert _said_by_user(followed) == sent, followed["messages"]
    assert _replayed_user_messages(server, person, first["threadId"]) == sent
