"""The real `signoff inbox` process in a real terminal (tmux): see a request, approve it."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from signoff.service import Service
from signoff.store.sqlite import SQLiteStore
from signoff.testing import AGENT
from tests.tui.tmux import Tmux

pytest.importorskip("textual", reason="signoff inbox needs the tui extra")
pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


async def file_one(db: Path) -> str:
    """A pending shell call whose args hold markup; its id."""
    async with Service(SQLiteStore(db), read_file=None) as service:
        args = {"command": "[bold]make[/bold] deploy"}
        submitted = await service.submit(
            {"session_id": "s", "tool_name": "shell", "tool_args": args}, AGENT
        )
        return submitted.request.id


async def status_of(db: Path, request_id: str) -> str:
    """The request's status now."""
    async with Service(SQLiteStore(db), read_file=None) as service:
        return (await service.get(request_id)).status


def test_real_inbox_shows_a_request_and_a_approves_it(tmp_path: Path) -> None:
    """In a terminal the pending call shows (markup literal); `a` approves it; `q` quits."""
    db = tmp_path / "signoff.db"
    request_id = asyncio.run(file_one(db))
    env = {
        **os.environ,
        "SIGNOFF_USER": "tester",
        "XDG_CONFIG_HOME": str(tmp_path),
        "TERM": "xterm-256color",
    }
    tmux = Tmux(f"signoff-test-{uuid.uuid4().hex[:8]}", "inbox")
    command = [sys.executable, "-m", "signoff", "inbox", "--db", f"sqlite:///{db}"]
    subprocess.run(
        [
            "tmux",
            "-L",
            tmux.socket,
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-s",
            "inbox",
            "-x",
            "140",
            "-y",
            "40",
            *command,
        ],
        check=True,
        env=env,
    )
    try:
        screen = tmux.wait_for("1 pending")
        assert "[bold]make[/bold] deploy" in screen
        tmux.tmux("send-keys", "-t", tmux.session, "a")
        tmux.wait_for("0 pending")
        assert asyncio.run(status_of(db, request_id)) == "approved"
        tmux.tmux("send-keys", "-t", tmux.session, "q")
    finally:
        subprocess.run(["tmux", "-L", tmux.socket, "kill-server"], check=False)


async def file_three(db: Path) -> list[str]:
    """Three pending shell calls (the middle one's command holds an escape sequence); their
    ids, oldest first."""
    async with Service(SQLiteStore(db), read_file=None) as service:
        ids = []
        for command in ("echo one", "echo two\x1b[2J", "echo three"):
            body = {"session_id": "s", "tool_name": "shell", "tool_args": {"command": command}}
            ids.append((await service.submit(body, AGENT)).request.id)
        return ids


def test_after_a_decision_the_cursor_stays_and_the_notice_names_the_call(tmp_path: Path) -> None:
    """Approving the middle row leaves the cursor on that row (the next request moves up
    under it), and the notice names the tool and its args (escapes shown), not the id."""
    db = tmp_path / "signoff.db"
    ids = asyncio.run(file_three(db))
    env = {
        **os.environ,
        "SIGNOFF_USER": "tester",
        "XDG_CONFIG_HOME": str(tmp_path),
        "TERM": "xterm-256color",
    }
    tmux = Tmux(f"signoff-test-{uuid.uuid4().hex[:8]}", "inbox")
    command = [sys.executable, "-m", "signoff", "inbox", "--db", f"sqlite:///{db}"]
    subprocess.run(
        [
            *("tmux", "-L", tmux.socket, "-f", "/dev/null", "new-session", "-d", "-s", "inbox"),
            *("-x", "140", "-y", "40", *command),
        ],
        check=True,
        env=env,
    )
    try:
        tmux.wait_for("3 pending")
        tmux.tmux("send-keys", "-t", tmux.session, "j")
        tmux.wait_for(f"id {ids[1]}")  # the detail pane shows the middle request
        tmux.tmux("send-keys", "-t", tmux.session, "a")
        screen = tmux.wait_for("2 pending")
        assert "Approved shell echo two\\x1b[2J" in tmux.wait_for("Approved shell")
        assert f"{ids[1]}: approved" not in screen
        # the cursor is still on the second row, now the oldest request's
        tmux.wait_for(f"id {ids[0]}")
        assert asyncio.run(status_of(db, ids[1])) == "approved"
        assert asyncio.run(status_of(db, ids[0])) == "pending"
    finally:
        subprocess.run(["tmux", "-L", tmux.socket, "kill-server"], check=False)
