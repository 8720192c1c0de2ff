"""``signoff demo`` end to end: a real process opens a chat paused on an approval, fills a live
inbox, and approvals run."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.serving import bearer, free_port


@dataclass(frozen=True)
class Demo:
    """A running ``signoff demo``."""

    base: str
    """Its URL."""
    token: str
    """The admin token it printed."""
    workspace: Path
    """Where its files and database are."""
    lines: list[str]
    """What it printed before listening, up to "Ctrl+C stops."."""


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[Demo]:
    """A running ``signoff demo``: its URL, admin token, workspace and first lines."""
    port = free_port()
    workspace = tmp_path / "workspace"
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path), "COLUMNS": "200"}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "signoff",
            "demo",
            "--port",
            str(port),
            "--workspace",
            str(workspace),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert process.stdout is not None
    lines: list[str] = []
    while len(lines) < 12 and (not lines or lines[-1] != "Ctrl+C stops."):
        lines.append(process.stdout.readline().rstrip("\n"))
    token = next((x.split(": ", 1)[1] for x in lines if x.startswith("admin token: ")), "")
    base = f"http://127.0.0.1:{port}"
    try:
        assert token, lines
        wait_for(lambda: _healthy(base), "the demo server to listen")
        yield Demo(base, token, workspace, lines)
    finally:
        process.terminate()
        process.communicate(timeout=20)


def _healthy(base: str) -> bool:
    try:
        return httpx.get(f"{base}/healthz", timeout=1).status_code == 200
    except httpx.TransportError:
        return False


def wait_for(check: Any, what: str, seconds: float = 20) -> Any:
    """Poll ``check()`` until it returns something truthy."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_demo_opens_with_a_chat_paused_on_an_approval(demo: Demo) -> None:
    """The first link signs the admin in to a conversation of agent:demo waiting on a write."""
    http = httpx.Client(base_url=demo.base, headers=bearer(demo.token), timeout=30)
    assert demo.lines[0].startswith("open the chat, waiting for your approval")
    link = demo.lines[1].strip()
    login = f"{demo.base}/login?token={demo.token}&next=/chat/"
    assert link.startswith(login), demo.lines
    task_id = link.removeprefix(login)
    task = http.get(f"/api/v1/tasks/{task_id}").json()
    assert (task["agent"], task["user"], task["status"]) == ("demo", "admin", "Paused"), task
    assert task["prompt"] == "create welcome.md saying hello from the chat"
    (call,) = task["pending"]
    request = http.get(f"/api/v1/requests/{call['request_id']}").json()
    assert (request["status"], request["requested_by"]) == ("pending", "agent:demo")
    assert request["tool_name"] == "write_file"
    assert request["tool_args"] == {"path": "welcome.md", "content": "hello from the chat\n"}
    assert "+hello from the chat" in request["preview"]["diff"]
    # the link's sign-in confirms and then lands on the conversation page
    confirm = httpx.get(link, timeout=30)
    assert confirm.status_code == 200 and f'value="/chat/{task_id}"' in confirm.text
    approved = http.post(
        f"/api/v1/requests/{call['request_id']}/decision", json={"type": "approve"}
    )
    assert approved.is_success, approved.text

    def completed() -> dict[str, Any] | None:
        now: dict[str, Any] = http.get(f"/api/v1/tasks/{task_id}").json()
        return now if now["status"] == "Completed" else None

    done = wait_for(completed, "the conversation to go on after the approval")
    assert "wrote 20 characters to welcome.md" in done["output"]
    assert (demo.workspace / "welcome.md").read_text() == "hello from the chat\n"
    http.close()


def test_demo_files_a_mix_of_requests_and_runs_what_is_approved(demo: Demo) -> None:
    """Within seconds the inbox holds a diffed file edit, shell calls, a choice and questions."""
    base, token, workspace = demo.base, demo.token, demo.workspace
    http = httpx.Client(base_url=base, headers=bearer(token), timeout=30)

    def pending() -> list[dict[str, Any]] | None:
        page = http.get("/api/v1/requests?status=pending").json()["items"]
        # the queue agent's; the chat's own request is the other test's
        items = [r for r in page if r["requested_by"] == "demo-agent"]
        return items if len(items) >= 5 else None

    items = wait_for(pending, "five pending requests")
    kinds = sorted((r["kind"], r.get("tool_name") or "") for r in items)
    assert kinds == [
        ("approval", "shell"),
        ("approval", "shell"),
        ("approval", "write_file"),
        ("choice", ""),
        ("questions", ""),
    ]
    edit = next(r for r in items if r.get("tool_name") == "write_file")
    assert "-TODO: say hi" in edit["preview"]["diff"] and "+hello" in edit["preview"]["diff"]
    assert http.post(f"/api/v1/requests/{edit['id']}/decision", json={"type": "approve"}).is_success

    def completed() -> dict[str, Any] | None:
        request: dict[str, Any] = http.get(f"/api/v1/requests/{edit['id']}").json()
        return request if request["status"] == "completed" else None

    done = wait_for(completed, "the worker to run the approved edit")
    assert done["result"]["result"] == "wrote 6 bytes to notes.md"
    assert (workspace / "notes.md").read_text() == "hello\n"
    shell = next(r for r in items if r.get("tool_args", {}).get("command") == "ls -la")
    rejected = http.post(
        f"/api/v1/requests/{shell['id']}/decision", json={"type": "reject", "reason": "no"}
    )
    assert rejected.json()["status"] == "rejected"
    assert (workspace / "logs").is_dir()  # the unapproved delete never ran
    http.close()
