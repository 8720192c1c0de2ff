"""``signoff demo`` end to end: a real process opens a chat paused on an approval, fills a live
inbox, and approvals run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from signoff.cli.demo import DEMO_POLICY_SOURCE
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
    process: subprocess.Popen[str]
    """The process."""
    later: list[str]
    """What it printed after that, read as it comes."""
    reader: threading.Thread
    """The thread reading it."""


def start_demo(home: Path, *extra: str) -> Demo:
    """Start ``signoff demo EXTRA`` (temporary directories in ``home/tmp``) and wait until it
    listens; a thread keeps reading what it prints."""
    port = free_port()
    (home / "tmp").mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "XDG_CONFIG_HOME": str(home),
        "TMPDIR": str(home / "tmp"),
        "COLUMNS": "200",
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "signoff", "demo", "--port", str(port), *extra],
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
    where = next((x for x in lines if x.startswith("signoff demo on ")), "")
    later: list[str] = []
    stdout = process.stdout
    reader = threading.Thread(target=lambda: later.extend(x.rstrip("\n") for x in stdout))
    reader.start()
    demo = Demo(
        f"http://127.0.0.1:{port}",
        token,
        Path(where.split("; workspace ", 1)[-1]),
        lines,
        process,
        later,
        reader,
    )
    try:
        assert token, "the demo printed no admin token"
        wait_for(lambda: _healthy(demo.base), "the demo server to listen")
    except BaseException:
        stop(demo)
        raise
    return demo


def stop(demo: Demo, how: signal.Signals = signal.SIGKILL) -> int:
    """Stop the demo with ``how``, read all it printed and close its pipes; its exit code.
    A demo still running after 20 seconds is killed (and waited for) before the timeout is
    raised, so no test leaves one behind."""
    demo.process.send_signal(how)
    try:
        code = demo.process.wait(timeout=20)
    finally:
        if demo.process.poll() is None:
            demo.process.kill()
            demo.process.wait()
        demo.reader.join(timeout=10)
        assert demo.process.stdout is not None and demo.process.stderr is not None
        demo.process.stdout.close()
        if not demo.process.stderr.closed:  # not stopped before
            with demo.process.stderr:
                errors = demo.process.stderr.read()
            demo.later.extend(f"stderr: {line}" for line in errors.splitlines())
    return code


@contextmanager
def demos_running(*homes: Path) -> Iterator[list[Demo]]:
    """Demos started side by side, one per home; every one started is stopped (killed and
    waited for, its pipes closed) on the way out, whether the test passed or not."""
    with ThreadPoolExecutor() as pool:
        futures = [pool.submit(start_demo, home) for home in homes]
    started = [f.result() for f in futures if f.exception() is None]
    try:
        failed = next((f.exception() for f in futures if f.exception() is not None), None)
        if failed is not None:
            raise failed
        yield started
    finally:
        for running in started:
            stop(running)


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[Demo]:
    """A running ``signoff demo --workspace DIR``: its URL, admin token, workspace and lines."""
    running = start_demo(tmp_path, "--workspace", str(tmp_path / "workspace"))
    try:
        yield running
    finally:
        stop(running)


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
    # where its rule comes from, in words (not the parser's "<string>"), the same in both
    ruled = f'ask: need_approval "write_file" in {DEMO_POLICY_SOURCE}'
    assert (edit["policy_note"], edit["context"]["policy"]) == (ruled, ruled)
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
    # the demo's terminal says what became of each, as it happens
    for line in (
        "approved by admin: write_file notes.md -> wrote 6 bytes to notes.md",
        "rejected by admin (no): shell ls -la",
    ):
        wait_for(lambda line=line: line in demo.later, repr(line))
    http.close()
    # a workspace given with --workspace stays when the demo stops
    assert stop(demo, signal.SIGTERM) == 0
    assert (workspace / "demo.db").is_file() and (workspace / "notes.md").is_file()
    assert not any(line.startswith("removed") for line in demo.later)


def test_the_temporary_workspace_is_removed_on_sigint_and_sigterm(tmp_path: Path) -> None:
    """Without --workspace the demo's temporary directory is gone after Ctrl+C or SIGTERM,
    and the demo says so."""
    with demos_running(tmp_path / "a", tmp_path / "b") as demos, ThreadPoolExecutor() as pool:
        made = [d.workspace for d in demos]
        assert [w.parent.parent for w in made] == [tmp_path / "a", tmp_path / "b"]
        assert all(w.is_dir() for w in made)
        hostile_outcome_is_printed_escaped(demos[0])
        codes = list(pool.map(stop, demos, (signal.SIGINT, signal.SIGTERM)))
    assert codes == [0, 0]
    assert not made[0].exists() and not made[1].exists()
    assert f"removed the demo's workspace {made[1]}" in demos[1].later


def hostile_outcome_is_printed_escaped(demo: Demo) -> None:
    """A call whose args hold terminal escapes (one pretending to be another outcome line),
    rejected with a reason that does too: its line shows them as visible escapes, on one
    line."""
    with httpx.Client(base_url=demo.base, headers=bearer(demo.token), timeout=30) as http:
        body = {
            "session_id": "hostile",
            "tool_name": "shell",
            "tool_args": {"command": "ls\r\x1b[2Kapproved by admin: write_file safe.md"},
        }
        filed = http.post("/api/v1/requests", json=body).json()
        reason = {"type": "reject", "reason": "no\n\x1b[31mreally"}
        assert http.post(f"/api/v1/requests/{filed['id']}/decision", json=reason).is_success
    shown = (
        "rejected by admin (no\\x0a\\x1b[31mreally): "
        "shell ls\\x0d\\x1b[2Kapproved by admin: write_file safe.md"
    )
    wait_for(lambda: shown in demo.later, f"{shown!r} in {demo.later}")
    assert not any("\x1b" in line or "\r" in line for line in demo.later)
